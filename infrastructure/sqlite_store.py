"""The embedded store's connections: the library's SQLite factory, datastore and pool,
extended where the service needs more.

`ServiceSQLiteFactory` (the persistence module's factory, by topic) builds a
`ServiceSQLiteDatastore`, whose `ServiceSQLitePool` opens connections that never switch a
read-only file to WAL. Every connection the maintenance checks out of it, and every one it
opens itself (`holding_own`), can be ended from the closing thread (`held_connection`,
`application/interruption.py`). The read models on top are
`infrastructure/readmodel/sqlite_recorder.py`.
"""

from __future__ import annotations

import sqlite3
import time
from collections import deque
from collections.abc import Iterator
from contextlib import _GeneratorContextManager, contextmanager
from typing import Any

from eventsourcing.persistence import InterfaceError, OperationalError, PersistenceError
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteCursor,
    SQLiteDatastore,
    SQLiteFactory,
    SQLiteTransaction,
)

from session_awareness.application.interruption import CURRENT, Held, Interruption


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

    def close(self) -> None:
        """Close the pool: its idle connections now, each one in use as its user returns it
        (`put_connection`). The library's close closes the connections in use too, and
        closing a sqlite3 connection while another thread runs a statement on it crashes
        the process: a host closing the service while its calls are under way."""
        with self._put_condition:
            if self._closed:
                return
            while self._pool:
                self._pool.pop().close()
            self._closed = True

    def get_connection(
        self, timeout: float | None = None, *, is_writer: bool | None = None
    ) -> SQLiteConnection:
        """The library's checkout; on a closed pool a store error (`InterfaceError`), as a
        call of the closed service raises, rather than the library's own exception."""
        if self._closed:
            raise InterfaceError("the store is closed")
        return super().get_connection(timeout, is_writer=is_writer)

    def put_connection(self, conn: SQLiteConnection) -> None:
        """The library's return of a connection; once the pool is closed, the connection is
        closed as it comes back, its locks released as the library releases them."""
        with self._put_condition:  # re-entrant: the library's return takes it again
            if not self._closed:
                super().put_connection(conn)
                return
            self._in_use.pop(id(conn), None)
            conn.close()
            conn.in_use.release()
            is_writer, conn.is_writer = conn.is_writer, None
            if is_writer is True:
                self._num_writers -= 1
                self._writer_lock.release()
            elif is_writer is False:
                with self._no_readers:
                    self._num_readers -= 1
                    self._no_readers.notify()
            self._put_condition.notify()

    def _create_connection(self) -> SQLiteConnection:
        if self._closed:  # a thread that was waiting for a connection as the pool closed
            raise InterfaceError("the store is closed")
        return self._open_connection()

    def _open_connection(self) -> SQLiteConnection:
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
        return ServiceSQLiteConnection(sqlite_conn=c, max_age=self.max_age)


class ServiceSQLiteConnection(SQLiteConnection):
    """The library's connection, with the sqlite3 connection it wraps at hand."""

    def __init__(self, sqlite_conn: sqlite3.Connection, max_age: float | None) -> None:
        super().__init__(sqlite_conn=sqlite_conn, max_age=max_age)
        self.sqlite = sqlite_conn


#: A wait for the write lock inside SQLite's busy handler is beyond `interrupt()`: the
#: maintenance waits for it this many milliseconds at a time, and looks whether it was
#: interrupted in between.
LOCK_TICK_MS = 50


def locked(error: sqlite3.Error) -> bool:
    """Whether `error` is SQLite's "database is locked" (another connection writes)."""
    return getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_BUSY


def begin_immediately(conn: sqlite3.Connection, interruption: Interruption) -> None:
    """`BEGIN IMMEDIATE`: the write lock before anything else, waited for `LOCK_TICK_MS` at a
    time until the connection's own lock timeout, `interruption` looked at in between (so a
    close ends the wait at once)."""
    budget_ms = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
    deadline = time.monotonic() + budget_ms / 1000
    conn.execute(f"PRAGMA busy_timeout = {LOCK_TICK_MS}")
    try:
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as error:
                if not locked(error) or time.monotonic() >= deadline:
                    raise
                interruption.check()
            else:
                return
    finally:
        conn.execute(f"PRAGMA busy_timeout = {budget_ms}")


