"""The embedded default store: the library's SQLite recorder plus the inline read models.

The read models are written by the projection in the transaction that stores the events
(DESIGN D4), so every notice is answerable the moment it exists.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from functools import singledispatchmethod
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore

from session_awareness.application import projection as p
from session_awareness.application.ports import (
    ChangeRow,
    CursorRow,
    Head,
    PrunePlan,
    SessionRow,
    SessionState,
)

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
]

READ_MODEL_TABLES = {
    "session_registry": "session_id",
    "session_state_heads": "session_id",
    "session_state_events": "session_id, sequence",
    "session_watch_cursors": "watch_id",
}

_SESSION_COLUMNS = (
    "r.session_id, r.agent_id, r.session_key, r.kind, r.label, r.parent_key, r.updated_at, "
    "COALESCE(h.state_version, 0) AS state_version, r.deleted"
)
_SESSION_FROM = "session_registry r LEFT JOIN session_state_heads h ON h.session_id = r.session_id"
_CURSOR_COLUMNS = (
    "watch_id, watcher_key, target_id, target_key, acknowledged, notified, material, "
    "notice_order, updated_at"
)


class SQLiteReadModelRecorder(SQLiteApplicationRecorder):
    """Stores events and applies the projection's row changes in the same transaction."""

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

    def apply_changes(self, c: SQLiteCursor, changes: Sequence[p.RowChange]) -> None:
        for change in changes:
            self._apply(change, c)

    def replace_read_models(self, pages: Iterable[Sequence[p.RowChange]]) -> None:
        """Empty the read models and rebuild them from replayed pages, in one transaction."""
        with self.datastore.transaction(commit=True) as c:
            for table in READ_MODEL_TABLES:
                c.execute(f"DELETE FROM {table}")  # noqa: S608 -- fixed table names
            for changes in pages:
                self.apply_changes(c, changes)

    def read_model_rows(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every read-model row, table by table, in key order: what an audit compares."""
        with self.datastore.transaction(commit=False) as c:
            out = {}
            for table, order in READ_MODEL_TABLES.items():
                c.execute(f"SELECT * FROM {table} ORDER BY {order}")  # noqa: S608 -- fixed names
                out[table] = [tuple(row) for row in c.fetchall()]
            return out

    # -- writing rows ----------------------------------------------------------------------

    @singledispatchmethod
    def _apply(self, change: Any, c: SQLiteCursor) -> None:
        raise TypeError(f"no rows for {type(change).__name__}")  # a skipped change is a bug

    @_apply.register
    def _(self, change: p.SessionOpened, c: SQLiteCursor) -> None:
        c.execute(
            "INSERT INTO session_registry (session_id, agent_id, session_key, kind, label, "
            "parent_key, opened_at, updated_at, deleted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)",
            (
                change.session_id.hex,
                change.agent_id,
                change.key,
                change.kind,
                change.label,
                change.parent_key,
                change.at,
                change.at,
            ),
        )
        c.execute(
            "INSERT OR IGNORE INTO session_state_heads VALUES (?, 0, 0)", (change.session_id.hex,)
        )

    @_apply.register
    def _(self, change: p.SessionReopened, c: SQLiteCursor) -> None:
        c.execute(
            "UPDATE session_registry SET kind = ?, label = ?, parent_key = ?, opened_at = ?, "
            "updated_at = ?, deleted = 0 WHERE session_id = ?",
            (
                change.kind,
                change.label,
                change.parent_key,
                change.at,
                change.at,
                change.session_id.hex,
            ),
        )

    @_apply.register
    def _(self, change: p.SessionTouched, c: SQLiteCursor) -> None:
        c.execute(
            "UPDATE session_registry SET updated_at = MAX(updated_at, ?) WHERE session_id = ?",
            (change.at, change.session_id.hex),
        )

    @_apply.register
    def _(self, change: p.ParentLinked, c: SQLiteCursor) -> None:
        c.execute(
            "UPDATE session_registry SET parent_key = ? WHERE session_id = ?",
            (change.parent_key, change.session_id.hex),
        )

    @_apply.register
    def _(self, change: p.SignalAppended, c: SQLiteCursor) -> None:
        c.execute(
            "INSERT INTO session_state_events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                change.session_id.hex,
                change.sequence,
                change.position,
                change.kind,
                change.actor_type,
                change.actor_id,
                change.run_id,
                change.occurred_at,
                change.summary,
                _dump(change.payload),
                change.recorded_at,
            ),
        )
        c.execute(
            "UPDATE session_state_heads SET state_version = MAX(state_version, ?) "
            "WHERE session_id = ?",
            (change.sequence, change.session_id.hex),
        )

    @_apply.register
    def _(self, change: p.HistoryPruned, c: SQLiteCursor) -> None:
        self._drop_history(c, change.session_id, change.watermark)

    @_apply.register
    def _(self, change: p.SessionDeleted, c: SQLiteCursor) -> None:
        self._drop_history(c, change.session_id, change.watermark)
        c.execute(
            "UPDATE session_registry SET deleted = 1, updated_at = ? WHERE session_id = ?",
            (change.at, change.session_id.hex),
        )

    def _drop_history(self, c: SQLiteCursor, session_id: UUID, watermark: int) -> None:
        c.execute(
            "DELETE FROM session_state_events WHERE session_id = ? AND sequence <= ?",
            (session_id.hex, watermark),
        )
        c.execute(
            "UPDATE session_state_heads SET pruned_watermark = MAX(pruned_watermark, ?) "
            "WHERE session_id = ?",
            (watermark, session_id.hex),
        )

    @_apply.register
    def _(self, change: p.CursorStarted, c: SQLiteCursor) -> None:
        c.execute(
            "INSERT OR REPLACE INTO session_watch_cursors VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?)",
            (
                change.watch_id.hex,
                change.watcher_key,
                change.target_id.hex,
                change.target_key,
                change.position,
                change.position,
                change.position,
                change.updated_at,
            ),
        )

    @_apply.register
    def _(self, change: p.CursorMoved, c: SQLiteCursor) -> None:
        c.execute(
            "UPDATE session_watch_cursors SET acknowledged = ?, notified = ?, material = ?, "
            "notice_order = COALESCE(?, notice_order), updated_at = ? WHERE watch_id = ?",
            (
                change.acknowledged,
                change.notified,
                change.material,
                change.notice_order,
                change.updated_at,
                change.watch_id.hex,
            ),
        )

    @_apply.register
    def _(self, change: p.CursorRemoved, c: SQLiteCursor) -> None:
        c.execute("DELETE FROM session_watch_cursors WHERE watch_id = ?", (change.watch_id.hex,))

    # -- queries (the ReadModel port) ------------------------------------------------------

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(sql, params)
            return list(c.fetchall())

    def sessions_with_key(self, key: str, *, include_deleted: bool = False) -> list[SessionRow]:
        live = "" if include_deleted else " AND r.deleted = 0"
        rows = self._fetch(
            f"SELECT {_SESSION_COLUMNS} FROM {_SESSION_FROM} WHERE r.session_key = ?{live} "  # noqa: S608 -- fixed fragments, values bound
            "ORDER BY r.agent_id",
            (key,),
        )
        return [_session(r) for r in rows]

    def session(self, session_id: UUID) -> SessionRow | None:
        rows = self._fetch(
            f"SELECT {_SESSION_COLUMNS} FROM {_SESSION_FROM} WHERE r.session_id = ?",  # noqa: S608 -- fixed fragments, values bound
            (session_id.hex,),
        )
        return _session(rows[0]) if rows else None

    def session_state(
        self, session_id: UUID, *, after: int | None, limit: int
    ) -> SessionState | None:
        sid = session_id.hex
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                "SELECT h.state_version, h.pruned_watermark FROM session_registry r "
                "JOIN session_state_heads h ON h.session_id = r.session_id "
                "WHERE r.session_id = ? AND r.deleted = 0",
                (sid,),
            )
            found = c.fetchone()
            if found is None:
                return None
            head = Head(found[0], found[1])
            if after is None:
                return SessionState(head, [], None)
            c.execute(
                "SELECT sequence, kind, actor_type, actor_id, run_id, occurred_at, summary, "
                "payload FROM session_state_events WHERE session_id = ? AND sequence > ? "
                "ORDER BY sequence LIMIT ?",
                (sid, after, limit),
            )
            changes = [ChangeRow(*r[:7], payload=_load(r[7])) for r in c.fetchall()]
            c.execute("SELECT MIN(sequence) FROM session_state_events WHERE session_id = ?", (sid,))
            return SessionState(head, changes, c.fetchone()[0])

    def list_sessions(
        self,
        *,
        agent_id: str | None,
        kinds: Sequence[str] | None,
        label: str | None,
        updated_since: int | None,
        limit: int | None,
        search: str | None = None,
        keys: Collection[str] | None = None,
    ) -> list[SessionRow]:
        where, params = ["r.deleted = 0"], []
        if keys is not None:
            where.append(f"r.session_key IN ({', '.join('?' for _ in keys)})")
            params.extend(keys)
        if search:
            where.append(
                "(instr(lower(r.session_key), lower(?)) > 0 "
                "OR instr(lower(COALESCE(r.label, '')), lower(?)) > 0)"
            )
            params.extend([search, search])
        if agent_id is not None:
            where.append("r.agent_id = ?")
            params.append(agent_id)
        if kinds is not None:
            where.append(f"r.kind IN ({', '.join('?' for _ in kinds)})")
            params.extend(kinds)
        if label is not None:
            where.append("r.label = ?")
            params.append(label)
        if updated_since is not None:
            where.append("r.updated_at >= ?")
            params.append(updated_since)
        sql = (
            f"SELECT {_SESSION_COLUMNS} FROM {_SESSION_FROM} WHERE {' AND '.join(where)} "  # noqa: S608 -- fixed fragments, values bound
            "ORDER BY r.updated_at DESC, r.session_key"
        )
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [_session(r) for r in self._fetch(sql, params)]

    def children_of(self, parent_keys: Collection[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {key: [] for key in parent_keys}
        if not out:
            return out
        rows = self._fetch(
            "SELECT parent_key, session_key FROM session_registry WHERE deleted = 0 AND "  # noqa: S608 -- fixed fragments, values bound
            f"parent_key IN ({', '.join('?' for _ in out)}) ORDER BY session_key",
            list(out),
        )
        for parent, key in rows:
            out[parent].append(key)
        return out

    def cursors_of_watcher(self, watcher_key: str, *, pending_only: bool) -> list[CursorRow]:
        pending = " AND notified > acknowledged" if pending_only else ""
        rows = self._fetch(
            f"SELECT {_CURSOR_COLUMNS} FROM session_watch_cursors WHERE watcher_key = ?{pending} "  # noqa: S608 -- fixed fragments, values bound
            "ORDER BY notice_order, target_key",
            (watcher_key,),
        )
        return [_cursor(r) for r in rows]

    def cursors_on_target(self, target_id: UUID) -> list[CursorRow]:
        rows = self._fetch(
            f"SELECT {_CURSOR_COLUMNS} FROM session_watch_cursors WHERE target_id = ? "  # noqa: S608 -- fixed fragments, values bound
            "ORDER BY watcher_key",
            (target_id.hex,),
        )
        return [_cursor(r) for r in rows]

    def cursors_updated_before(self, before: int) -> list[CursorRow]:
        rows = self._fetch(
            f"SELECT {_CURSOR_COLUMNS} FROM session_watch_cursors WHERE updated_at < ? "  # noqa: S608 -- fixed fragments, values bound
            "ORDER BY updated_at",
            (before,),
        )
        return [_cursor(r) for r in rows]

    def watchers_with_pending(self) -> list[str]:
        rows = self._fetch(
            "SELECT DISTINCT watcher_key FROM session_watch_cursors "
            "WHERE notified > acknowledged ORDER BY watcher_key"
        )
        return [r[0] for r in rows]

    def prune_plan(self, *, recorded_before: int, keep_rows: int) -> list[PrunePlan]:
        rows = self._fetch(
            """WITH cutoff AS (
                   SELECT position FROM session_state_events
                   ORDER BY position DESC LIMIT 1 OFFSET ?),
               doomed AS (
                   SELECT session_id, MAX(sequence) AS watermark FROM session_state_events
                   WHERE recorded_at < ? OR position <= COALESCE((SELECT position FROM cutoff), -1)
                   GROUP BY session_id)
               SELECT d.session_id, d.watermark,
                      (SELECT COUNT(*) FROM session_state_events e
                       WHERE e.session_id = d.session_id AND e.sequence <= d.watermark)
               FROM doomed d ORDER BY d.session_id""",
            (keep_rows, recorded_before),
        )
        return [PrunePlan(UUID(r[0]), r[1], r[2]) for r in rows]


def _session(r: Any) -> SessionRow:
    return SessionRow(UUID(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], r[7], bool(r[8]))


def _cursor(r: Any) -> CursorRow:
    return CursorRow(UUID(r[0]), r[1], UUID(r[2]), *r[3:])


def _dump(payload: dict[str, Any] | None) -> str | None:
    return None if payload is None else json.dumps(payload, sort_keys=True, separators=(",", ":"))


def _load(text: str | None) -> dict[str, Any] | None:
    return None if text is None else dict(json.loads(text))
