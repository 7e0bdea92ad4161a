"""The audit's scratch on SQLite: a temporary database file made with the live tables' own
DDL and written on its own connection while the bulk of the log replays; for the
comparison it is ATTACHed to a live connection inside `BEGIN` (a WAL snapshot) or
`BEGIN IMMEDIATE` (the writers' lock, for a rebuild), committed only when the comparison
(and the swap) ran to its end.

Run by the maintenance (its check's rebuild, ADR 044), every connection it uses is the
maintenance's (R-M2, `application/interruption.py`): the live store's are its checkouts,
the scratch's own is `holding_own`, and the swap waits for the writers' lock in turns the
close can end (`begin_immediately`). An interrupted rebuild has written nothing live."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from eventsourcing.persistence import Notification

from session_awareness.application import projection as p
from session_awareness.application.interruption import CURRENT
from session_awareness.infrastructure.readmodel.audit_tables import Audit, ScratchStore, View, q
from session_awareness.infrastructure.readmodel.tables import READ_MODEL_TABLES
from session_awareness.infrastructure.sqlite_store import begin_immediately, holding_own

if TYPE_CHECKING:
    from pathlib import Path

_ATTACHED = "session_awareness_audit"
#: At most this many events per page on SQLite, where a page costs no round trip: a
#: replay of 1,000,000 events ran at ~88,000 events/s in pages of 200 and ~70,000-77,000
#: in pages of 1,000 (each stage's objects of a small page stay in the CPU caches).
SQLITE_PAGE = 200


class SQLiteAudit(Audit):
    @contextmanager
    def scratch(self) -> Iterator[SQLiteScratch]:
        import shutil  # noqa: PLC0415 -- only an audit makes a scratch; a hook run never does
        import tempfile  # noqa: PLC0415
        from pathlib import Path  # noqa: PLC0415

        folder = Path(tempfile.mkdtemp(prefix="session-awareness-audit-"))
        try:
            scratch = SQLiteScratch(self, folder / "scratch.db")
            try:
                yield scratch
            finally:
                scratch.conn.close()
        finally:
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
        schema = audit.schema()
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            with holding_own(self.conn):
                for pragma in ("journal_mode = OFF", "synchronous = OFF"):
                    self.conn.execute(f"PRAGMA {pragma}")
                for ddl in schema:
                    self.conn.execute(ddl)
        except BaseException:
            self.conn.close()
            raise
        self.store = ScratchStore(audit.live.dialect.with_prefix(""))

    def notifications(self, after: int, limit: int) -> Sequence[Notification]:
        return self.audit.notifications(after, min(limit, SQLITE_PAGE))

    def notifications_of(
        self, topics: Collection[str], after: int, upto: int
    ) -> Sequence[Notification]:
        return self.audit.notifications_of(topics, after, upto)

    def apply(self, changes: Sequence[p.RowChange]) -> None:
        with holding_own(self.conn):
            c = self.conn.cursor()
            c.execute("BEGIN")
            self.store.apply_changes_in_bulk(c, changes)
            c.execute("COMMIT")

    @contextmanager
    def against_live(self, *, lock: bool) -> Iterator[View]:
        """The scratch ATTACHed to a live connection in one transaction (with `lock`, the
        writers' lock): committed once the block ran to its end; any failure (an
        interrupted statement among them) closes the connection instead, which rolls the
        transaction back and is never pooled again, so a swap is written whole or not at
        all."""
        self.conn.close()
        live = self.audit.live
        attached = ScratchStore(live.dialect.with_prefix(q(_ATTACHED) + "."))
        interruption = CURRENT.get()  # the maintenance's: its close may end the lock's wait
        with live.datastore.get_connection(commit=lock) as conn:
            c = conn.cursor().sqlite_cursor
            try:
                c.execute(f"ATTACH DATABASE ? AS {q(_ATTACHED)}", (str(self.path),))
                if lock and interruption is not None:
                    begin_immediately(c.connection, interruption)
                else:
                    c.execute("BEGIN IMMEDIATE" if lock else "BEGIN")
                yield View(c, self.audit.log, attached, '"main".', "IS NOT")
                c.execute("COMMIT" if lock else "ROLLBACK")
                c.execute(f"DETACH DATABASE {q(_ATTACHED)}")
            except BaseException:
                conn.close()  # the pool drops a closed connection
                raise
