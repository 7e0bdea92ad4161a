"""The `ReadModel` port's queries (`application/ports.py`), written once for both backends.

They read through the backend's `fetch` (a read-only transaction, rows by column name) and
`fetch_tuples` (one statement, rows as tuples); `session_state` is the backend's form in
`session_state`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any
from uuid import UUID

from session_awareness.application.ports import (
    CursorPage,
    CursorRow,
    PrunePlan,
    SessionRow,
    UpstreamLinkRow,
)
from session_awareness.domain.upstream import UpstreamLink, UpstreamSource
from session_awareness.infrastructure.readmodel.dialect import Rendered
from session_awareness.infrastructure.readmodel.tables import (
    DERIVED_MATERIAL,
    DERIVED_UPDATED,
    INDEXED,
    PENDING,
    READ_MODELS_MARK,
    STORE_VERSION_MARK,
)

_SESSION = (
    "SELECT r.session_id, r.agent_id, r.session_key, r.kind, r.label, r.parent_key, "
    "r.updated_at, COALESCE(h.state_version, 0) AS state_version, r.deleted, a.channel, "
    "a.run_id, a.run_status, a.run_started_at, a.run_ended_at, "
    "COALESCE(a.pinned, 0) AS pinned, COALESCE(a.archived, 0) AS archived "
    "FROM {s}session_registry r LEFT JOIN {s}session_state_heads h "
    "ON h.session_id = r.session_id LEFT JOIN {s}session_activity a "
    "ON a.session_id = r.session_id WHERE "
)
#: A registry row without its activity row, its material row or its key index: the store
#: was written by an
#: earlier version.
#: Asked as three separate anti-joins: with the three NOT EXISTS OR-ed in one filter, the
#: planner probes each table once per registry row (11 s at 1,000,000 sessions, past the
#: call deadline, so the store could not be opened); apart, each is one hash or merge
#: anti-join (1.9 s there, on a loaded machine; docs/performance.md).
_OUTDATED = (
    "SELECT 1 WHERE EXISTS (SELECT 1 FROM {s}session_registry r WHERE NOT EXISTS "
    "(SELECT 1 FROM {s}session_activity a WHERE a.session_id = r.session_id)) "
    "OR EXISTS (SELECT 1 FROM {s}session_registry r WHERE NOT EXISTS "
    "(SELECT 1 FROM {s}session_material m WHERE m.session_id = r.session_id)) "
    "OR EXISTS (SELECT 1 FROM {s}session_registry r WHERE NOT EXISTS "
    "(SELECT 1 FROM {s}session_dedupe_keys k WHERE k.session_id = r.session_id "
    "AND k.dedupe_key = ?))"
)
_MARK = "SELECT value FROM {s}session_awareness_marks WHERE name = ?"
#: A mark only goes up: an older process never lowers what a newer one wrote.
_MARK_RAISED = (
    "INSERT INTO {s}session_awareness_marks (name, value) VALUES (?, ?) ON CONFLICT (name) "
    "DO UPDATE SET value = excluded.value WHERE {s}session_awareness_marks.value < excluded.value"
)
#: The read-models mark is set, not raised: a start of another format that found the store
#: complete for its own format leaves a mark this version no longer trusts (ADR 044).
_MARK_SET = (
    "INSERT INTO {s}session_awareness_marks (name, value) VALUES (?, ?) ON CONFLICT (name) "
    "DO UPDATE SET value = excluded.value"
)
_KEY_SEEN = "SELECT 1 FROM {s}session_dedupe_keys WHERE session_id = ? AND dedupe_key = ?"
_CURSOR_FROM = (
    "FROM {s}session_watch_cursors c LEFT JOIN {s}session_material m "
    "ON m.session_id = c.target_id WHERE "
)
_CURSOR_COLUMNS = (
    "c.watch_id, c.watcher_key, c.target_id, c.target_key, c.acknowledged, "
    f"c.notified, {DERIVED_MATERIAL} AS material, c.notice_order, "
    f"{DERIVED_UPDATED} AS updated_at " + _CURSOR_FROM
)
_CURSOR = "SELECT " + _CURSOR_COLUMNS
#: Idle before `?` (both parameters the same time), walked by the stored time's index: the
#: derived time is the greater of the stored one and another, so `c.updated_at < ?` loses
#: no idle cursor.
_IDLE_WHERE = "c.updated_at < ? AND " + DERIVED_UPDATED + " < ? "
#: A page of idle cursors.
_IDLE = (
    "SELECT c.updated_at AS stored_at, " + _CURSOR_COLUMNS + _IDLE_WHERE
    + "{after}ORDER BY c.updated_at, c.watch_id LIMIT ?"
)  # fmt: skip
_CURSOR_COUNTS = (
    f"SELECT COUNT(*), SUM(CASE WHEN {PENDING} THEN 1 ELSE 0 END) FROM {{s}}session_watch_cursors c"
)
_IDLE_COUNT = "SELECT COUNT(*) " + _CURSOR_FROM + _IDLE_WHERE
_WATCHERS_PENDING = (
    f"SELECT COUNT(DISTINCT c.watcher_key) FROM {{s}}session_watch_cursors c WHERE {PENDING}"
)
_IDLE_AFTER = "AND (c.updated_at > ? OR (c.updated_at = ? AND c.watch_id > ?)) "
#: The console's cursor pages (`cursor_page`): a watcher's, through the pairs index (its
#: key compared as the index orders it) ...
_PAGE_WATCHER = "c.watcher_key{bytewise} = ?"
#: ... one target key's, through the registry's key index and the cursors' target index
#: (a target's id is its session's, so its key is its session's key): a bounded read, the
#: watchers of one key's sessions ...
_PAGE_TARGET = (
    "c.target_id IN (SELECT r.session_id FROM {s}session_registry r WHERE r.session_key = ?) "
    "AND c.target_key = ?"
)
#: ... in the order of the pairs index, which serves it without a filter or with a watcher.
_PAGE_ORDER = (
    " ORDER BY c.watcher_key{bytewise}, c.target_key{bytewise}, c.target_id LIMIT ? OFFSET ?"
)
_PAGE_COUNTS = (
    f"SELECT COUNT(*) AS total, SUM(CASE WHEN {PENDING} THEN 1 ELSE 0 END) AS pending "
    "FROM {s}session_watch_cursors c WHERE "
)
_PENDING_TO_DRAIN = (
    f"SELECT c.watch_id, {DERIVED_MATERIAL} FROM {{s}}session_watch_cursors c "
    "LEFT JOIN {s}session_material m ON m.session_id = c.target_id "
    f"WHERE c.watcher_key = ? AND {PENDING} "
    "ORDER BY c.notice_order, c.target_key"
)
#: `_PENDING_TO_DRAIN` for several watchers at once (the sweep's batch, ADR 038): the
#: watcher's key first, then each watcher's cursors in the same order.
_PENDING_OF_WATCHERS = (
    f"SELECT c.watcher_key, c.watch_id, {DERIVED_MATERIAL} FROM {{s}}session_watch_cursors c "
    "LEFT JOIN {s}session_material m ON m.session_id = c.target_id "
    f"WHERE {{watchers}} AND {PENDING} "
    "ORDER BY c.watcher_key, c.notice_order, c.target_key"
)
_LINK = (
    "SELECT l.session_id, r.agent_id, r.session_key, l.catalog_id, l.host_id, l.thread_id, "
    "l.upstream_kind, l.upstream_ref, l.marker, l.last_position, l.generation, l.updated_at "
    "FROM {s}session_upstream_links l JOIN {s}session_registry r "
    "ON r.session_id = l.session_id WHERE r.deleted = 0"
)
_WATCHED = " AND EXISTS (SELECT 1 FROM {s}session_watch_cursors c WHERE c.target_id = l.session_id)"
_DOOMED = """
    WITH cutoff AS (
        SELECT position FROM {s}session_state_events ORDER BY position DESC LIMIT 1 OFFSET ?),
    doomed AS (
        SELECT session_id, MAX(sequence) AS watermark FROM {s}session_state_events
        WHERE recorded_at < ? OR position <= COALESCE((SELECT position FROM cutoff), -1)
        GROUP BY session_id)
    SELECT d.session_id, d.watermark,
           (SELECT COUNT(*) FROM {s}session_state_events e
            WHERE e.session_id = d.session_id AND e.sequence <= d.watermark) AS row_count"""
_PRUNE_PLAN = _DOOMED + " FROM doomed d ORDER BY d.session_id"
#: The whole plan of the live sessions whose head's pruned watermark is below it (what a
#: prune would raise now), with each session's agent and key: a preview's one read.
_PRUNE_PREVIEW = (
    _DOOMED
    + """, r.agent_id, r.session_key
    FROM doomed d JOIN {s}session_registry r ON r.session_id = d.session_id
    JOIN {s}session_state_heads h ON h.session_id = d.session_id
    WHERE r.deleted = 0 AND d.watermark > h.pruned_watermark ORDER BY d.session_id"""
)
#: One batch of the plan: the oldest doomed rows by recording position after `after` (the
#: last position an earlier batch removed, so the scan never walks the entries it left
#: behind), at most `limit` of them, read through the position index and grouped by
#: session. A session's rows are recorded in sequence order, so a batch holds a prefix of
#: each session it reaches: its highest sequence there is an exact watermark, and the batch's
#: rows are the rows it removes.
_PRUNE_BATCH = """
    WITH cutoff AS (
        SELECT position FROM {s}session_state_events ORDER BY position DESC LIMIT 1 OFFSET ?),
    batch AS (
        SELECT session_id, sequence, position FROM {s}session_state_events
        WHERE position > ?
          AND (recorded_at < ? OR position <= COALESCE((SELECT position FROM cutoff), -1))
        ORDER BY position LIMIT ?)
    SELECT b.session_id, MAX(b.sequence) AS watermark, COUNT(*) AS row_count,
           MAX(b.position) AS last_position, r.agent_id, r.session_key
    FROM batch b JOIN {s}session_registry r ON r.session_id = b.session_id
    GROUP BY b.session_id, r.agent_id, r.session_key ORDER BY b.session_id"""

#: A LIMIT both backends read as "every row" (SQLite takes an OFFSET only after one).
NO_LIMIT = 2**63 - 1


class ReadModelQueries(Rendered):
    datastore: Any  # the backend's, for the one write here (`mark_store_version`)

    def fetch(self, template: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows by column name, read in one read-only transaction."""
        raise NotImplementedError

    def fetch_tuples(self, template: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def sessions_with_key(self, key: str, *, include_deleted: bool = False) -> list[SessionRow]:
        live = "" if include_deleted else " AND r.deleted = 0"
        rows = self.fetch(_SESSION + "r.session_key = ?" + live + " ORDER BY r.agent_id", (key,))
        return [_session(r) for r in rows]

    def gone_keys(self, keys: Collection[str]) -> set[str]:
        """Of `keys`, those of sessions that all are deleted (a key no session has is not
        gone): `sessions_with_key(key, include_deleted=True)` of each, in one statement."""
        if not keys:
            return set()
        clause, param = self.dialect.one_of("session_key", list(keys))
        rows = self.fetch_tuples(
            "SELECT session_key FROM {s}session_registry WHERE "
            + clause
            + " GROUP BY session_key HAVING MIN(deleted) <> 0",
            (param,),
        )
        return {row[0] for row in rows}

    def session(self, session_id: UUID) -> SessionRow | None:
        rows = self.fetch(_SESSION + "r.session_id = ?", (self.dialect.bind_id(session_id),))
        return _session(rows[0]) if rows else None

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
        archived: bool | None = None,
        offset: int = 0,
    ) -> list[SessionRow]:
        where, params = ["r.deleted = 0"], []
        if archived is not None:
            where.append("COALESCE(a.archived, 0) = ?")
            params.append(int(archived))
        for column, values in (("r.session_key", keys), ("r.kind", kinds)):
            if values is not None:
                clause, param = self.dialect.one_of(column, list(values))
                where.append(clause)
                params.append(param)
        if agent_id is not None:
            where.append("r.agent_id = ?")
            params.append(agent_id)
        if label is not None:
            where.append("r.label = ?")
            params.append(label)
        if updated_since is not None:
            where.append("r.updated_at >= ?")
            params.append(updated_since)
        sql = _SESSION + " AND ".join(where) + " ORDER BY r.updated_at DESC, r.session_key"
        if not search:
            if limit is not None or offset:  # SQLite takes an OFFSET after a LIMIT only
                sql += " LIMIT ?"
                params.append(NO_LIMIT if limit is None else limit)
            if offset:
                sql += " OFFSET ?"
                params.append(offset)
        rows = [_session(r) for r in self.fetch(sql, params)]
        if search:
            # Case folded in Python, the same on both backends and beyond ASCII (SQLite's
            # lower() folds ASCII only, and PostgreSQL's follows the database's locale).
            term = search.casefold()
            rows = [
                row for row in rows
                if term in row.key.casefold() or term in (row.label or "").casefold()
            ][offset : None if limit is None else offset + limit]  # fmt: skip
        return rows

    def children_of(self, parent_keys: Collection[str]) -> dict[str, list[tuple[str, str]]]:
        out: dict[str, list[tuple[str, str]]] = {key: [] for key in parent_keys}
        if out:
            clause, param = self.dialect.one_of("parent_key", list(out))
            rows = self.fetch(
                "SELECT parent_key, agent_id, session_key FROM {s}session_registry "
                "WHERE deleted = 0 AND " + clause + " ORDER BY session_key, agent_id",
                [param],
            )
            for row in rows:
                out[row["parent_key"]].append((row["agent_id"], row["session_key"]))
        return out

    def read_models_outdated(self) -> bool:
        """Whether a session's registry row lacks the rows this version keeps beside it:
        the read models were written by an earlier version and need a rebuild."""
        return bool(self.fetch(_OUTDATED, (INDEXED,)))

    def store_version(self) -> int | None:
        return self._mark(STORE_VERSION_MARK)

    def read_models_complete(self) -> int | None:
        return self._mark(READ_MODELS_MARK)

    def mark_read_models_complete(self, read_format: int) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute(self.sql(_MARK_SET), (READ_MODELS_MARK, read_format))

    def _mark(self, name: str) -> int | None:
        try:
            rows = self.fetch_tuples(_MARK, (name,))
        except Exception as error:
            # Only a store older than the mark lacks its table (one opened read-only, which
            # creates nothing): unmarked.
            if "no such table: session_awareness_marks" in str(error):
                return None
            raise
        return int(rows[0][0]) if rows else None

    def mark_store_version(self, version: int) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute(self.sql(_MARK_RAISED), (STORE_VERSION_MARK, version))

    def dedupe_key_seen(self, session_id: UUID, dedupe_key: str) -> bool:
        if dedupe_key == INDEXED:
            return False
        return bool(self.fetch_tuples(_KEY_SEEN, (self.dialect.bind_id(session_id), dedupe_key)))

    def cursors_of_watcher(
        self, watcher_key: str, *, pending_only: bool, limit: int | None = None
    ) -> list[CursorRow]:
        pending = f" AND {PENDING}" if pending_only else ""
        sql = _CURSOR + "c.watcher_key = ?" + pending + " ORDER BY c.notice_order, c.target_key"
        if limit is None:
            rows = self.fetch(sql, (watcher_key,))
        else:
            rows = self.fetch(sql + " LIMIT ?", (watcher_key, limit))
        return [_cursor(r) for r in rows]

    def pending_to_drain(self, watcher_key: str) -> list[tuple[UUID, int]]:
        rows = self.fetch_tuples(_PENDING_TO_DRAIN, (watcher_key,))
        return [(_uuid(wid), material) for wid, material in rows]

    def pending_of_watchers(
        self, watcher_keys: Collection[str]
    ) -> dict[str, list[tuple[UUID, int]]]:
        """`pending_to_drain` of each of `watcher_keys` in one statement; a watcher without
        a pending cursor is left out."""
        out: dict[str, list[tuple[UUID, int]]] = {}
        if not watcher_keys:
            return out
        clause, param = self.dialect.one_of("c.watcher_key", list(watcher_keys))
        rows = self.fetch_tuples(_PENDING_OF_WATCHERS.replace("{watchers}", clause), (param,))
        for watcher, wid, material in rows:
            out.setdefault(watcher, []).append((_uuid(wid), material))
        return out

    def cursors_on_target(self, target_id: UUID, *, limit: int | None = None) -> list[CursorRow]:
        sql = _CURSOR + "c.target_id = ? ORDER BY c.watcher_key"
        if limit is None:
            rows = self.fetch(sql, (self.dialect.bind_id(target_id),))
        else:
            rows = self.fetch(sql + " LIMIT ?", (self.dialect.bind_id(target_id), limit))
        return [_cursor(r) for r in rows]

    def cursor_page(
        self,
        *,
        watcher_key: str | None = None,
        target_key: str | None = None,
        pending_only: bool = False,
        offset: int = 0,
        limit: int,
    ) -> CursorPage:
        """The page and its counts in one read-only transaction, two statements: the page
        reads at most `offset + limit` entries of the pairs index (or one target key's
        cursors), the counts count the filtered cursors without reading their rows."""
        if offset < 0 or limit < 0:
            raise ValueError(f"a page's offset and limit are never negative: {offset}, {limit}")
        page, counts, params = cursor_page_statements(watcher_key, target_key, pending_only)
        with self.datastore.transaction(commit=False) as c:
            c.execute(self.sql(page), (*params, limit, offset))
            rows = [_cursor(r) for r in c.fetchall()]
            c.execute(self.sql(counts), params)
            counts = c.fetchone()
        return rows, int(counts["total"]), int(counts["pending"] or 0)

    def cursors_updated_before(self, before: int) -> list[CursorRow]:
        return [
            _cursor(r)
            for r in self.fetch(
                _CURSOR + DERIVED_UPDATED + " < ? ORDER BY updated_at, c.watch_id", (before,)
            )
        ]

    def cursors_idle_before(
        self, before: int, *, after: tuple[int, UUID] | None = None, limit: int
    ) -> list[tuple[int, CursorRow]]:
        if after is None:
            rows = self.fetch(_IDLE.replace("{after}", ""), (before, before, limit))
        else:
            at, wid = after
            rows = self.fetch(
                _IDLE.replace("{after}", _IDLE_AFTER),
                (before, before, at, at, self.dialect.bind_id(wid), limit),
            )
        return [(r["stored_at"], _cursor(r)) for r in rows]

    def cursors_idle_count(self, before: int) -> int:
        [(count,)] = self.fetch_tuples(_IDLE_COUNT, (before, before))
        return int(count)

    def cursor_counts(self) -> tuple[int, int]:
        [(live, pending)] = self.fetch_tuples(_CURSOR_COUNTS)
        return int(live), int(pending or 0)

    def watchers_with_pending(self) -> list[str]:
        rows = self.fetch(
            "SELECT DISTINCT c.watcher_key FROM {s}session_watch_cursors c "
            f"WHERE {PENDING} ORDER BY c.watcher_key"
        )
        return [row["watcher_key"] for row in rows]

    def watchers_pending_count(self) -> int:
        [(count,)] = self.fetch_tuples(_WATCHERS_PENDING)
        return int(count)

    def upstream_links(self, *, watched_only: bool = False) -> list[UpstreamLinkRow]:
        sql = _LINK + (_WATCHED if watched_only else "") + " ORDER BY r.agent_id, r.session_key"
        return [_link(r) for r in self.fetch(sql)]

    def upstream_link(self, session_id: UUID) -> UpstreamLinkRow | None:
        rows = self.fetch(_LINK + " AND l.session_id = ?", (self.dialect.bind_id(session_id),))
        return _link(rows[0]) if rows else None

    def newest_recorded(self, *, before: int) -> int | None:
        rows = self.fetch_tuples(
            "SELECT MAX(t) FROM (SELECT MAX(recorded_at) AS t FROM {s}session_state_events "
            "WHERE recorded_at < ? UNION ALL SELECT MAX(updated_at) FROM "
            "{s}session_watch_cursors WHERE updated_at < ?) newest",
            (before, before),
        )
        return None if not rows or rows[0][0] is None else int(rows[0][0])

    def prune_plan(
        self, *, recorded_before: int, keep_rows: int, limit: int | None = None, after: int = 0
    ) -> list[PrunePlan]:
        if limit is None:
            rows = self.fetch(_PRUNE_PLAN, (keep_rows, recorded_before))
            return [PrunePlan(_uuid(r["session_id"]), r["watermark"], r["row_count"]) for r in rows]
        rows = self.fetch(_PRUNE_BATCH, (keep_rows, after, recorded_before, limit))
        return [
            PrunePlan(
                _uuid(r["session_id"]), r["watermark"], r["row_count"], r["agent_id"],
                r["session_key"], r["last_position"],
            )
            for r in rows
        ]  # fmt: skip

    def prune_preview_plan(self, *, recorded_before: int, keep_rows: int) -> list[PrunePlan]:
        rows = self.fetch(_PRUNE_PREVIEW, (keep_rows, recorded_before))
        return [
            PrunePlan(
                _uuid(r["session_id"]), r["watermark"], r["row_count"], r["agent_id"],
                r["session_key"],
            )
            for r in rows
        ]  # fmt: skip


