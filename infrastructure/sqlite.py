"""The embedded default store: the library's SQLite recorder plus the inline read models.

The read models are written by the projection in the transaction that stores the events
(DESIGN D4), so every notice is answerable the moment it exists.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Collection, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    InterfaceError,
    OperationalError,
    PersistenceError,
    StoredEvent,
)
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteApplicationRecorder,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteCursor,
    SQLiteDatastore,
)

from session_awareness.application import projection as p
from session_awareness.infrastructure.readmodel import Dialect, ReadModelStore

#: Prepared statements each connection keeps (the record path uses about ten).
STATEMENT_CACHE = 64


class SQLiteReadModelRecorder(ReadModelStore, SQLiteApplicationRecorder):
    """Stores events and applies the projection's row changes in the same transaction."""

    dialect = Dialect(
        schema_prefix="", placeholder="?", greatest="MAX", strpos="instr",
        id_type="TEXT", int_type="INTEGER", keyed=" WITHOUT ROWID",
    )  # fmt: skip

    def __init__(self, datastore: SQLiteDatastore, events_table_name: str = "stored_events"):
        datastore.pool.__class__ = _StatementCachingPool  # before it opens a connection
        super().__init__(datastore, events_table_name)
        self._reader = threading.local()
        self._readers: list[tuple[weakref.ref[threading.Thread], sqlite3.Connection]] = []
        self._readers_lock = threading.Lock()
        self._readers_closed = False

    def fetch_tuples(self, template: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """On a file database, each thread reads on a connection of its own, outside the
        library's pool: its checkout (locks, semaphore, bookkeeping) costs ~4 us, half the
        5-event page's statement, and its connections cache one prepared statement only
        (`cached_statements=True`). An in-memory database is shared through the pool."""
        pool = self.datastore.pool
        if pool.is_sqlite_memory_mode:
            with self.datastore.get_connection(commit=False) as conn:
                cursor = conn.cursor().sqlite_cursor
                cursor.row_factory = None  # tuples, not `sqlite3.Row`
                try:
                    return cursor.execute(self.sql(template), params).fetchall()
                finally:
                    cursor.close()
        reader: sqlite3.Connection | None = getattr(self._reader, "connection", None)
        if reader is None:
            try:
                reader = sqlite3.connect(
                    pool.db_name, uri=True, check_same_thread=False, isolation_level=None,
                    timeout=pool.lock_timeout or SQLITE3_DEFAULT_LOCK_TIMEOUT,
                )  # fmt: skip
            except sqlite3.Error as error:
                raise _library_error(error) from error
            with self._readers_lock:
                if self._readers_closed:
                    reader.close()
                    raise InterfaceError("the store is closed")
                ended = [c for t, c in self._readers if not ((thread := t()) and thread.is_alive())]
                self._readers = [(t, c) for t, c in self._readers if c not in ended]
                self._readers.append((weakref.ref(threading.current_thread()), reader))
            for connection in ended:  # threads that have ended: hosts with a thread per request
                connection.close()
            self._reader.connection = reader
        try:
            return reader.execute(self.sql(template), params).fetchall()
        except sqlite3.Error as error:
            raise _library_error(error) from error

    def close_readers(self) -> None:
        """Close every thread's reading connection (the service is closing)."""
        with self._readers_lock:
            self._readers_closed = True
            readers, self._readers = self._readers, []
        for _, reader in readers:
            reader.close()

    def originators_after(self, position: int, limit: int) -> list[tuple[int, UUID, int]]:
        """The notification log after `position`, without the events' state (the aggregate
        cache's look); one statement, no explicit transaction."""
        rows = self.fetch_tuples(
            f"SELECT rowid, originator_id, originator_version FROM {self.events_table_name} "  # noqa: S608 -- the library's table name
            "WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (position, limit),
        )
        return [(row[0], UUID(row[1]), row[2]) for row in rows]

    def construct_create_table_statements(self) -> list[str]:
        return [*super().construct_create_table_statements(), *self.read_model_ddl()]

    def _insert_events(
        self,
        c: SQLiteCursor,
        stored_events: Sequence[StoredEvent],
        *,
        projected_events: Sequence[Any] = (),
        quiet_notices: Collection[UUID] = (),
        **kwargs: Any,
    ) -> Sequence[int] | None:
        notification_ids = super()._insert_events(c, stored_events, **kwargs)
        if projected_events:
            if notification_ids is None:  # the SQLite recorder always returns them
                raise RuntimeError("the event store returned no notification ids")
            positions = list(zip(notification_ids, projected_events, strict=True))
            self.apply_inline(c, p.project(positions), quiet_notices)
        return notification_ids


class _StatementCachingPool(SQLiteConnectionPool):
    """The library's pool, with connections that keep their prepared statements.

    The library opens its connections with `cached_statements=True`, a cache of one statement,
    so a record re-prepares each of its ~8 statements every time (~85 us of CPU per record,
    measured). Otherwise the same connection set-up: WAL on a file database, `sqlite3.Row`."""

    def _create_connection(self) -> SQLiteConnection:
        try:
            c = sqlite3.connect(
                database=self.db_name, uri=True, check_same_thread=False, isolation_level=None,
                cached_statements=STATEMENT_CACHE,
                timeout=self.lock_timeout or SQLITE3_DEFAULT_LOCK_TIMEOUT,
            )  # fmt: skip
        except (sqlite3.Error, TypeError) as error:
            raise InterfaceError(error) from error
        if "mode=ro" in self.db_name:
            c.execute("PRAGMA query_only = ON")  # and never switch a read-only file to WAL
        elif not self.is_sqlite_memory_mode and not self.is_journal_mode_wal:
            mode = c.execute("PRAGMA journal_mode").fetchone()[0]
            if mode.lower() != "wal":
                c.execute("PRAGMA journal_mode=WAL")
                self.journal_mode_was_changed_to_wal = True
            self.is_journal_mode_wal = True
        c.row_factory = sqlite3.Row
        return SQLiteConnection(sqlite_conn=c, max_age=self.max_age)


def _library_error(error: sqlite3.Error) -> PersistenceError:
    """The library's error for a sqlite3 one, as its own connections raise them (so the
    service's guard turns a lost database into `StoreUnavailableError`)."""
    if isinstance(error, sqlite3.OperationalError):
        return OperationalError(str(error))
    if isinstance(error, sqlite3.InterfaceError):
        return InterfaceError(str(error))
    return PersistenceError(str(error))
