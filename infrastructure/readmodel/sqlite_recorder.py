"""The embedded default store: the library's SQLite application recorder plus the inline
read models, written by the projection in the transaction that stores the events (ADR 002), so
every notice is answerable the moment it exists. Concurrent saves of the process
share one transaction and one commit (`group_commit`, ADR 025). Its connections (read-only
files) are `infrastructure/sqlite_store.py`'s."""

from __future__ import annotations

import json
import sqlite3
import threading
import weakref
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError, InterfaceError, StoredEvent
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteApplicationRecorder,
    SQLiteCursor,
    SQLiteDatastore,
)

from session_awareness.application import projection as p
from session_awareness.application.interruption import CURRENT, Held
from session_awareness.infrastructure.readmodel.bulk import held_before
from session_awareness.infrastructure.readmodel.dialect import Dialect
from session_awareness.infrastructure.readmodel.group_commit import (
    GroupCommit,
    Save,
    as_library_error,
    ends_the_batch,
)
from session_awareness.infrastructure.readmodel.recorder import ReadModelStore
from session_awareness.infrastructure.readmodel.session_state import JoinedSessionState
from session_awareness.infrastructure.readmodel.streams import split_streams, streams_statement
from session_awareness.infrastructure.sqlite_store import holding_own, library_error

if TYPE_CHECKING:
    from session_awareness.infrastructure.readmodel.sqlite_audit import SQLiteAudit


@dataclass(frozen=True)
class SQLiteDialect(Dialect):
    keyed: str = " WITHOUT ROWID"

    def bind_id(self, value: UUID) -> Any:
        return value.hex

    def one_of(self, column: str, values: list[str]) -> tuple[str, Any]:
        return f"{column} IN (SELECT value FROM json_each(?))", json.dumps(values)  # noqa: S608 -- a fixed column; the values are one bound parameter

    def one_of_ids(self, column: str, values: Collection[UUID | str]) -> tuple[str, Any]:
        return self.one_of(column, [_hex(value) for value in values])

    def ids_with_versions(
        self, rows: Sequence[tuple[UUID | str, int, int]]
    ) -> tuple[str, tuple[Any, ...]]:
        """One JSON object of id → version per position, read as `json_each`'s own key and
        value: a fifth of the time of three `json_extract`s per row (a 1,000-pair drain's
        check). An id given twice at one position keeps its lowest version, which is what the
        checks ask of both (a newer event than either)."""
        by_position: dict[int, dict[str, int]] = {}
        for wid, version, at in rows:
            versions = by_position.setdefault(at, {})
            key = _hex(wid)
            if versions.get(key, version) >= version:
                versions[key] = version
        select = "SELECT key AS id, value AS version, ? AS position FROM json_each(?)"
        source = "(" + " UNION ALL ".join([select] * len(by_position)) + ") AS d"
        params = tuple(
            p for at, versions in by_position.items() for p in (at, json.dumps(versions))
        )
        return source, params


def _hex(value: UUID | str) -> str:
    """An id as this dialect binds it: its hex (a drain's entries hold it so already)."""
    return value if type(value) is str else value.hex  # type: ignore[union-attr]


SQLITE = SQLiteDialect()


def _uuid_of_hex(value: str) -> UUID:
    """An id column's hex, read as an integer: half the time of parsing it as hex."""
    return UUID(int=int(value, 16))


