"""The audit's scratch on SQLite: a temporary database file made with the live tables' own
DDL and written on its own connection while the bulk of the log replays; for the
comparison it is ATTACHed to a live connection inside `BEGIN` (a WAL snapshot) or
`BEGIN IMMEDIATE` (the writers' lock, for a rebuild)."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from eventsourcing.persistence import Notification

from session_awareness.application import projection as p
from session_awareness.infrastructure.readmodel.audit_tables import Audit, ScratchStore, View, q
from session_awareness.infrastructure.readmodel.tables import READ_MODEL_TABLES

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
        self.store = ScratchStore(audit.live.dialect.with_prefix(""))

    def notifications(self, after: int, limit: int) -> Sequence[Notification]:
        return self.audit.notifications(after, min(limit, SQLITE_PAGE))

    def notifications_of(
        self, topics: Collection[str], after: int, upto: int
    ) -> Sequence[Notification]:
        return self.audit.notifications_of(topics, after, upto)

    def apply(self, changes: Sequence[p.RowChange]) -> None:
        c = self.conn.cursor()
        c.execute("BEGIN")
        self.store.apply_changes_in_bulk(c, changes)
        c.execute("COMMIT")

    @contextmanager
    def against_live(self, *, lock: bool) -> Iterator[View]:
        self.conn.close()
        live = self.audit.live
        attached = ScratchStore(live.dialect.with_prefix(q(_ATTACHED) + "."))
        with live.datastore.get_connection(commit=lock) as conn:
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
