"""The production store: the library's PostgreSQL application recorder plus the inline
read models.

The read-model rows are written after the library's steps have locked the events table and
inserted the events, in the same transaction (ADR 002), so they are written in
commit order. When a notice opens, the transaction also publishes a wake (`pg_notify`,
payload: the watcher key) that every process's `WakeListener` receives after commit (R-N7).
`pg_round_trips` writes the same transaction in two round trips (ADR 013); the
connections are `infrastructure/pg_store.py`'s.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
import psycopg.errors
from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import (
    PostgresAggregateRecorder,
    PostgresApplicationRecorder,
    PostgresDatastore,
)
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Composed, Identifier

from session_awareness.application import projection as p
from session_awareness.infrastructure.pg_config import wake_channel_for
from session_awareness.infrastructure.pg_listener import WakeListener
from session_awareness.infrastructure.pg_store import bounded, create_in_turn
from session_awareness.infrastructure.readmodel.bulk import BULK_INLINE, held_before
from session_awareness.infrastructure.readmodel.dialect import Dialect
from session_awareness.infrastructure.readmodel.pg_prepared import PreparedStatements
from session_awareness.infrastructure.readmodel.postgres_audit import PostgresAudit
from session_awareness.infrastructure.readmodel.recorder import ReadModelStore
from session_awareness.infrastructure.readmodel.session_state import StackedSessionState
from session_awareness.infrastructure.readmodel.streams import split_streams, streams_statement

#: How long a backend pid that published a wake counts as ours (its notifications are skipped).
OWN_BACKEND_MEMORY = 60.0
#: A large save may take longer than one round trip: this much more time per stored event.
SECONDS_PER_EVENT = 0.001
#: The function a save's checks call to refuse the save (`fail_if_any`): it raises an
#: integrity violation, a conflict the service retries. One per schema, beside the tables.
REFUSE = "session_awareness_refuse"


def refuse_function_ddl(schema: str) -> Composed:
    """Create or replace the schema's refusal function (with the tables, in turn)."""
    return SQL(
        "CREATE OR REPLACE FUNCTION {name}(message text) RETURNS boolean LANGUAGE plpgsql AS "
        "$body$ BEGIN RAISE EXCEPTION USING MESSAGE = message, "
        "ERRCODE = 'integrity_constraint_violation'; END $body$"
    ).format(name=Identifier(schema, REFUSE))


@dataclass(frozen=True)
class PostgresDialect(Dialect):
    placeholder: str = "%s"
    greatest: str = "GREATEST"
    id_type: str = "uuid"
    int_type: str = "bigint"
    text_type: str = "text"
    bytewise: str = ' COLLATE "C"'
    texts: str = "SELECT jsonb_array_elements_text(CAST(? AS jsonb))"

    def bind_id(self, value: UUID) -> Any:
        return value

    def one_of(self, column: str, values: list[str]) -> tuple[str, Any]:
        return f"{column} = ANY(CAST(? AS text[]))", values

    def one_of_ids(self, column: str, values: Collection[UUID | str]) -> tuple[str, Any]:
        return f"{column} = ANY(CAST(? AS uuid[]))", [_uuid(value) for value in values]

    def ids_with_versions(
        self, rows: Sequence[tuple[UUID | str, int, int]]
    ) -> tuple[str, tuple[Any, ...]]:
        source = (
            "unnest(CAST(? AS uuid[]), CAST(? AS bigint[]), CAST(? AS bigint[])) "
            "AS d(id, version, position)"
        )
        ids, versions, positions = zip(*rows, strict=True)
        return source, ([_uuid(wid) for wid in ids], list(versions), list(positions))


def _uuid(value: UUID | str) -> UUID:
    """An id, given as one or as its hex (a drain's entries hold the hex): one array holds
    one type."""
    return value if type(value) is UUID else UUID(str(value))


def postgres_dialect(schema: str) -> PostgresDialect:
    """The dialect of the read models in `schema`."""
    return PostgresDialect(schema_prefix='"' + schema.replace('"', '""') + '".')