class _Immediate(SQLiteTransaction):
    """The library's transaction (its commit, its rollback, its errors), begun with
    `begin_immediately`."""

    def __init__(self, connection: ServiceSQLiteConnection, interruption: Interruption) -> None:
        super().__init__(connection, commit=True)
        self._sqlite, self._interruption = connection.sqlite, interruption

    def __enter__(self) -> SQLiteCursor:
        try:
            begin_immediately(self._sqlite, self._interruption)
        except sqlite3.Error as error:
            raise library_error(error) from error
        return self.connection.cursor()


#: The datastore's options that are its pool's.
_POOL_OPTIONS = ("lock_timeout", "pool_size", "max_overflow", "pool_timeout", "max_age", "pre_ping")


class ServiceSQLiteDatastore(SQLiteDatastore):
    """The library's datastore on a `ServiceSQLitePool`. In the maintenance's interruption
    scope (`application/interruption.py`), every checkout is a `held_connection` and every
    write transaction an `immediate_transaction`, whatever reads or writes through it (the
    read models' queries, the audit's reads and its swap, the marks): the close can end
    their statements. A caller's thread has no scope: its checkouts are the library's."""

    def __init__(self, db_name: str, **options: Any) -> None:
        super().__init__(db_name, **options)
        self.pool.close()  # the library's own, never connected
        pooling = {name: options[name] for name in _POOL_OPTIONS if name in options}
        self.pool = ServiceSQLitePool(db_name=db_name, **pooling)

    # Both return what the library's own (`@contextmanager` methods) return, the same type.
    def get_connection(self, *, commit: bool) -> _GeneratorContextManager[SQLiteConnection]:
        interruption = CURRENT.get()
        if interruption is None:
            return super().get_connection(commit=commit)
        return held_connection(self, interruption, commit=commit)

    def transaction(self, *, commit: bool) -> _GeneratorContextManager[SQLiteCursor]:
        interruption = CURRENT.get()
        if interruption is not None and commit:
            return immediate_transaction(self, interruption)
        return super().transaction(commit=commit)  # its checkout is `get_connection`'s


@contextmanager
def held_connection(
    datastore: SQLiteDatastore, interruption: Interruption, *, commit: bool
) -> Iterator[SQLiteConnection]:
    """A checkout of `datastore`'s pool for the maintenance (`interruption`'s scope): the
    close may interrupt its statement, and a connection it did is closed, never pooled
    again."""
    interruption.check()
    with SQLiteDatastore.get_connection(datastore, commit=commit) as conn:
        held: Held | None = None
        try:
            with interruption.holding(_interrupt(conn)) as held:
                yield conn
        finally:
            if held is not None and held.ended:
                conn.close()  # the pool drops a closed connection


@contextmanager
def immediate_transaction(
    datastore: SQLiteDatastore, interruption: Interruption
) -> Iterator[SQLiteCursor]:
    """`datastore.transaction(commit=True)` for the maintenance: on a `held_connection`,
    begun with `begin_immediately`, so that the close ends a wait for the write lock too."""
    with held_connection(datastore, interruption, commit=True) as conn:
        if not isinstance(conn, ServiceSQLiteConnection):  # pragma: no cover
            raise TypeError("a connection of another pool")
        with _Immediate(conn, interruption) as curs, curs:
            yield curs


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


@contextmanager
def holding_own(conn: sqlite3.Connection) -> Iterator[Held | None]:
    """A connection of its user's own, outside the pool (the audit's scratch file, a
    thread's reader), used in the block: in the maintenance's scope the close may interrupt
    its statement (and fails the block at once when it came before), a connection it did
    is closed, never used again (the `Held` yielded says so), and sqlite3's errors are the
    library's, as the pool's raise them. Outside a scope (a caller's thread) nothing
    changes, and None is yielded."""
    interruption = CURRENT.get()
    if interruption is None:
        yield None
        return
    held: Held | None = None
    try:
        with interruption.holding(conn.interrupt) as held:
            yield held
    except sqlite3.Error as error:
        raise library_error(error) from error
    finally:
        if held is not None and held.ended:
            conn.close()


def _interrupt(conn: SQLiteConnection) -> Any:
    if isinstance(conn, ServiceSQLiteConnection):
        return conn.sqlite.interrupt
    return lambda: None  # pragma: no cover -- every connection of the pool is one


def library_error(error: sqlite3.Error) -> PersistenceError:
    """The library's error for a sqlite3 one, as its own connections raise them (so the
    service's guard turns a lost database into `StoreUnavailableError`)."""
    if isinstance(error, sqlite3.OperationalError):
        return OperationalError(str(error))
    if isinstance(error, sqlite3.InterfaceError):
        return InterfaceError(str(error))
    return PersistenceError(str(error))
