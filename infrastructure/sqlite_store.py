"""The embedded store's connections: the library's SQLite factory, datastore and pool,
extended where the service needs more.

`ServiceSQLiteFactory` (the persistence module's factory, by topic) builds a
`ServiceSQLiteDatastore`, whose `ServiceSQLitePool` opens connections that never switch a
read-only file to WAL. The read models on top are
`infrastructure/readmodel/sqlite_recorder.py`.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from typing import Any

from eventsourcing.persistence import InterfaceError, OperationalError, PersistenceError
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteDatastore,
    SQLiteFactory,
)


class _MostRecentFirst(deque[SQLiteConnection]):
    """The pool's idle connections, handed out last returned first. The library's pool is
    first in, first out: once a second thread (the background maintenance, a reader) has
    made it hold two connections, one thread's commands alternate between them, and each
    finds its page cache stale from the other's last write (~6% of a record's CPU)."""

    def popleft(self) -> SQLiteConnection:
        return self.pop()


class ServiceSQLitePool(SQLiteConnectionPool):
    """The library's pool, with connections that, on a file opened read-only (`mode=ro`), are
    read-only and leave the journal mode alone. Otherwise the same connection set-up: WAL on
    a file database, `sqlite3.Row`; the statement cache is sqlite3's default (a larger
    cache measured no effect, ADR 021)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._pool = _MostRecentFirst()

    def _create_connection(self) -> SQLiteConnection:
        try:
            c = sqlite3.connect(
                database=self.db_name, uri=True, check_same_thread=False, isolation_level=None,
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


#: The datastore's options that are its pool's.
_POOL_OPTIONS = ("lock_timeout", "pool_size", "max_overflow", "pool_timeout", "max_age", "pre_ping")


class ServiceSQLiteDatastore(SQLiteDatastore):
    """The library's datastore on a `ServiceSQLitePool`."""

    def __init__(self, db_name: str, **options: Any) -> None:
        super().__init__(db_name, **options)
        self.pool.close()  # the library's own, never connected
        pooling = {name: options[name] for name in _POOL_OPTIONS if name in options}
        self.pool = ServiceSQLitePool(db_name=db_name, **pooling)


class ServiceSQLiteFactory(SQLiteFactory):
    """The library's SQLite factory (its environment keys, read by it), on a
    `ServiceSQLiteDatastore`."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        library = self.datastore
        self.datastore = ServiceSQLiteDatastore(
            library.pool.db_name,
            lock_timeout=library.pool.lock_timeout,
            single_row_tracking=library.single_row_tracking,
            originator_id_type=library.originator_id_type,
        )
        library.close()  # never connected


def library_error(error: sqlite3.Error) -> PersistenceError:
    """The library's error for a sqlite3 one, as its own connections raise them (so the
    service's guard turns a lost database into `StoreUnavailableError`)."""
    if isinstance(error, sqlite3.OperationalError):
        return OperationalError(str(error))
    if isinstance(error, sqlite3.InterfaceError):
        return InterfaceError(str(error))
    return PersistenceError(str(error))
