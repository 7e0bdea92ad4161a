"""The `AuditStore` port for each backend: scratch read models and raw event-log reads.

SQLite: the scratch is a temporary database file made with the live tables' own DDL and
written on its own connection while the bulk of the log replays; for the comparison it is
ATTACHed to a live connection inside `BEGIN` (a WAL snapshot) or `BEGIN IMMEDIATE` (the
writers' lock, for a rebuild). PostgreSQL: the scratch is a temporary schema
(`session_awareness_audit_<hex>`, dropped afterwards) whose tables are `LIKE` the live ones
(with their keys but not their secondary indexes: the copy is only written and read by key);
the comparison runs in a REPEATABLE READ transaction, a rebuild under the library's own
`LOCK TABLE … IN EXCLUSIVE MODE` on the events table, which every writer takes first.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Notification

from session_awareness.application import projection as p
from session_awareness.infrastructure.readmodel import READ_MODEL_TABLES, Dialect
from session_awareness.infrastructure.scratch import EventLog, ScratchStore, View, q
from session_awareness.logs import get_logger

log = get_logger()
SCRATCH_SCHEMA_PREFIX = "session_awareness_audit_"
_ATTACHED = "session_awareness_audit"
#: At most this many events per page on SQLite, where a page costs no round trip: a
#: replay of 1,000,000 events ran at ~88,000 events/s in pages of 200 and ~70,000-77,000
#: in pages of 1,000 (each stage's objects of a small page stay in the CPU caches).
SQLITE_PAGE = 200


def audit_store(live: Any) -> Any:
    """The audit port over a live read-model recorder."""
    if live.dialect.placeholder == "%s":
        return PostgresAudit(live)
    return SQLiteAudit(live)


class _Audit:
    id_column = ""

    def __init__(self, live: Any) -> None:
        self.live = live
        self.log = EventLog(live, self.id_column)

    def last_notification_id(self) -> int:
        return int(self.live.max_notification_id() or 0)

    def notifications(self, after: int, limit: int) -> Sequence[Notification]:
        with self.live.datastore.transaction(commit=False) as c:
            return self.log.select(c, "{id} > ?", (after,), limit)

    def streams(self, originator_ids: Collection[UUID]) -> Sequence[Notification]:
        ids = [self.live.param_id(i) for i in originator_ids]
        marks = ", ".join("?" for _ in ids)
        with self.live.datastore.transaction(commit=False) as c:
            return self.log.select(c, f"originator_id IN ({marks})", ids, 2**62)


class SQLiteAudit(_Audit):
    id_column = "rowid"

    @contextmanager
    def scratch(self) -> Iterator[SQLiteScratch]:
        folder = Path(tempfile.mkdtemp(prefix="session-awareness-audit-"))
        scratch = SQLiteScratch(self, folder / "scratch.db")
        try:
            yield scratch
        finally:
            scratch.conn.close()
            shutil.rmtree(folder, ignore_errors=True)

    def schema(self) -> list[str]:
        """The live read-model tables' own DDL (their keys with them), without their
        secondary indexes: the scratch copy is only written and read by key."""
        marks = ", ".join("?" for _ in READ_MODEL_TABLES)
        rows = self.live.fetch(
            f"SELECT sql FROM sqlite_master WHERE tbl_name IN ({marks}) AND type = 'table' "
            "ORDER BY name",
            list(READ_MODEL_TABLES),
        )
        return [row["sql"] for row in rows]


class SQLiteScratch:
    """Replayed rows go to a file of their own, fast and unsynced (it is thrown away)."""

    def __init__(self, audit: SQLiteAudit, path: Path) -> None:
        self.audit, self.path = audit, path
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        for pragma in ("journal_mode = OFF", "synchronous = OFF"):
            self.conn.execute(f"PRAGMA {pragma}")
        for ddl in audit.schema():
            self.conn.execute(ddl)
        self.store = ScratchStore(Dialect("", "?", "MAX", "instr"), native_ids=False)

    def notifications(self, after: int, limit: int) -> Sequence[Notification]:
        return self.audit.notifications(after, min(limit, SQLITE_PAGE))

    def apply(self, changes: Sequence[p.RowChange]) -> None:
        c = self.conn.cursor()
        c.execute("BEGIN")
        self.store.apply_changes_in_bulk(c, changes)
        c.execute("COMMIT")

    @contextmanager
    def against_live(self, *, lock: bool) -> Iterator[View]:
        self.conn.close()
        attached = ScratchStore(Dialect(q(_ATTACHED) + ".", "?", "MAX", "instr"), native_ids=False)
        with self.audit.live.datastore.get_connection(commit=lock) as conn:
            c = conn.cursor().sqlite_cursor
            c.execute(f"ATTACH DATABASE ? AS {q(_ATTACHED)}", (str(self.path),))
            try:
                c.execute("BEGIN IMMEDIATE" if lock else "BEGIN")
                try:
                    yield View(c, self.audit.log, attached, '"main".', "IS NOT")
                finally:
                    c.execute("COMMIT" if lock else "ROLLBACK")
            finally:
                c.execute(f"DETACH DATABASE {q(_ATTACHED)}")


class PostgresAudit(_Audit):
    id_column = "notification_id"

    @contextmanager
    def scratch(self) -> Iterator[PostgresScratch]:
        schema = SCRATCH_SCHEMA_PREFIX + uuid.uuid4().hex[:12]
        prefix = q(schema) + "."
        live_prefix = self.live.dialect.schema_prefix
        with self.live.datastore.transaction(commit=True) as c:
            c.execute(f"CREATE SCHEMA {q(schema)}")
            for table, keys in READ_MODEL_TABLES.items():
                # Columns, defaults and constraints; of the indexes only the key: the scratch
                # copy is only written and read by key.
                c.execute(
                    f"CREATE TABLE {prefix}{q(table)} (LIKE {live_prefix}{q(table)} "
                    f"INCLUDING DEFAULTS INCLUDING CONSTRAINTS, PRIMARY KEY ({keys}))"
                )
        try:
            yield PostgresScratch(self, prefix)
        finally:
            try:
                with self.live.datastore.transaction(commit=True) as c:
                    c.execute(f"DROP SCHEMA {q(schema)} CASCADE")
            except Exception as error:  # noqa: BLE001 -- never hide the audit's own outcome
                log.warning("audit_scratch_left", schema=schema, error=repr(error))


class PostgresScratch:
    """Replayed rows go to the scratch schema, a page per transaction, copied and pipelined."""

    def __init__(self, audit: PostgresAudit, prefix: str) -> None:
        self.audit = audit
        self.store = ScratchStore(Dialect(prefix, "%s", "GREATEST", "strpos"), native_ids=True)

    def notifications(self, after: int, limit: int) -> Sequence[Notification]:
        return self.audit.notifications(after, limit)

    def apply(self, changes: Sequence[p.RowChange]) -> None:
        live = self.audit.live
        with live.long_running(), live.datastore.transaction(commit=True) as c:
            self.store.apply_changes_in_bulk(c, changes)

    @contextmanager
    def against_live(self, *, lock: bool) -> Iterator[View]:
        live = self.audit.live
        with (
            live.long_running(),
            live.datastore.get_connection() as conn,
            conn.transaction(force_rollback=not lock),
        ):
            c = conn.cursor()
            if lock:
                for statement in live.lock_table_statements:
                    c.execute(statement)
            else:
                c.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield View(
                c, self.audit.log, self.store, live.dialect.schema_prefix, "IS DISTINCT FROM"
            )