class PostgresReadModels(StackedSessionState, ReadModelStore):
    """The read models on PostgreSQL: the shared queries and writes in the schema's dialect,
    `changesSince` as one stacked statement, statements prepared on each connection (ADR
    029), and the wakes a save publishes (`notice_opened`)."""

    notification_id_column = "notification_id"

    def __init__(self, datastore: PostgresDatastore, events_table_name: str) -> None:
        super().__init__(datastore, events_table_name)
        schema = datastore.schema
        self.dialect = postgres_dialect(schema)
        self.wake_channel = wake_channel_for(schema)
        self._own_backends: dict[int, float] = {}
        #: The statements each connection keeps prepared for the saves (ADR 029).
        self.prepared = PreparedStatements()

    def fetch_tuples(self, template: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        # The pool's connections are in autocommit mode: one statement, one round trip,
        # prepared on each connection after its first use there and then executed by name,
        # its values bound server-side (ADR 029).
        with self.datastore.get_connection() as conn:
            query = self.sql(template)
            try:
                rows = self.prepared.ready(conn, writes=False).rows(conn, query, params)
            except psycopg.errors.InvalidSqlStatementName:  # someone deallocated them
                self.prepared.forget(conn)
                rows = None
            if rows is None:
                with psycopg.ClientCursor(conn, row_factory=tuple_row) as c:
                    c.execute(query, params)
                    rows = c.fetchall()
            return rows

    def aggregate_versions(self, ids: Collection[UUID]) -> dict[UUID, int]:
        """The latest stored version of each of `ids` (retention's batch, ADR 038)."""
        rows = self.fetch_tuples(
            "SELECT originator_id, MAX(originator_version) FROM {s}"  # noqa: S608 -- the library's table name
            + self.events_table_name
            + " WHERE originator_id = ANY(CAST(? AS uuid[])) GROUP BY originator_id",
            (list(ids),),
        )
        return {row[0]: row[1] for row in rows}

    def long_running(self) -> contextlib.AbstractContextManager[None]:
        """Statements that may run for long (an audit, a rebuild) run without a deadline."""
        return bounded(None)

    def fail_if_any(self, c: Any, template: str, params: Sequence[Any], message: str) -> None:
        """One plain statement, in whatever batch `c` sends, that calls the schema's refusal
        function (`REFUSE`) when the query has a row: no `DO` block for the server to compile
        on every save, inside the table lock (ADR 023, "Amended")."""
        c.execute(
            self.sql("SELECT {s}" + REFUSE + "(?) WHERE EXISTS (" + template + ")"),
            [message, *params],
        )

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


class PostgresReadModelRecorder(PostgresApplicationRecorder):
    """Stores events and has its read models (`read_models`) apply the projection's row
    changes in the same transaction; it overrides the library's steps of a save, of creating
    the tables and of its reads' retries, and adds the reads the aggregate cache and the
    audit make, and the wake listener on its schema's channel."""

    #: The read models it holds (the two-round-trip save sends some writes as arrays).
    read_models_class: type[PostgresReadModels] = PostgresReadModels

    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name=events_table_name)
        schema = self.datastore.schema
        self.read_models = self.read_models_class(datastore, self.events_table_name)
        ddl = self.read_models.read_model_ddl()
        self.sql_create_statements.extend(SQL(statement) for statement in ddl)  # type: ignore[arg-type]
        self.sql_create_statements.append(refuse_function_ddl(schema))  # type: ignore[arg-type]
        self._events_table = Identifier(schema, self.events_table_name)

    def create_table(self) -> None:
        """Create the schema and tables on first use; concurrent first uses take turns."""
        create_in_turn(self.datastore, super().create_table, self.sql_create_statements)

    # The library retries connection errors ten times; we fail fast and let the service's
    # bounded retry and its signal backlog decide (R-L8).
    select_events = PostgresAggregateRecorder.select_events.__wrapped__  # type: ignore[attr-defined]
    select_notifications = PostgresApplicationRecorder.select_notifications.__wrapped__  # type: ignore[attr-defined]
    max_notification_id = PostgresApplicationRecorder.max_notification_id.__wrapped__  # type: ignore[attr-defined]

    def originators_after(self, position: int, limit: int) -> list[tuple[int, UUID, int]]:
        """The notification log after `position`, without the events' state (the aggregate
        cache's look); one prepared statement on an autocommit connection."""
        return self.read_models.fetch_tuples(
            "SELECT notification_id, originator_id, originator_version FROM {s}"  # noqa: S608 -- the library's table name
            + self.events_table_name
            + " WHERE notification_id > ? ORDER BY notification_id LIMIT ?",
            (position, limit),
        )

    def select_streams(
        self, after: Mapping[UUID, int], snapshots: str
    ) -> tuple[list[StoredEvent], list[StoredEvent]]:
        """Many aggregates' streams in ONE statement (the sweep's batch, ADR 038): for each
        id, its latest snapshot in the `snapshots` table newer than the version it maps to,
        and its events after that snapshot, else after that version; each list by id, then
        version."""
        rows = self.read_models.fetch_tuples(
            streams_statement(self.events_table_name, snapshots, postgres=True),
            (list(after), list(after.values())),
        )
        return split_streams(rows, bytes)

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
        """The library's steps (table lock, NOTIFY on its events channel, insert), then the
        projection's rows, in one pipelined transaction. Unlike the library's own method,
        it is not retried (the service decides, R-L8), and any failure — the insert's
        or the projection's, client- or server-side — rolls the whole transaction back."""
        if kwargs.get("tracking") is not None:  # the library's process applications
            raise NotImplementedError("this recorder does not record tracking positions")
        if not stored_events:
            return []
        failure: Exception | None = None
        ids: Sequence[int] | None = None
        with self.save_deadline(len(stored_events)), self.datastore.get_connection() as conn:
            try:
                with conn.pipeline() as pipeline, conn.transaction(), conn.cursor() as curs:
                    try:
                        self._insert_stored_events(curs, stored_events, **kwargs)
                        pipeline.sync()
                        ids = self._fetch_ids_after_insert_events(curs, stored_events, **kwargs)
                        if projected_events:
                            if ids is None or len(ids) != len(stored_events):
                                raise RuntimeError("the event store returned no notification ids")
                            changes = p.project(list(zip(ids, projected_events, strict=True)))
                            held = held_before(held_sessions, ids) if held_sessions else ()
                            self.read_models.apply_inline(
                                curs, changes, quiet_notices, held, read_at
                            )
                        pipeline.sync()  # surface the rows' errors before COMMIT
                    except Exception as error:  # noqa: BLE001 -- re-raised below
                        failure = error
                        raise psycopg.Rollback from None
            except psycopg.Rollback:
                pass  # escapes the block when the connection died before it could roll back
            if failure is not None:
                raise failure  # inside get_connection(), which maps psycopg's errors
        return ids

    def save_deadline(self, events: int) -> contextlib.AbstractContextManager[None]:
        """A large save may take longer than one round trip: a round trip's deadline, and a
        little more per event."""
        base = getattr(self.datastore, "connect_timeout", None)
        if events < BULK_INLINE or base is None:
            return contextlib.nullcontext()
        return bounded(base + SECONDS_PER_EVENT * events)

    def audit_store(self) -> PostgresAudit:
        return PostgresAudit(self.read_models, self)

    def wake_listener(
        self, on_wake: Callable[[str], None], on_reconnect: Callable[[], None]
    ) -> WakeListener:
        """A listener on this store's wake channel, on its own connection (not started)."""
        return WakeListener(
            conninfo=self.datastore.pool.conninfo,
            channel=self.read_models.wake_channel,
            on_wake=on_wake,
            on_reconnect=on_reconnect,
            skip=self.read_models.published_here,
        )
