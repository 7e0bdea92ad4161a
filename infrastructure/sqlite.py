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

READ_MODEL_DDL = [
    """CREATE TABLE IF NOT EXISTS session_registry (
        session_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, session_key TEXT NOT NULL,
        kind TEXT NOT NULL, label TEXT, parent_key TEXT, opened_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL, deleted INTEGER NOT NULL DEFAULT 0)""",
    "CREATE INDEX IF NOT EXISTS session_registry_key ON session_registry (session_key)",
    "CREATE INDEX IF NOT EXISTS session_registry_parent ON session_registry (parent_key)",
    """CREATE TABLE IF NOT EXISTS session_state_heads (
        session_id TEXT PRIMARY KEY, state_version INTEGER NOT NULL,
        pruned_watermark INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS session_state_events (
        session_id TEXT NOT NULL, sequence INTEGER NOT NULL, position INTEGER NOT NULL,
        kind TEXT NOT NULL, actor_type TEXT NOT NULL, actor_id TEXT, run_id TEXT,
        occurred_at INTEGER NOT NULL, summary TEXT NOT NULL, payload TEXT,
        recorded_at INTEGER NOT NULL, PRIMARY KEY (session_id, sequence)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS session_state_events_position ON session_state_events (position)",
    "CREATE INDEX IF NOT EXISTS session_state_events_recorded "
    "ON session_state_events (recorded_at)",
    """CREATE TABLE IF NOT EXISTS session_watch_cursors (
        watch_id TEXT PRIMARY KEY, watcher_key TEXT NOT NULL, target_id TEXT NOT NULL,
        target_key TEXT NOT NULL, acknowledged INTEGER NOT NULL, notified INTEGER NOT NULL,
        material INTEGER NOT NULL, notice_order INTEGER, updated_at INTEGER NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS session_watch_cursors_watcher "
    "ON session_watch_cursors (watcher_key)",
    "CREATE INDEX IF NOT EXISTS session_watch_cursors_target ON session_watch_cursors (target_id)",
    "CREATE INDEX IF NOT EXISTS session_watch_cursors_updated "
    "ON session_watch_cursors (updated_at)",
    """CREATE TABLE IF NOT EXISTS session_upstream_links (
        session_id TEXT PRIMARY KEY, catalog_id TEXT NOT NULL, host_id TEXT NOT NULL,
        thread_id TEXT NOT NULL, upstream_kind TEXT NOT NULL, upstream_ref TEXT NOT NULL,
        marker TEXT, last_position TEXT, generation INTEGER NOT NULL,
        linked_at INTEGER NOT NULL, updated_at INTEGER NOT NULL)""",
]


class SQLiteReadModelRecorder(ReadModelStore, SQLiteApplicationRecorder):
    """Stores events and applies the projection's row changes in the same transaction."""

    dialect = Dialect(schema_prefix="", placeholder="?", greatest="MAX", strpos="instr")

    def __init__(self, datastore: SQLiteDatastore, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name)

    def construct_create_table_statements(self) -> list[str]:
        return [*super().construct_create_table_statements(), *READ_MODEL_DDL]

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
