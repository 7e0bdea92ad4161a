"""The embedded default store: the library's SQLite recorder plus the inline read models.

The read models are written by the projection in the transaction that stores the events
(DESIGN D4), so every notice is answerable the moment it exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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

    def fetch_tuples(self, template: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.datastore.get_connection(commit=False) as conn:
            cursor = conn.cursor().sqlite_cursor
            cursor.row_factory = None  # tuples, not `sqlite3.Row`
            try:
                return cursor.execute(self.sql(template), params).fetchall()
            finally:
                cursor.close()

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
