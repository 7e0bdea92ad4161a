"""The PostgreSQL save in two round trips (ADR 013): the same transaction as
`PostgresReadModelRecorder.insert_events` — table lock, insert, the projection's rows, any
wakes, all or nothing — without the library's per-insert `NOTIFY` on its events channel
(nothing here subscribes to the log: readers and audits page it by notification id, ADR 002)
and without psycopg's pipeline handling of ~11 statements.

A save of a few events sends two simple-protocol queries with values bound client-side
(psycopg's `mogrify`): `BEGIN; SET LOCAL lock_timeout; LOCK; INSERT … RETURNING`, then the
rows and `COMMIT`. The rows are projected and bound before the lock is asked for; only the
statements that carry a notification id are bound once the insert has returned them, so
little Python runs while the lock is held. Saves other threads make meanwhile join it
(group commit, ADR 025), each in a savepoint: two round trips more each, one lock, one
commit. A large save (`BULK_INLINE` events or more: a drain, a wide fan-out) keeps a
transaction of its own and binds its values server-side as arrays, in two pipelined round
trips (client-side binding costs ~20 us per row of a drain), a cursor move for many keys as
one `UPDATE … FROM unnest`.

The application names this recorder by its topic; removing this module and naming
`PostgresReadModelRecorder` instead leaves the library's write steps.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any
from uuid import UUID

import psycopg
import psycopg.errors
from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresDatastore
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row

from session_awareness.application import projection as p
from session_awareness.application.interruption import CURRENT
from session_awareness.infrastructure.readmodel.bulk import BULK_INLINE, held_before
from session_awareness.infrastructure.readmodel.group_commit import (
    GroupCommit,
    Save,
    as_library_error,
    ends_the_batch,
)
from session_awareness.infrastructure.readmodel.pg_recorder import (
    PostgresReadModelRecorder,
    PostgresReadModels,
)
from session_awareness.infrastructure.readmodel.writes import Row, Write


class RoundTripsReadModels(PostgresReadModels):
    """The read models a two-round-trip save writes: in its statements, a write for many
    keys goes as arrays."""

    def write_batches(self, c: Any, batches: dict[Write, list[Row]]) -> None:
        """In a save's statements, a write for many keys with an array form is one
        statement (a drain's cursors: one UPDATE instead of 1,000 for the server to plan);
        elsewhere, one statement per row."""
        if not isinstance(c, _Pipelined | _Statements):
            super().write_batches(c, batches)
            return
        self.write_as_arrays(c, batches)


class PostgresRoundTripsRecorder(PostgresReadModelRecorder):
    read_models_class = RoundTripsReadModels

    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name=events_table_name)
        #: The queue of this recorder's small saves (ADR 025).
        self.group = GroupCommit(self._write_batch)

    def insert_events(
        self,
        stored_events: Sequence[StoredEvent],
        *,
        projected_events: Sequence[Any] = (),
        quiet_notices: Collection[UUID] = (),
        held_sessions: Collection[tuple[UUID, int]] = (),
        read_at: int | None = None,
        **kwargs: Any,
    ) -> Sequence[int] | None:
        """Lock the events table, insert the events, apply the projection's rows and commit,
        in two round trips; with the saves other threads make meanwhile (`group`), in one
        transaction. The table lock stays: it keeps notification ids in commit order, which
        audits and the aggregate cache rely on. Any failure rolls the save back."""
        if kwargs.get("tracking") is not None:  # the library's process applications
            raise NotImplementedError("this recorder does not record tracking positions")
        if not stored_events:
            return []
        if len(stored_events) >= BULK_INLINE:
            with self.save_deadline(len(stored_events)):
                return self._insert_many(
                    stored_events, projected_events, quiet_notices, held_sessions, read_at
                )
        kwargs.update(
            projected_events=projected_events,
            quiet_notices=quiet_notices,
            held_sessions=held_sessions,
            read_at=read_at,
        )
        # The maintenance's saves go in a batch of their own, which its close may interrupt.
        return self.group.insert(stored_events, kwargs, alone=CURRENT.get() is not None)

    def _write_batch(self, saves: list[Save]) -> None:
        """A batch of small saves in one transaction: the table lock once, then per save
        `SAVEPOINT; INSERT … RETURNING` and its rows with `RELEASE SAVEPOINT`, the last
        save's followed by `COMMIT`: two round trips per save. A refused save is rolled back
        to its savepoint; a store error (a lock timeout, the connection lost) ends the
        batch, which rolls back. A save alone is its transaction, without a savepoint: ADR
        013's two round trips, statement for statement. Every save's rows are projected and
        bound before the lock (`_rows_of`)."""
        many = len(saves) > 1
        with self.datastore.get_connection() as conn:
            try:
                bind = self.read_models.prepared.binder(
                    conn, writes=True
                )  # prepares before the lock
                rows = [self._rows_of(conn, bind, save) for save in saves]
                with conn.cursor(row_factory=tuple_row) as curs:
                    begin: str | None = self._begin()
                    committed = False
                    for save, its_rows in zip(saves, rows, strict=True):
                        last = save is saves[-1]
                        try:
                            self._write_save(
                                curs, bind, begin, save, its_rows, savepoint=many, last=last
                            )
                            committed = last
                        except Exception as error:
                            if not many or not _refused(conn, error):
                                raise
                            curs.execute("ROLLBACK TO SAVEPOINT save; RELEASE SAVEPOINT save")
                            save.refused(as_library_error(error, psycopg))
                        begin = None
                    if not committed:
                        curs.execute("COMMIT")
            except BaseException as error:
                if isinstance(error, psycopg.errors.InvalidSqlStatementName):
                    self.read_models.prepared.forget(
                        conn
                    )  # someone deallocated them: prepare again
                _roll_back(conn)
                raise

    def _rows_of(
        self, conn: psycopg.Connection[Any], bind: Callable[..., str], save: Save
    ) -> _Statements | Exception:
        """The statements of `save`'s rows, bound before its events are stored: each event's
        notification id stands as an `_Unassigned` in the few that carry one, bound once
        the insert returns it (`_Statements.resolved`). A drain's checks wait for its id,
        which says whether any save came between its reads and it (`check_inline`). What
        the projection raises is the save's error, raised where writing its rows would have
        raised it."""
        rows = _Statements(conn, bind)
        projected = save.kwargs.get("projected_events")
        if not projected:
            return rows
        try:
            ids = [_Unassigned(index) for index in range(len(save.events))]
            changes = p.project(list(zip(ids, projected, strict=True)))
            holds = save.kwargs.get("held_sessions")
            held = held_before(holds, ids) if holds else ()
            quiet = save.kwargs.get("quiet_notices", ())
            if save.kwargs.get("read_at") is None:
                self.read_models.apply_inline(rows, changes, quiet, held)
            else:  # a drain's: whether it was raced needs its id (`check_inline`)
                self.read_models.write_inline(rows, changes, quiet)
                rows.checks = (changes, held)
        except Exception as error:  # noqa: BLE001 -- raised again in the save's turn
            return error
        return rows

    def _write_save(
        self, curs: psycopg.Cursor[Any], bind: Callable[..., str], begin: str | None,
        save: Save, rows: _Statements | Exception, *, savepoint: bool, last: bool,
    ) -> None:  # fmt: skip
        """One save of a batch (after `begin`, the first), inside its `savepoint` unless it
        is alone, and the commit when it is the `last`; `rows`: its rows' statements, or
        the error projecting them raised."""
        head = [begin] if begin is not None else []
        if savepoint:
            head.append("SAVEPOINT save")
        curs.execute("; ".join((*head, self._insert(bind, save.events))))
        while curs.nextset():
            pass  # to the INSERT's result, the last one
        ids = [row[0] for row in curs.fetchall()]
        if len(ids) != len(save.events):
            raise RuntimeError("the event store returned no notification ids")
        if isinstance(rows, Exception):
            raise rows
        if rows.checks is not None:  # a drain's, once its id says whether it was raced
            changes, held = rows.checks
            self.read_models.check_inline(rows, changes, held, save.kwargs.get("read_at"), ids)
        sql = rows.resolved(ids)
        if savepoint:
            sql.append("RELEASE SAVEPOINT save")
        if last:
            sql.append("COMMIT")
        curs.execute("; ".join(sql))
        save.ids = ids

    def _insert_many(
        self,
        stored_events: Sequence[StoredEvent],
        projected_events: Sequence[Any],
        quiet_notices: Collection[UUID] = (),
        held_sessions: Collection[tuple[UUID, int]] = (),
        read_at: int | None = None,
    ) -> Sequence[int]:
        """A large save: the same transaction in two pipelined round trips of a few
        statements whose values go as arrays, bound server-side in binary."""
        table = self._events_table.as_string(None)
        timeout = int(self.datastore.lock_timeout)
        columns = list(zip(*((e.originator_id, e.originator_version, e.topic, e.state)
                             for e in stored_events), strict=True))  # fmt: skip
        with self.datastore.get_connection() as conn:
            try:
                with conn.pipeline() as pipeline, conn.cursor(row_factory=tuple_row) as curs:
                    curs.execute("BEGIN")
                    curs.execute(f"SET LOCAL lock_timeout = '{timeout}s'")
                    curs.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
                    curs.execute(
                        f"INSERT INTO {table} (originator_id, originator_version, topic, state) "  # noqa: S608 -- a quoted identifier
                        "SELECT * FROM unnest(%s::uuid[], %s::bigint[], %s::text[], %s::bytea[]) "
                        "RETURNING notification_id",
                        [list(column) for column in columns],
                    )
                    pipeline.sync()
                    ids = [row[0] for row in curs.fetchall()]
                    if len(ids) != len(stored_events):
                        raise RuntimeError("the event store returned no notification ids")
                    if projected_events:
                        changes = p.project(list(zip(ids, projected_events, strict=True)))
                        held = held_before(held_sessions, ids) if held_sessions else ()
                        self.read_models.apply_inline(
                            _Pipelined(curs), changes, quiet_notices, held, read_at
                        )
                    curs.execute("COMMIT")
                    pipeline.sync()
            except BaseException:
                _roll_back(conn)
                raise
        return ids

    def _begin(self) -> str:
        """Open the write transaction: its lock timeout, the events table's lock."""
        table = self._events_table.as_string(None)
        timeout = int(self.datastore.lock_timeout)
        return f"BEGIN; SET LOCAL lock_timeout = '{timeout}s'; LOCK TABLE {table} IN EXCLUSIVE MODE"

    def _insert(self, bind: Callable[..., str], stored_events: Sequence[StoredEvent]) -> str:
        table = self._events_table.as_string(None)
        values = ", ".join(["(%s, %s, %s, %s)"] * len(stored_events))
        insert = f"INSERT INTO {table} (originator_id, originator_version, topic, state) VALUES "  # noqa: S608 -- a quoted identifier
        params = [v for e in stored_events
                  for v in (e.originator_id, e.originator_version, e.topic, e.state)]  # fmt: skip
        return bind(f"{insert}{values} RETURNING notification_id", params)


class _Pipelined:
    """The cursor of a large save's pipeline, marked so that `write_batches` sends each
    statement's rows as arrays; it stands in for the cursor the projection writes through."""

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self.cursor = cursor
        self.connection = cursor.connection

    def execute(self, query: str, params: Sequence[Any] = ()) -> None:
        self.cursor.execute(query, params)

    def executemany(self, query: str, params_seq: Iterable[Sequence[Any]]) -> None:
        self.cursor.executemany(query, params_seq)


class _Unassigned(int):
    """The notification id of a save's `index`-th event (its value) before the insert
    assigns it: a statement whose values hold one is bound once the ids are known."""

    __slots__ = ()


def _unassigned(value: Any) -> bool:
    """Whether `value` is, or holds (an array's values), an `_Unassigned` id."""
    if type(value) is _Unassigned:
        return True
    return isinstance(value, list | tuple) and any(_unassigned(v) for v in value)


def _assigned(value: Any, ids: Sequence[int]) -> Any:
    """`value` with each `_Unassigned` id replaced by the id the insert returned."""
    if type(value) is _Unassigned:
        return ids[value]
    if isinstance(value, list | tuple):
        return type(value)(_assigned(v, ids) for v in value)
    return value


class _Statements:
    """Collects the projection's statements, bound client-side, to send in one query; it
    stands in for the cursor `apply_changes` and `notice_opened` write through. A statement
    whose values hold an `_Unassigned` id waits, in its place, for `resolved`."""

    def __init__(self, connection: psycopg.Connection[Any], bind: Callable[..., str]) -> None:
        self.connection = connection
        self._bind = bind
        self.sql: list[str | tuple[str, Sequence[Any]]] = []
        #: The save's changes and held sessions, checked once the insert gives their ids.
        self.checks: tuple[Sequence[p.RowChange], Sequence[tuple[UUID, int, int]]] | None = None

    def execute(self, query: str, params: Sequence[Any] = ()) -> None:
        if any(_unassigned(v) for v in params):
            self.sql.append((query, params))
        else:
            self.sql.append(self._bind(query, params))

    def executemany(self, query: str, params_seq: Iterable[Sequence[Any]]) -> None:
        for params in params_seq:
            self.execute(query, params)

    def resolved(self, ids: Sequence[int]) -> list[str]:
        """The statements in order, those that waited bound with the notification `ids`."""
        return [
            sql if isinstance(sql, str) else self._bind(sql[0], _assigned(sql[1], ids))
            for sql in self.sql
        ]


def _refused(conn: psycopg.Connection[Any], error: Exception) -> bool:
    """Whether a save's error refused that save alone: the error is not the store's own and
    the batch's transaction is still open, so the save's savepoint can be rolled back to. A
    connection lost, a lock timed out, or a transaction that ended (a failed `COMMIT`) ends
    the batch, and so do prepared statements someone removed (ADR 029)."""
    if conn.broken or ends_the_batch(error, psycopg):
        return False
    if isinstance(error, psycopg.errors.InvalidSqlStatementName):
        return False
    return conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR)


def _roll_back(conn: psycopg.Connection[Any]) -> None:
    """End a failed write transaction; a dead connection is left to the pool to discard."""
    if conn.closed or conn.info.transaction_status == TransactionStatus.IDLE:
        return
    with contextlib.suppress(psycopg.Error):  # broken: the pool will not hand it out again
        conn.execute("ROLLBACK")
