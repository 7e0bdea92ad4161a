"""The embedded default store: the library's SQLite recorder plus the inline read models.

The read models are written by the projection in the transaction that stores the events
(DESIGN D4), so every notice is answerable the moment it exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore

from session_awareness.application import projection as p
from session_awareness.infrastructure.readmodel import Dialect, ReadModelStore


class SQLiteReadModelRecorder(ReadModelStore, SQLiteApplicationRecorder):
    """Stores events and applies the projection's row changes in the same transaction."""

    dialect = Dialect(
        schema_prefix="", placeholder="?", greatest="MAX", strpos="instr",
        id_type="TEXT", int_type="INTEGER", keyed=" WITHOUT ROWID",
    )  # fmt: skip

    def __init__(self, datastore: SQLiteDatastore, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name)

    def originators_after(self, position: int, limit: int) -> list[tuple[int, UUID, int]]:
        """The notification log after `position`, without the events' state (the aggregate
        cache's look); one statement, no explicit transaction."""
        with self.datastore.get_connection(commit=False) as conn, conn.cursor() as c:
            c.execute(
                f"SELECT rowid, originator_id, originator_version FROM {self.events_table_name} "  # noqa: S608 -- the library's table name
                "WHERE rowid > ? ORDER BY rowid LIMIT ?",
                (position, limit),
            )
            return [(row[0], UUID(row[1]), row[2]) for row in c.fetchall()]

    def construct_create_table_statements(self) -> list[str]:
        return [*super().construct_create_table_statements(), *self.read_model_ddl()]

    def _insert_events(
        self,
        c: SQLiteCursor,
        stored_events: Sequence[StoredEvent],
        *,
        projected_events: Sequence[Any] = (),
        **kwargs: Any,
    ) -> Sequence[int] | None:
        notification_ids = super()._insert_events(c, stored_events, **kwargs)
        if projected_events:
            if notification_ids is None:  # the SQLite recorder always returns them
                raise RuntimeError("the event store returned no notification ids")
            positions = list(zip(notification_ids, projected_events, strict=True))
            self.apply_changes(c, p.project(positions))
        return notification_ids
