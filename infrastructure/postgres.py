"""The production store: the library's PostgreSQL recorder plus the inline read models.

The read-model rows are written after the library has locked the events table and inserted
the events, in the same transaction (DESIGN D4), so they are written in commit order. When a
notice opens, the transaction also publishes a wake (`pg_notify`, payload: the watcher key)
that every process's `WakeListener` receives after commit (SPEC R-N7).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import (
    PostgresAggregateRecorder,
    PostgresApplicationRecorder,
    PostgresDatastore,
)
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Identifier

from session_awareness.application import projection as p
from session_awareness.infrastructure.pg_listener import WakeListener
from session_awareness.infrastructure.readmodel import BULK_INLINE, Dialect, ReadModelStore, Write

#: How long a backend pid that published a wake counts as ours (its notifications are skipped).
OWN_BACKEND_MEMORY = 60.0
_SCHEMA_LOCK = 0x5E5510A5  # advisory lock serialising concurrent first-use table creation


class PostgresReadModelRecorder(ReadModelStore, PostgresApplicationRecorder):
    """Stores events and applies the projection's row changes in the same transaction."""

    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name=events_table_name)
        schema = self.datastore.schema
        quoted = '"' + schema.replace('"', '""') + '".'
        self.dialect = Dialect(
            schema_prefix=quoted, placeholder="%s", greatest="GREATEST", strpos="strpos",
            id_type="uuid", int_type="bigint", text_type="text", stacked_state=True,
        )  # fmt: skip
        self.wake_channel = f"session_awareness_{schema}"[:63]
        self.sql_create_statements.extend(SQL(ddl) for ddl in self.read_model_ddl())  # type: ignore[arg-type]
        self._own_backends: dict[int, float] = {}
        self._events_table = Identifier(schema, self.events_table_name)

    def param_id(self, value: UUID) -> Any:
        return value

    def fetch_tuples(self, template: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        # The pool's connections are in autocommit mode: one statement, one round trip,
        # prepared on each connection at its first use.
        with self.datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row) as c:
            c.execute(self.sql(template), params, prepare=True)
            return c.fetchall()

    def create_table(self) -> None:
        """Create the schema and tables on first use; concurrent first uses take turns."""
        with self.datastore.get_connection() as conn:
            conn.execute(
                SQL("CREATE SCHEMA IF NOT EXISTS {}").format(Identifier(self.datastore.schema))
            )
            conn.execute("SELECT pg_advisory_lock(%s)", (_SCHEMA_LOCK,))
            try:
                super().create_table()
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (_SCHEMA_LOCK,))

    # The library retries connection errors ten times; we fail fast and let the service's
    # bounded retry and its signal backlog decide (SPEC R-L8).
    select_events = PostgresAggregateRecorder.select_events.__wrapped__  # type: ignore[attr-defined]
    select_notifications = PostgresApplicationRecorder.select_notifications.__wrapped__  # type: ignore[attr-defined]
    max_notification_id = PostgresApplicationRecorder.max_notification_id.__wrapped__  # type: ignore[attr-defined]

    def originators_after(self, position: int, limit: int) -> list[tuple[int, UUID, int]]:
        """The notification log after `position`, without the events' state (the aggregate
        cache's look); one prepared statement on an autocommit connection."""
        return self.fetch_tuples(
            "SELECT notification_id, originator_id, originator_version FROM {s}"  # noqa: S608 -- the library's table name
            + self.events_table_name
            + " WHERE notification_id > ? ORDER BY notification_id LIMIT ?",
            (position, limit),
        )

    def insert_events(
        self,
        stored_events: Sequence[StoredEvent],
        *,
        projected_events: Sequence[Any] = (),
        **kwargs: Any,
    ) -> Sequence[int] | None:
        """Lock the events table, insert the events, apply the projection's rows and commit,
        in two round trips: `BEGIN; LOCK; INSERT … RETURNING` and then `rows…; COMMIT`, each
        one simple-protocol query with client-side bound values (psycopg's `mogrify`).

        The library's own insert takes ~11 statements in a pipeline (plus a `NOTIFY` on its
        events channel for subscriptions, which nothing here uses: readers and audits page
        the log by notification id, DESIGN D4) and cost ~750 us of CPU per record. The table
        lock stays: it keeps notification ids in commit order, which audits and the aggregate
        cache rely on. Any failure rolls the whole transaction back."""
        if kwargs.get("tracking") is not None:  # the library's process applications
            raise NotImplementedError("this recorder does not record tracking positions")
        if not stored_events:
            return []
        if len(stored_events) >= BULK_INLINE:
            return self._insert_many(stored_events, projected_events)
        with self.datastore.get_connection() as conn:
            bind = psycopg.ClientCursor(conn).mogrify
            try:
                with conn.cursor(row_factory=tuple_row) as curs:
                    curs.execute(self._begin_insert(bind, stored_events))
                    while curs.nextset():
                        pass  # to the INSERT's result, the last one
                    ids = [row[0] for row in curs.fetchall()]
                    if len(ids) != len(stored_events):
                        raise RuntimeError("the event store returned no notification ids")
                    rows = _Statements(conn, bind)
                    if projected_events:
                        self.apply_inline(
                            rows, p.project(list(zip(ids, projected_events, strict=True)))
                        )
                    rows.sql.append("COMMIT")
                    curs.execute("; ".join(rows.sql))
            except BaseException:
                _roll_back(conn)
                raise
        return ids

    def _insert_many(
        self, stored_events: Sequence[StoredEvent], projected_events: Sequence[Any]
    ) -> Sequence[int]:
        """A large save (a drain, a wide fan-out): the same transaction in two pipelined round
        trips of a few statements whose values go as arrays, bound server-side in binary
        (client-side binding costs ~20 us per row of a drain)."""
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
                        self.apply_inline(_Pipelined(curs), changes)
                    curs.execute("COMMIT")
                    pipeline.sync()
            except BaseException:
                _roll_back(conn)
                raise
        return ids

    def _begin_insert(self, bind: Callable[..., str], stored_events: Sequence[StoredEvent]) -> str:
        table = self._events_table.as_string(None)
        values = ", ".join(
            bind("(%s, %s, %s, %s)", (e.originator_id, e.originator_version, e.topic, e.state))
            for e in stored_events
        )
        timeout = int(self.datastore.lock_timeout)
        begin = (
            f"BEGIN; SET LOCAL lock_timeout = '{timeout}s'; LOCK TABLE {table} IN EXCLUSIVE MODE"
        )
        insert = f"INSERT INTO {table} (originator_id, originator_version, topic, state) VALUES "  # noqa: S608 -- a quoted identifier
        return f"{begin}; {insert}{values} RETURNING notification_id"

    def write_batches(self, c: Any, batches: dict[Write, list[tuple[Any, ...]]]) -> None:
        """In a large save's pipeline, a write for many keys with an array form is one
        statement (a drain's cursors: one UPDATE instead of 1,000 for the server to plan);
        elsewhere, one statement per row."""
        if not isinstance(c, _Pipelined):
            super().write_batches(c, batches)
            return
        for write, rows in batches.items():
            if write.unnest is None or len(rows) < 2:
                c.executemany(self.sql(write.template), rows)
            else:
                c.execute(self.sql(write.unnest), [list(col) for col in zip(*rows, strict=True)])

    def notice_opened(self, c: Any, watch_id: UUID) -> None:
        """Publish a wake for the cursor's watcher; delivered to every listener on commit."""
        c.execute(
            self.sql(
                "SELECT pg_notify(?, watcher_key) FROM {s}session_watch_cursors WHERE watch_id = ?"
            ),
            (self.wake_channel, watch_id),
        )
        self._own_backends[c.connection.info.backend_pid] = time.monotonic()

    def published_here(self, backend_pid: int) -> bool:
        """Whether a wake came from this process (already delivered after its commit)."""
        seen = self._own_backends.get(backend_pid)
        return seen is not None and time.monotonic() - seen < OWN_BACKEND_MEMORY

    def wake_listener(
        self, on_wake: Callable[[str], None], on_reconnect: Callable[[], None]
    ) -> WakeListener:
        """A listener on this store's wake channel, on its own connection (not started)."""
        return WakeListener(
            connect_kwargs=dict(self.datastore.pool.kwargs),
            channel=self.wake_channel,
            on_wake=on_wake,
            on_reconnect=on_reconnect,
            skip=self.published_here,
        )


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


class _Statements:
    """Collects the projection's statements, bound client-side, to send in one query; it
    stands in for the cursor `apply_changes` and `notice_opened` write through."""

    def __init__(self, connection: psycopg.Connection[Any], bind: Callable[..., str]) -> None:
        self.connection = connection
        self._bind = bind
        self.sql: list[str] = []

    def execute(self, query: str, params: Sequence[Any] = ()) -> None:
        self.sql.append(self._bind(query, params))

    def executemany(self, query: str, params_seq: Iterable[Sequence[Any]]) -> None:
        for params in params_seq:
            self.execute(query, params)


def _roll_back(conn: psycopg.Connection[Any]) -> None:
    """End a failed write transaction; a dead connection is left to the pool to discard."""
    if conn.closed or conn.info.transaction_status == TransactionStatus.IDLE:
        return
    with contextlib.suppress(psycopg.Error):  # broken: the pool will not hand it out again
        conn.execute("ROLLBACK")
