"""The production store: the library's PostgreSQL recorder plus the inline read models.

The read-model rows are written after the library has locked the events table and inserted
the events, in the same transaction (DESIGN D4), so they are written in commit order. When a
notice opens, the transaction also publishes a wake (`pg_notify`, payload: the watcher key)
that every process's `WakeListener` receives after commit (SPEC R-N7).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import (
    PostgresAggregateRecorder,
    PostgresApplicationRecorder,
    PostgresDatastore,
)
from psycopg import Cursor
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Identifier

from session_awareness.application import projection as p
from session_awareness.infrastructure.pg_listener import WakeListener
from session_awareness.infrastructure.readmodel import Dialect, ReadModelStore

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
            id_type="uuid", int_type="bigint", text_type="text",
        )  # fmt: skip
        self.wake_channel = f"session_awareness_{schema}"[:63]
        self.sql_create_statements.extend(SQL(ddl) for ddl in self.read_model_ddl())  # type: ignore[arg-type]
        self._own_backends: dict[int, float] = {}

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
        cache's look); one statement on an autocommit connection, prepared."""
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                SQL(
                    "SELECT notification_id, originator_id, originator_version FROM {} "
                    "WHERE notification_id > %s ORDER BY notification_id LIMIT %s"
                ).format(Identifier(self.datastore.schema, self.events_table_name)),
                (position, limit),
                prepare=True,
            ).fetchall()
        return [
            (row["notification_id"], row["originator_id"], row["originator_version"])
            for row in rows
        ]

    def insert_events(
        self,
        stored_events: Sequence[StoredEvent],
        *,
        projected_events: Sequence[Any] = (),
        **kwargs: Any,
    ) -> Sequence[int] | None:
        """The library's insert (table lock, NOTIFY, insert), then the projection's rows, in
        one transaction. Unlike the library's own method, any failure — the insert's or the
        projection's, client- or server-side — rolls the whole transaction back."""
        failure: Exception | None = None
        notification_ids: Sequence[int] | None = None
        with self.datastore.get_connection() as conn:
            try:
                with conn.pipeline() as pipeline, conn.transaction():
                    with conn.cursor() as curs:
                        self._insert_events(curs, stored_events, **kwargs)
                    if stored_events:
                        with conn.cursor() as curs:
                            try:
                                self._insert_stored_events(curs, stored_events, **kwargs)
                                pipeline.sync()
                                notification_ids = self._fetch_ids_after_insert_events(
                                    curs, stored_events, **kwargs
                                )
                                self._project(curs, notification_ids, projected_events)
                                pipeline.sync()  # surface the rows' errors before COMMIT
                            except Exception as error:  # noqa: BLE001 -- re-raised below
                                failure = error
                                raise psycopg.Rollback from None
            except psycopg.Rollback:
                pass  # escapes the block when the connection died before it could roll back
            if failure is not None:
                raise failure  # inside get_connection(), which maps psycopg's errors
        return notification_ids

    def _project(self, curs: Cursor[Any], ids: Sequence[int] | None, events: Sequence[Any]) -> None:
        if events:
            if ids is None:
                raise RuntimeError("the event store returned no notification ids")
            self.apply_changes(curs, p.project(list(zip(ids, events, strict=True))))

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