class SQLiteReadModels(JoinedSessionState, ReadModelStore):
    """The read models on SQLite: the shared queries and writes, `changesSince` as one
    joined statement, and each thread's own reading connection."""

    dialect = SQLITE
    notification_id_column = "rowid"

    def __init__(self, datastore: SQLiteDatastore, events_table_name: str) -> None:
        super().__init__(datastore, events_table_name)
        self._reader = threading.local()
        self._readers: list[tuple[weakref.ref[threading.Thread], Reader]] = []
        self._readers_lock = threading.Lock()
        self._readers_closed = False

    def aggregate_versions(self, ids: Collection[UUID]) -> dict[UUID, int]:
        """The latest stored version of each of `ids` (retention's batch, ADR 038)."""
        rows = self.fetch_tuples(
            f"SELECT originator_id, MAX(originator_version) FROM {self.events_table_name} "  # noqa: S608 -- the library's table name
            "WHERE originator_id IN (SELECT value FROM json_each(?)) GROUP BY originator_id",
            (json.dumps([i.hex for i in ids]),),
        )
        return {UUID(hex=row[0]): row[1] for row in rows}

    def fail_if_any(self, c: Any, template: str, params: Sequence[Any], message: str) -> None:
        c.execute(self.sql(template), params)
        if c.fetchone() is not None:
            raise IntegrityError(message)

    def fetch_tuples(self, template: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """On a file database, each thread reads on a connection of its own, outside the
        library's pool: its checkout (locks, semaphore, bookkeeping) costs ~4 us, half the
        5-event page's statement, and its connections cache one prepared statement only
        (`cached_statements=True`). An in-memory database is shared through the pool."""
        pool = self.datastore.pool
        interruption = CURRENT.get()  # the maintenance's (application/interruption.py)
        if pool.is_sqlite_memory_mode:  # in the maintenance's scope, a held checkout
            with self.datastore.get_connection(commit=False) as conn:
                cursor = conn.cursor().sqlite_cursor
                cursor.row_factory = None  # tuples, not `sqlite3.Row`
                try:
                    return cursor.execute(self.sql(template), params).fetchall()
                finally:
                    cursor.close()
        reader: Reader | None = getattr(self._reader, "connection", None)
        if reader is None:
            reader = self._open_reader(pool.db_name, pool.lock_timeout)
        if interruption is not None:
            return self._fetch_held(reader, template, params)
        try:
            with reader.lock:
                return reader.conn.execute(self.sql(template), params).fetchall()
        except sqlite3.Error as error:
            raise library_error(error) from error
        finally:
            if reader.retired:
                reader.retire()

    def _fetch_held(
        self, reader: Reader, template: str, params: Sequence[Any]
    ) -> list[tuple[Any, ...]]:
        """`fetch_tuples` in the maintenance's scope, on the thread's reader, which the close
        may interrupt (`holding_own`); one it did is closed, and the thread opens another
        when it reads again."""
        held: Held | None = None
        try:
            with holding_own(reader.conn) as held, reader.lock:
                return reader.conn.execute(self.sql(template), params).fetchall()
        finally:
            if held is not None and held.ended:  # closed by `holding_own`: forgotten here
                self._reader.connection = None
                with self._readers_lock:
                    self._readers = [(t, r) for t, r in self._readers if r is not reader]
            if reader.retired:
                reader.retire()

    def _open_reader(self, db_name: str, lock_timeout: int | None) -> Reader:
        try:
            reader = Reader(
                sqlite3.connect(
                    db_name, uri=True, check_same_thread=False, isolation_level=None,
                    timeout=lock_timeout or SQLITE3_DEFAULT_LOCK_TIMEOUT,
                )
            )  # fmt: skip
        except sqlite3.Error as error:
            raise library_error(error) from error
        with self._readers_lock:
            if self._readers_closed:
                reader.retire()
                raise InterfaceError("the store is closed")
            ended = [r for t, r in self._readers if not ((thread := t()) and thread.is_alive())]
            self._readers = [(t, r) for t, r in self._readers if r not in ended]
            self._readers.append((weakref.ref(threading.current_thread()), reader))
        for connection in ended:  # threads that have ended: hosts with a thread per request
            connection.retire()
        self._reader.connection = reader
        return reader

    def close_readers(self) -> None:
        """Close every thread's reading connection (the service is closing): now, or, for
        one a thread is reading on, as that read ends (`Reader.retire`)."""
        with self._readers_lock:
            self._readers_closed = True
            readers, self._readers = self._readers, []
        for _, reader in readers:
            reader.retire()


class Reader:
    """A thread's reading connection (`fetch_tuples`), held under `lock` while a read runs
    on it. Closing a sqlite3 connection while another thread runs a statement on it crashes
    the process, so a close from another thread (`retire`) closes it only when no read is
    under way, and otherwise leaves it to that read to close as it ends."""

    __slots__ = ("conn", "lock", "retired")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn, self.lock, self.retired = conn, threading.Lock(), False

    def retire(self) -> None:
        """Close the connection now if no read is under way on it; otherwise the read under
        way closes it as it ends (it sees `retired`). A later read on it fails as a read on
        a closed connection does."""
        self.retired = True
        if self.lock.acquire(blocking=False):
            try:
                self.conn.close()
            finally:
                self.lock.release()


class SQLiteReadModelRecorder(SQLiteApplicationRecorder):
    """Stores events and has its read models (`read_models`) apply the projection's row
    changes in the same transaction; it overrides the library's steps of a save and of
    creating the tables, and adds the reads the aggregate cache and the audit make."""

    def __init__(self, datastore: SQLiteDatastore, events_table_name: str = "stored_events"):
        #: Before the library's `__init__`, which asks for the tables to create.
        self.read_models = SQLiteReadModels(datastore, events_table_name)
        super().__init__(datastore, events_table_name)
        self.group = GroupCommit(self._write_batch)

    def construct_create_table_statements(self) -> list[str]:
        return [*super().construct_create_table_statements(), *self.read_models.read_model_ddl()]

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Store the events and their rows in the next batch of saves (ADR 025); the
        maintenance's in a batch of their own, which its close may interrupt."""
        return self.group.insert(stored_events, kwargs, alone=CURRENT.get() is not None)

    def _write_batch(self, saves: list[Save]) -> None:
        """Each save inside a savepoint of its own, then one commit. A refused save is rolled
        back to its savepoint; a store error (the database locked or gone) ends the batch,
        which rolls back. A save alone is its transaction, without a savepoint."""
        # in the maintenance's scope, begun so that its close may end the lock's wait
        with self.datastore.transaction(commit=True) as c:
            if len(saves) == 1:
                [save] = saves
                save.ids = self._insert_events(c, save.events, **save.kwargs)
                return
            for save in saves:
                c.execute("SAVEPOINT save")
                try:
                    save.ids = self._insert_events(c, save.events, **save.kwargs)
                except Exception as error:
                    if ends_the_batch(error, sqlite3):
                        raise
                    c.execute("ROLLBACK TO save")
                    save.refused(as_library_error(error, sqlite3))
                c.execute("RELEASE save")

    def _insert_events(
        self,
        c: SQLiteCursor,
        stored_events: Sequence[StoredEvent],
        *,
        projected_events: Sequence[Any] = (),
        quiet_notices: Collection[UUID] = (),
        held_sessions: Collection[tuple[UUID, int]] = (),
        read_at: int | None = None,
        **kwargs: Any,
    ) -> Sequence[int] | None:
        notification_ids = super()._insert_events(c, stored_events, **kwargs)
        if projected_events:
            if notification_ids is None:  # the SQLite recorder always returns them
                raise RuntimeError("the event store returned no notification ids")
            positions = list(zip(notification_ids, projected_events, strict=True))
            held = held_before(held_sessions, notification_ids) if held_sessions else ()
            changes = p.project(positions)
            self.read_models.apply_inline(c, changes, quiet_notices, held, read_at)
        return notification_ids

    def originators_after(self, position: int, limit: int) -> list[tuple[int, UUID, int]]:
        """The notification log after `position`, without the events' state (the aggregate
        cache's look); one statement, no explicit transaction."""
        rows = self.read_models.fetch_tuples(
            f"SELECT rowid, originator_id, originator_version FROM {self.events_table_name} "  # noqa: S608 -- the library's table name
            "WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (position, limit),
        )
        return [(row[0], UUID(row[1]), row[2]) for row in rows]

    def select_streams(
        self, after: Mapping[UUID, int], snapshots: str
    ) -> tuple[list[StoredEvent], list[StoredEvent]]:
        """Many aggregates' streams in ONE statement (the sweep's batch, ADR 038): for each
        id, its latest snapshot in the `snapshots` table newer than the version it maps to,
        and its events after that snapshot, else after that version; (snapshots, events),
        each by id, then version."""
        rows = self.read_models.fetch_tuples(
            streams_statement(self.events_table_name, snapshots, postgres=False),
            (json.dumps({aggregate_id.hex: version for aggregate_id, version in after.items()}),),
        )
        return split_streams(rows, bytes, _uuid_of_hex)

    def audit_store(self) -> SQLiteAudit:
        # Imported here: a process that only records (a hook run) never audits (ADR 039).
        from session_awareness.infrastructure.readmodel.sqlite_audit import (  # noqa: PLC0415
            SQLiteAudit,
        )

        return SQLiteAudit(self.read_models, self)

    def close_readers(self) -> None:
        """Close every thread's reading connection (the service is closing)."""
        self.read_models.close_readers()