def cursor_page_statements(
    watcher_key: str | None, target_key: str | None, pending_only: bool
) -> tuple[str, str, list[Any]]:
    """`cursor_page`'s two statements for its filters (templates): the page's, which takes
    the filters' parameters then the limit and the offset, and the counts', which takes the
    filters' parameters; and those parameters."""
    where: list[str] = []
    params: list[Any] = []
    if watcher_key is not None:
        where.append(_PAGE_WATCHER)
        params.append(watcher_key)
    if target_key is not None:
        where.append(_PAGE_TARGET)
        params += [target_key, target_key]
    if pending_only:
        where.append(PENDING)
    filtered = " AND ".join(where) if where else "1 = 1"
    return _CURSOR + filtered + _PAGE_ORDER, _PAGE_COUNTS + filtered, params


def _uuid(value: Any) -> UUID:
    """An id column's value: PostgreSQL's own UUID, or SQLite's hex (`SQLiteDialect.bind_id`),
    read as an integer, half the time of parsing it as hex (a drain reads two per pair)."""
    return value if isinstance(value, UUID) else UUID(int=int(value, 16))


def _session(r: Any) -> SessionRow:
    return SessionRow(
        _uuid(r["session_id"]), r["agent_id"], r["session_key"], r["kind"], r["label"],
        r["parent_key"], r["updated_at"], r["state_version"], bool(r["deleted"]),
        r["channel"], r["run_id"], r["run_status"], r["run_started_at"], r["run_ended_at"],
        bool(r["pinned"]), bool(r["archived"]),
    )  # fmt: skip


def _cursor(r: Any) -> CursorRow:
    return CursorRow(
        _uuid(r["watch_id"]), r["watcher_key"], _uuid(r["target_id"]), r["target_key"],
        r["acknowledged"], r["notified"], r["material"], r["notice_order"], r["updated_at"],
    )  # fmt: skip


def _link(r: Any) -> UpstreamLinkRow:
    source = UpstreamSource(
        r["catalog_id"], r["host_id"], r["thread_id"], r["upstream_kind"], r["upstream_ref"]
    )
    link = UpstreamLink(source, r["generation"], r["marker"], r["last_position"])
    return UpstreamLinkRow(
        _uuid(r["session_id"]), r["agent_id"], r["session_key"], link, r["updated_at"]
    )
