"""The read models, written once for both backends (DESIGN D4).

`ReadModelStore` turns the projection's row changes into SQL and answers the `ReadModel`
queries. Its SQL is written with `?` placeholders and three dialect holes — `{s}` (schema
prefix), `{greatest}` and `{strpos}` — that each backend fills in (`Dialect`); a list of
values is always one parameter (`one_of`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import cache
from operator import itemgetter
from typing import Any
from uuid import UUID

from session_awareness.application import projection as p
from session_awareness.application.ports import (
    CursorRow,
    Head,
    PrunePlan,
    SessionRow,
    SessionState,
    UpstreamLinkRow,
)
from session_awareness.domain.upstream import UpstreamLink, UpstreamSource

#: Read-model tables and the order an audit compares their rows in.
READ_MODEL_TABLES = {
    "session_registry": "session_id",
    "session_state_heads": "session_id",
    "session_state_events": "session_id, sequence",
    "session_watch_cursors": "watch_id",
    "session_upstream_links": "session_id",
    "session_activity": "session_id",
}

#: The read-model tables, written once: `{id}`, `{int}` and `{text}` are the backend's column
#: types, `{s}` its schema prefix, `{keyed}` what follows a table with a composite key.
READ_MODEL_DDL = [
    """CREATE TABLE IF NOT EXISTS {s}session_registry (
        session_id {id} PRIMARY KEY, agent_id {text} NOT NULL, session_key {text} NOT NULL,
        kind {text} NOT NULL, label {text}, parent_key {text}, opened_at {int} NOT NULL,
        updated_at {int} NOT NULL, deleted {int} NOT NULL DEFAULT 0)""",
    "CREATE INDEX IF NOT EXISTS session_registry_key ON {s}session_registry (session_key)",
    "CREATE INDEX IF NOT EXISTS session_registry_parent ON {s}session_registry (parent_key)",
    """CREATE TABLE IF NOT EXISTS {s}session_state_heads (
        session_id {id} PRIMARY KEY, state_version {int} NOT NULL,
        pruned_watermark {int} NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS {s}session_state_events (
        session_id {id} NOT NULL, sequence {int} NOT NULL, position {int} NOT NULL,
        kind {text} NOT NULL, actor_type {text} NOT NULL, actor_id {text}, run_id {text},
        occurred_at {int} NOT NULL, summary {text} NOT NULL, payload {text},
        recorded_at {int} NOT NULL, PRIMARY KEY (session_id, sequence)){keyed}""",
    "CREATE INDEX IF NOT EXISTS session_state_events_position "
    "ON {s}session_state_events (position)",
    "CREATE INDEX IF NOT EXISTS session_state_events_recorded "
    "ON {s}session_state_events (recorded_at)",
    """CREATE TABLE IF NOT EXISTS {s}session_watch_cursors (
        watch_id {id} PRIMARY KEY, watcher_key {text} NOT NULL, target_id {id} NOT NULL,
        target_key {text} NOT NULL, acknowledged {int} NOT NULL, notified {int} NOT NULL,
        material {int} NOT NULL, notice_order {int}, updated_at {int} NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS session_watch_cursors_watcher "
    "ON {s}session_watch_cursors (watcher_key)",
    "CREATE INDEX IF NOT EXISTS session_watch_cursors_target "
    "ON {s}session_watch_cursors (target_id)",
    "CREATE INDEX IF NOT EXISTS session_watch_cursors_updated "
    "ON {s}session_watch_cursors (updated_at)",
    """CREATE TABLE IF NOT EXISTS {s}session_upstream_links (
        session_id {id} PRIMARY KEY, catalog_id {text} NOT NULL, host_id {text} NOT NULL,
        thread_id {text} NOT NULL, upstream_kind {text} NOT NULL, upstream_ref {text} NOT NULL,
        marker {text}, last_position {text}, generation {int} NOT NULL,
        linked_at {int} NOT NULL, updated_at {int} NOT NULL)""",
    # What the log knows of a session beyond its head, and the host's marks: one row per
    # session ever opened, so a registry row without one was written by an earlier version
    # (`read_models_outdated`).
    """CREATE TABLE IF NOT EXISTS {s}session_activity (
        session_id {id} PRIMARY KEY, channel {text}, run_id {text}, run_status {text},
        run_started_at {int}, run_ended_at {int}, pinned {int} NOT NULL DEFAULT 0,
        archived {int} NOT NULL DEFAULT 0)""",
]

_SESSION = (
    "SELECT r.session_id, r.agent_id, r.session_key, r.kind, r.label, r.parent_key, "
    "r.updated_at, COALESCE(h.state_version, 0) AS state_version, r.deleted, a.channel, "
    "a.run_id, a.run_status, a.run_started_at, a.run_ended_at, "
    "COALESCE(a.pinned, 0) AS pinned, COALESCE(a.archived, 0) AS archived "
    "FROM {s}session_registry r LEFT JOIN {s}session_state_heads h "
    "ON h.session_id = r.session_id LEFT JOIN {s}session_activity a "
    "ON a.session_id = r.session_id WHERE "
)
#: A registry row without its activity row: the store was written by an earlier version.
_OUTDATED = (
    "SELECT 1 FROM {s}session_registry r WHERE NOT EXISTS "
    "(SELECT 1 FROM {s}session_activity a WHERE a.session_id = r.session_id) LIMIT 1"
)
_CURSOR = (
    "SELECT watch_id, watcher_key, target_id, target_key, acknowledged, notified, material, "
    "notice_order, updated_at FROM {s}session_watch_cursors WHERE "
)
_LINK = (
    "SELECT l.session_id, r.agent_id, r.session_key, l.catalog_id, l.host_id, l.thread_id, "
    "l.upstream_kind, l.upstream_ref, l.marker, l.last_position, l.generation, l.updated_at "
    "FROM {s}session_upstream_links l JOIN {s}session_registry r "
    "ON r.session_id = l.session_id WHERE r.deleted = 0"
)
_WATCHED = " AND EXISTS (SELECT 1 FROM {s}session_watch_cursors c WHERE c.target_id = l.session_id)"
#: `session_state` in one statement: the page columns (a `ChangeRow`), then the head, the
#: pruned watermark and the earliest retained sequence on every row. The head row LEFT JOINs
#: the page, so a session without matching rows still gives one row (its page columns NULL);
#: the page is bounded by the head of the same snapshot, so it never runs ahead of it (R-S1).
#: The scalar subquery is uncorrelated: evaluated once.
#: `session_state` on SQLite: the head joined to every row of the page (in-process, the
#: cheapest: 170 us for a 200-event page, against 230 us for the form below).
_STATE_JOINED = (
    "SELECT e.sequence, e.kind, e.actor_type, e.actor_id, e.run_id, e.occurred_at, e.summary, "
    "e.payload, h.state_version, h.pruned_watermark, "
    "(SELECT MIN(sequence) FROM {s}session_state_events WHERE session_id = ?) "
    "FROM {s}session_registry r JOIN {s}session_state_heads h ON h.session_id = r.session_id "
    "LEFT JOIN {s}session_state_events e ON e.session_id = r.session_id "
    "AND e.sequence > ? AND e.sequence <= h.state_version "
    "WHERE r.session_id = ? AND r.deleted = 0 ORDER BY e.sequence LIMIT ?"
)
#: `session_state` on PostgreSQL: the head row (its page columns NULL), then the page (its head
#: columns NULL), so the head is sent once rather than with every row (231 against 268 us).
#: No outer ORDER BY (a sort of the whole page, ~40 us): the rows come in branch order, and
#: `session_state` puts them in order itself when they do not.
_STATE_STACKED = (
    "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, h.state_version, "
    "h.pruned_watermark, (SELECT MIN(sequence) FROM {s}session_state_events WHERE session_id = ?) "
    "FROM {s}session_registry r JOIN {s}session_state_heads h ON h.session_id = r.session_id "
    "WHERE r.session_id = ? AND r.deleted = 0 "
    "UNION ALL SELECT * FROM (SELECT e.sequence, e.kind, e.actor_type, e.actor_id, e.run_id, "
    "e.occurred_at, e.summary, e.payload, CAST(NULL AS {int}), CAST(NULL AS {int}), "
    "CAST(NULL AS {int}) FROM {s}session_state_events e "
    "WHERE e.session_id = ? AND e.sequence > ? AND e.sequence <= (SELECT h.state_version "
    "FROM {s}session_state_heads h WHERE h.session_id = ?) ORDER BY e.sequence LIMIT ?) page"
)
_first = itemgetter(0)
_NO_PAGE = 2**62  # an `after` beyond every sequence: the head row alone
_PRUNE_PLAN = """
    WITH cutoff AS (
        SELECT position FROM {s}session_state_events ORDER BY position DESC LIMIT 1 OFFSET ?),
    doomed AS (
        SELECT session_id, MAX(sequence) AS watermark FROM {s}session_state_events
        WHERE recorded_at < ? OR position <= COALESCE((SELECT position FROM cutoff), -1)
        GROUP BY session_id)
    SELECT d.session_id, d.watermark,
           (SELECT COUNT(*) FROM {s}session_state_events e
            WHERE e.session_id = d.session_id AND e.sequence <= d.watermark) AS row_count
    FROM doomed d ORDER BY d.session_id"""


@dataclass(frozen=True)
class Dialect:
    schema_prefix: str  # "" or '"schema".'
    placeholder: str  # "?" or "%s"
    greatest: str  # "MAX" or "GREATEST"
    strpos: str  # "instr" or "strpos"
    id_type: str = "TEXT"  # hex on SQLite; "uuid" on PostgreSQL
    int_type: str = "INTEGER"  # "bigint" on PostgreSQL
    text_type: str = "TEXT"
    keyed: str = ""  # " WITHOUT ROWID" on SQLite
    stacked_state: bool = False  # `session_state` as head row + page rows (PostgreSQL)
    arrays: bool = False  # array parameters (PostgreSQL); else a JSON array (SQLite's json_each)

    def render(self, template: str) -> str:
        """A statement template (`{s}`, `{greatest}`, … and `?` placeholders) for this backend."""
        text = template.format(
            s=self.schema_prefix, greatest=self.greatest, strpos=self.strpos, id=self.id_type,
            int=self.int_type, text=self.text_type, keyed=self.keyed,
        )  # fmt: skip
        return text.replace("?", self.placeholder)


class ReadModelStore:
    """Mixed into each backend's application recorder; `self.datastore` is the library's."""

    datastore: Any
    dialect: Dialect

    @cache  # noqa: B019 -- a handful of fixed templates per recorder, kept for its lifetime
    def sql(self, template: str) -> str:
        return self.dialect.render(template)

    def read_model_ddl(self) -> list[str]:
        """This backend's statements creating the read-model tables and indexes."""
        return [self.sql(template) for template in READ_MODEL_DDL]

    def param_id(self, value: UUID) -> Any:
        """How an aggregate id is bound: hex text on SQLite, a uuid on PostgreSQL."""
        return value.hex

    def exec(self, c: Any, template: str, params: Sequence[Any] = ()) -> None:
        c.execute(self.sql(template), params)

    def fetch(self, template: str, params: Sequence[Any] = ()) -> list[Any]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(self.sql(template), params)
            return list(c.fetchall())

    def fetch_tuples(self, template: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """One statement, atomic on its own, outside an explicit transaction; rows as tuples.
        Each backend runs it its cheapest way."""
        raise NotImplementedError

    # -- writing rows ----------------------------------------------------------------------

    def apply_changes(
        self, c: Any, changes: Iterable[p.RowChange], quiet: Collection[UUID] = ()
    ) -> None:
        """Write row changes one statement at a time, in order: the inline path. A notice
        opened on a cursor in `quiet` (an ambient one, R-W7) publishes no wake."""
        sql = self.sql
        for change in changes:
            for write, _, params in _WRITES[type(change)](self, change):
                c.execute(sql(write.template), params)
            if _wakes(change, quiet):
                self.notice_opened(c, change.watch_id)  # type: ignore[union-attr]

    def apply_inline(
        self, c: Any, changes: Sequence[p.RowChange], quiet: Collection[UUID] = ()
    ) -> None:
        """The inline path (in the transaction that stores the events): a save's few changes
        one statement at a time; a large one (a drain, a wide fan-out) in bulk, then a wake
        for every notice it opened on a cursor not in `quiet`."""
        if len(changes) < BULK_INLINE:
            self.apply_changes(c, changes, quiet)
            return
        self.apply_changes_in_bulk(c, changes)
        for change in changes:
            if _wakes(change, quiet):
                self.notice_opened(c, change.watch_id)  # type: ignore[union-attr]

    def apply_changes_in_bulk(self, c: Any, changes: Iterable[p.RowChange]) -> None:
        """Write row changes with the end state of `apply_changes`, in a few `executemany`s:
        a rebuild's pages. Every statement touches the rows of one key of one table (a
        session's, a cursor's), so statements on different keys commute: each key's writes
        keep their order, consecutive writes of one foldable statement to one key become one
        (the head's `GREATEST` of several sequences, a cursor's last positions), and the
        n-th writes of every key go together, one `executemany` per statement. It publishes
        no wakes: a rebuild opens no notice."""
        keyed: dict[tuple[str, Any], list[tuple[Write, list[tuple[Any, ...]]]]] = {}
        for change in changes:
            for write, key, params in _WRITES[type(change)](self, change):
                ops = keyed.get((write.table, key))
                if ops is None:
                    keyed[write.table, key] = [(write, [params])]
                    continue
                last, rows = ops[-1]
                if last is not write:
                    ops.append((write, [params]))
                elif write.fold is None:
                    rows.append(params)
                else:
                    rows[-1] = write.fold(rows[-1], params)
        layer = 0
        while keyed:
            batches: dict[Write, list[tuple[Any, ...]]] = {}
            for ops in keyed.values():
                write, rows = ops[layer]
                batch = batches.get(write)
                if batch is None:
                    batches[write] = rows
                else:
                    batch.extend(rows)
            self.write_batches(c, batches)
            layer += 1
            keyed = {key: ops for key, ops in keyed.items() if len(ops) > layer}

    def write_batches(self, c: Any, batches: dict[Write, list[tuple[Any, ...]]]) -> None:
        """Run each statement once per row given; the statements commute (different keys)."""
        for write, rows in batches.items():
            c.executemany(self.sql(write.template), rows)

    def long_running(self) -> AbstractContextManager[None]:
        """Statements that may run for long (an audit, a rebuild): PostgreSQL lifts its call
        deadline for them; SQLite has none."""
        return nullcontext()

    def replace_read_models(self, pages: Iterable[Sequence[p.RowChange]]) -> None:
        """Empty the read models and rebuild them from replayed pages, in one transaction."""
        with self.long_running(), self.datastore.transaction(commit=True) as c:
            for table in READ_MODEL_TABLES:
                self.exec(c, f"DELETE FROM {{s}}{table}")
            for changes in pages:
                self.apply_changes_in_bulk(c, changes)

    def audit_store(self) -> Any:
        """The application's `AuditStore` port over this store (infrastructure/audit_store.py)."""
        from session_awareness.infrastructure.audit_store import audit_store  # noqa: PLC0415 -- it imports this module

        return audit_store(self)

    def read_model_rows(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every read-model row, table by table, in key order and in backend-neutral values
        (ids as hex, JSON as text): what an audit compares."""
        with self.long_running(), self.datastore.transaction(commit=False) as c:
            out = {}
            for table, order in READ_MODEL_TABLES.items():
                c.execute(self.sql(f"SELECT * FROM {{s}}{table} ORDER BY {order}"))
                out[table] = [tuple(map(_neutral, dict(row).values())) for row in c.fetchall()]
            return out

    def notice_opened(self, c: Any, watch_id: UUID) -> None:
        """Hook: a notice opened in this transaction (PostgreSQL publishes a wake)."""

    # -- queries (the ReadModel port) ------------------------------------------------------

    def sessions_with_key(self, key: str, *, include_deleted: bool = False) -> list[SessionRow]:
        live = "" if include_deleted else " AND r.deleted = 0"
        rows = self.fetch(_SESSION + "r.session_key = ?" + live + " ORDER BY r.agent_id", (key,))
        return [_session(r) for r in rows]

    def session(self, session_id: UUID) -> SessionRow | None:
        rows = self.fetch(_SESSION + "r.session_id = ?", (self.param_id(session_id),))
        return _session(rows[0]) if rows else None

    def session_state(
        self, session_id: UUID, *, after: int | None, limit: int
    ) -> SessionState | None:
        """Head, pruned watermark, earliest retained sequence and the page in ONE statement:
        one snapshot without an explicit transaction (one round trip on PostgreSQL, not five),
        and the page is bounded by the head read in that same snapshot (R-S1)."""
        sid = self.param_id(session_id)
        since = _NO_PAGE if after is None else after
        limit = max(limit, 1)
        if self.dialect.stacked_state:
            rows = self.fetch_tuples(_STATE_STACKED, (sid, sid, sid, since, sid, limit))
            if rows and rows[0][0] is None:  # the head row first, as UNION ALL yields them
                page = rows[1:]
            else:  # any other order (SQL promises none); no head row: unknown or deleted
                heads = [row for row in rows if row[0] is None]
                if not heads:
                    return None
                rows = [heads[0], *(row for row in rows if row[0] is not None)]
                page = rows[1:]
            page.sort(key=_first)  # one linear pass when already in order, as it comes
        else:
            rows = self.fetch_tuples(_STATE_JOINED, (sid, since, sid, limit))
            if not rows:
                return None
            page = rows if rows[0][0] is not None else []
        first = rows[0]
        head = Head(first[8], first[9])
        if after is None:
            return SessionState(head, [], None)
        return SessionState(head, [row[:8] for row in page], first[10])

    def one_of(self, column: str, values: Collection[str]) -> tuple[str, Any]:
        """`column` is one of `values`, as ONE bound parameter however many values there are
        (PostgreSQL refuses more than 65,535 parameters, SQLite more than 32,766)."""
        if self.dialect.arrays:
            return f"{column} = ANY(CAST(? AS text[]))", list(values)
        return f"{column} IN (SELECT value FROM json_each(?))", json.dumps(list(values))

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
    ) -> list[SessionRow]:
        where, params = ["r.deleted = 0"], []
        if archived is not None:
            where.append("COALESCE(a.archived, 0) = ?")
            params.append(int(archived))
        for column, values in (("r.session_key", keys), ("r.kind", kinds)):
            if values is not None:
                clause, param = self.one_of(column, values)
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
        if limit is not None and not search:
            sql += " LIMIT ?"
            params.append(limit)
        rows = [_session(r) for r in self.fetch(sql, params)]
        if search:
            # Case folded in Python, the same on both backends and beyond ASCII (SQLite's
            # lower() folds ASCII only, and PostgreSQL's follows the database's locale).
            term = search.casefold()
            rows = [
                row for row in rows
                if term in row.key.casefold() or term in (row.label or "").casefold()
            ][:limit]  # fmt: skip
        return rows

    def children_of(self, parent_keys: Collection[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {key: [] for key in parent_keys}
        if out:
            clause, param = self.one_of("parent_key", list(out))
            rows = self.fetch(
                "SELECT parent_key, session_key FROM {s}session_registry WHERE deleted = 0 AND "
                + clause
                + " ORDER BY session_key",
                [param],
            )
            for row in rows:
                out[row["parent_key"]].append(row["session_key"])
        return out

    def read_models_outdated(self) -> bool:
        """Whether a session's registry row lacks the rows this version keeps beside it:
        the read models were written by an earlier version and need a rebuild."""
        return bool(self.fetch(_OUTDATED))

    def cursors_of_watcher(self, watcher_key: str, *, pending_only: bool) -> list[CursorRow]:
        pending = " AND notified > acknowledged" if pending_only else ""
        rows = self.fetch(
            _CURSOR + "watcher_key = ?" + pending + " ORDER BY notice_order, target_key",
            (watcher_key,),
        )
        return [_cursor(r) for r in rows]

    def cursors_on_target(self, target_id: UUID) -> list[CursorRow]:
        rows = self.fetch(
            _CURSOR + "target_id = ? ORDER BY watcher_key", (self.param_id(target_id),)
        )
        return [_cursor(r) for r in rows]

    def cursors_updated_before(self, before: int) -> list[CursorRow]:
        return [
            _cursor(r)
            for r in self.fetch(_CURSOR + "updated_at < ? ORDER BY updated_at", (before,))
        ]

    def watchers_with_pending(self) -> list[str]:
        rows = self.fetch(
            "SELECT DISTINCT watcher_key FROM {s}session_watch_cursors "
            "WHERE notified > acknowledged ORDER BY watcher_key"
        )
        return [row["watcher_key"] for row in rows]

    def upstream_links(self, *, watched_only: bool = False) -> list[UpstreamLinkRow]:
        sql = _LINK + (_WATCHED if watched_only else "") + " ORDER BY r.agent_id, r.session_key"
        return [_link(r) for r in self.fetch(sql)]

    def upstream_link(self, session_id: UUID) -> UpstreamLinkRow | None:
        rows = self.fetch(_LINK + " AND l.session_id = ?", (self.param_id(session_id),))
        return _link(rows[0]) if rows else None

    def newest_recorded(self, *, before: int) -> int | None:
        rows = self.fetch_tuples(
            "SELECT MAX(t) FROM (SELECT MAX(recorded_at) AS t FROM {s}session_state_events "
            "WHERE recorded_at < ? UNION ALL SELECT MAX(updated_at) FROM "
            "{s}session_watch_cursors WHERE updated_at < ?) newest",
            (before, before),
        )
        return None if not rows or rows[0][0] is None else int(rows[0][0])

    def prune_plan(self, *, recorded_before: int, keep_rows: int) -> list[PrunePlan]:
        rows = self.fetch(_PRUNE_PLAN, (keep_rows, recorded_before))
        return [PrunePlan(_uuid(r["session_id"]), r["watermark"], r["row_count"]) for r in rows]


def _wakes(change: p.RowChange, quiet: Collection[UUID]) -> bool:
    """Whether the change opens a notice that publishes a wake: not on a `quiet` cursor."""
    return (
        type(change) is p.CursorMoved
        and change.notice_order is not None
        and change.watch_id not in quiet
    )


def _uuid(value: Any) -> UUID:
    return value if isinstance(value, UUID) else UUID(value)


def _neutral(value: Any) -> Any:
    return value.hex if isinstance(value, UUID) else value


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


#: `json.dumps(…, sort_keys=True, separators=(",", ":"))`, without building an encoder per call.
_PAYLOAD_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def _dump(payload: dict[str, Any] | None) -> str | None:
    return None if payload is None else _PAYLOAD_JSON.encode(payload)


# -- the statements the row changes become --------------------------------------------------

Row = tuple[Any, ...]


#: Row changes from which a save's inline projection is written in bulk.
BULK_INLINE = 16


@dataclass(frozen=True, eq=False, slots=True)
class Write:
    """One read-model statement: the table it writes (only rows of the key it is given),
    its SQL, and how two consecutive writes of it to one key fold into one (None: they
    do not; both run)."""

    table: str
    template: str
    fold: Callable[[Row, Row], Row] | None = None
    #: A plain `INSERT … (columns) VALUES (one ? per column)`: its rows may be copied in.
    appends: bool = False
    #: The same write for many keys at once, with one array parameter per column of the
    #: template's parameters, in their order (`unnest`; PostgreSQL's path for large saves).
    unnest: str | None = None

    def copy_statement(self) -> str:
        """`COPY table (columns) FROM STDIN`, for a write that `appends`."""
        insert, _, _ = self.template.partition(" VALUES ")
        return insert.replace("INSERT INTO ", "COPY ", 1) + " FROM STDIN"


def _greatest_first(old: Row, new: Row) -> Row:
    """`SET col = GREATEST(col, ?)` twice is once with the greater value."""
    return (max(old[0], new[0]), *new[1:])


def _last(old: Row, new: Row) -> Row:
    """A value set twice is set once, to the last value."""
    return new


def _moved(old: Row, new: Row) -> Row:
    """A cursor's positions: the last ones; its notice order: the last one set."""
    return new if new[3] is not None else (*new[:3], old[3], *new[4:])


_OPEN = Write(
    "session_registry",
    "INSERT INTO {s}session_registry (session_id, agent_id, session_key, kind, label, "
    "parent_key, opened_at, updated_at, deleted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)",
)
_HEAD = Write(
    "session_state_heads",
    "INSERT INTO {s}session_state_heads VALUES (?, 0, 0) ON CONFLICT DO NOTHING",
)
_REOPEN = Write(
    "session_registry",
    "UPDATE {s}session_registry SET kind = ?, label = ?, parent_key = ?, opened_at = ?, "
    "updated_at = ?, deleted = 0 WHERE session_id = ?",
)
_DESCRIBE = Write(
    "session_registry",
    "UPDATE {s}session_registry SET kind = ?, label = ?, parent_key = ? WHERE session_id = ?",
)
_TOUCH = Write(
    "session_registry",
    "UPDATE {s}session_registry SET updated_at = {greatest}(updated_at, ?) WHERE session_id = ?",
    _greatest_first,
)
_PARENT = Write(
    "session_registry", "UPDATE {s}session_registry SET parent_key = ? WHERE session_id = ?"
)
_SIGNAL = Write(
    "session_state_events",
    "INSERT INTO {s}session_state_events (session_id, sequence, position, kind, actor_type, "
    "actor_id, run_id, occurred_at, summary, payload, recorded_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    appends=True,
)
_HEAD_VERSION = Write(
    "session_state_heads",
    "UPDATE {s}session_state_heads SET state_version = {greatest}(state_version, ?) "
    "WHERE session_id = ?",
    _greatest_first,
)
_DROP_HISTORY = Write(
    "session_state_events",
    "DELETE FROM {s}session_state_events WHERE session_id = ? AND sequence <= ?",
)
_HEAD_WATERMARK = Write(
    "session_state_heads",
    "UPDATE {s}session_state_heads SET pruned_watermark = {greatest}(pruned_watermark, ?) "
    "WHERE session_id = ?",
    _greatest_first,
)
_DELETE = Write(
    "session_registry",
    "UPDATE {s}session_registry SET deleted = 1, updated_at = ? WHERE session_id = ?",
)
_CURSOR_START = Write(
    "session_watch_cursors",
    "INSERT INTO {s}session_watch_cursors (watch_id, watcher_key, target_id, target_key, "
    "acknowledged, notified, material, notice_order, updated_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?) ON CONFLICT (watch_id) DO UPDATE SET "
    "acknowledged = excluded.acknowledged, notified = excluded.notified, "
    "material = excluded.material, notice_order = NULL, updated_at = excluded.updated_at",
)
_CURSOR_MOVE = Write(
    "session_watch_cursors",
    "UPDATE {s}session_watch_cursors SET acknowledged = ?, notified = ?, material = ?, "
    "notice_order = COALESCE(?, notice_order), updated_at = ? WHERE watch_id = ?",
    _moved,
    unnest=(
        "UPDATE {s}session_watch_cursors AS c SET acknowledged = v.a, notified = v.n, "
        "material = v.m, notice_order = COALESCE(v.o, c.notice_order), updated_at = v.u "
        "FROM unnest(?::{int}[], ?::{int}[], ?::{int}[], ?::{int}[], ?::{int}[], ?::{id}[]) "
        "AS v(a, n, m, o, u, id) WHERE c.watch_id = v.id"
    ),
)
_CURSOR_REMOVE = Write(
    "session_watch_cursors", "DELETE FROM {s}session_watch_cursors WHERE watch_id = ?"
)
_ACTIVITY_OPEN = Write(
    "session_activity",
    "INSERT INTO {s}session_activity (session_id, pinned, archived) VALUES (?, 0, 0) "
    "ON CONFLICT DO NOTHING",
)
_ACTIVITY_RESET = Write(
    "session_activity",
    "UPDATE {s}session_activity SET channel = NULL, run_id = NULL, run_status = NULL, "
    "run_started_at = NULL, run_ended_at = NULL, pinned = 0, archived = 0 WHERE session_id = ?",
)
_MARKS = {
    mark: Write(
        "session_activity",
        f"UPDATE {{s}}session_activity SET {mark} = ? WHERE session_id = ?",
        _last,
    )
    for mark in ("pinned", "archived")
}
_CHANNEL = Write(
    "session_activity",
    "UPDATE {s}session_activity SET channel = ? WHERE session_id = ?",
    _last,
)
_RUN_START = Write(
    "session_activity",
    "UPDATE {s}session_activity SET run_id = ?, run_status = 'running', run_started_at = ?, "
    "run_ended_at = NULL WHERE session_id = ?",
)
#: A terminal report ends the run it names; one for another run than a running one is
#: ignored. `SET` expressions read the row as it was, so the start time survives only when
#: the report is for the run that started.
_RUN_END = Write(
    "session_activity",
    "UPDATE {s}session_activity SET run_started_at = CASE WHEN run_id = ? "
    "THEN run_started_at END, run_id = ?, run_status = ?, run_ended_at = ? "
    "WHERE session_id = ? AND (run_status IS NULL OR run_status <> 'running' OR run_id = ?)",
)
_LINK_SET = Write(
    "session_upstream_links",
    "INSERT INTO {s}session_upstream_links (session_id, catalog_id, host_id, thread_id, "
    "upstream_kind, upstream_ref, marker, last_position, generation, linked_at, "
    "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id) DO "
    "UPDATE SET catalog_id = excluded.catalog_id, host_id = excluded.host_id, "
    "thread_id = excluded.thread_id, upstream_kind = excluded.upstream_kind, "
    "upstream_ref = excluded.upstream_ref, marker = excluded.marker, "
    "last_position = excluded.last_position, generation = excluded.generation, "
    "linked_at = excluded.linked_at, updated_at = excluded.updated_at",
)
_LINK_ADVANCE = Write(
    "session_upstream_links",
    "UPDATE {s}session_upstream_links SET marker = ?, "
    "last_position = COALESCE(?, last_position), updated_at = ? WHERE session_id = ?",
)
_LINK_REMOVE = Write(
    "session_upstream_links", "DELETE FROM {s}session_upstream_links WHERE session_id = ?"
)

#: A row change's writes: (statement, the key whose rows it writes, parameters).
Writes = list[tuple[Write, Any, Row]]


def _session_opened(store: ReadModelStore, change: p.SessionOpened) -> Writes:
    sid = store.param_id(change.session_id)
    return [
        (_OPEN, sid, (sid, change.agent_id, change.key, change.kind, change.label,
                      change.parent_key, change.at, change.at)),
        (_HEAD, sid, (sid,)),
        (_ACTIVITY_OPEN, sid, (sid,)),
    ]  # fmt: skip


def _session_reopened(store: ReadModelStore, change: p.SessionReopened) -> Writes:
    sid = store.param_id(change.session_id)
    return [
        (_REOPEN, sid, (change.kind, change.label, change.parent_key, change.at, change.at, sid)),
        (_ACTIVITY_RESET, sid, (sid,)),
    ]


def _mark_set(store: ReadModelStore, change: p.MarkSet) -> Writes:
    sid = store.param_id(change.session_id)
    return [(_MARKS[change.mark], sid, (int(change.value), sid))]


def _channel_seen(store: ReadModelStore, change: p.ChannelSeen) -> Writes:
    sid = store.param_id(change.session_id)
    return [(_CHANNEL, sid, (change.channel, sid))]


def _run_started(store: ReadModelStore, change: p.RunStarted) -> Writes:
    sid = store.param_id(change.session_id)
    return [(_RUN_START, sid, (change.run_id, change.at, sid))]


def _run_ended(store: ReadModelStore, change: p.RunEnded) -> Writes:
    sid, run = store.param_id(change.session_id), change.run_id
    return [(_RUN_END, sid, (run, run, change.status, change.at, sid, run))]


def _session_described(store: ReadModelStore, change: p.SessionDescribed) -> Writes:
    sid = store.param_id(change.session_id)
    return [(_DESCRIBE, sid, (change.kind, change.label, change.parent_key, sid))]


def _session_touched(store: ReadModelStore, change: p.SessionTouched) -> Writes:
    sid = store.param_id(change.session_id)
    return [(_TOUCH, sid, (change.at, sid))]


def _parent_linked(store: ReadModelStore, change: p.ParentLinked) -> Writes:
    sid = store.param_id(change.session_id)
    return [(_PARENT, sid, (change.parent_key, sid))]


def _signal_appended(store: ReadModelStore, change: p.SignalAppended) -> Writes:
    sid = store.param_id(change.session_id)
    return [
        (_SIGNAL, sid, (sid, change.sequence, change.position, change.kind, change.actor_type,
                        change.actor_id, change.run_id, change.occurred_at, change.summary,
                        _dump(change.payload), change.recorded_at)),
        (_HEAD_VERSION, sid, (change.sequence, sid)),
    ]  # fmt: skip


def _history_pruned(store: ReadModelStore, change: p.HistoryPruned) -> Writes:
    sid = store.param_id(change.session_id)
    return [
        (_DROP_HISTORY, sid, (sid, change.watermark)),
        (_HEAD_WATERMARK, sid, (change.watermark, sid)),
    ]


def _session_deleted(store: ReadModelStore, change: p.SessionDeleted) -> Writes:
    sid = store.param_id(change.session_id)
    return [
        (_DROP_HISTORY, sid, (sid, change.watermark)),
        (_HEAD_WATERMARK, sid, (change.watermark, sid)),
        (_DELETE, sid, (change.at, sid)),
    ]


def _cursor_started(store: ReadModelStore, change: p.CursorStarted) -> Writes:
    wid, at = store.param_id(change.watch_id), change.position
    return [
        (_CURSOR_START, wid, (wid, change.watcher_key, store.param_id(change.target_id),
                              change.target_key, at, at, at, change.updated_at)),
    ]  # fmt: skip


def _cursor_moved(store: ReadModelStore, change: p.CursorMoved) -> Writes:
    wid = store.param_id(change.watch_id)
    return [
        (_CURSOR_MOVE, wid, (change.acknowledged, change.notified, change.material,
                             change.notice_order, change.updated_at, wid)),
    ]  # fmt: skip


def _cursor_removed(store: ReadModelStore, change: p.CursorRemoved) -> Writes:
    wid = store.param_id(change.watch_id)
    return [(_CURSOR_REMOVE, wid, (wid,))]


def _link_set(store: ReadModelStore, change: p.UpstreamLinkSet) -> Writes:
    sid = store.param_id(change.session_id)
    return [
        (_LINK_SET, sid, (sid, change.catalog_id, change.host_id, change.thread_id,
                          change.upstream_kind, change.upstream_ref, change.marker,
                          change.position, change.generation, change.at, change.at)),
    ]  # fmt: skip


def _link_advanced(store: ReadModelStore, change: p.UpstreamLinkAdvanced) -> Writes:
    sid = store.param_id(change.session_id)
    return [(_LINK_ADVANCE, sid, (change.marker, change.position, change.at, sid))]


def _link_removed(store: ReadModelStore, change: p.UpstreamLinkRemoved) -> Writes:
    sid = store.param_id(change.session_id)
    return [(_LINK_REMOVE, sid, (sid,))]


#: Each row change's statements; a change without an entry is a bug (KeyError).
_WRITES: dict[type, Callable[[ReadModelStore, Any], Writes]] = {
    p.SessionOpened: _session_opened,
    p.SessionReopened: _session_reopened,
    p.SessionDescribed: _session_described,
    p.SessionTouched: _session_touched,
    p.MarkSet: _mark_set,
    p.ChannelSeen: _channel_seen,
    p.RunStarted: _run_started,
    p.RunEnded: _run_ended,
    p.ParentLinked: _parent_linked,
    p.SignalAppended: _signal_appended,
    p.HistoryPruned: _history_pruned,
    p.SessionDeleted: _session_deleted,
    p.CursorStarted: _cursor_started,
    p.CursorMoved: _cursor_moved,
    p.CursorRemoved: _cursor_removed,
    p.UpstreamLinkSet: _link_set,
    p.UpstreamLinkAdvanced: _link_advanced,
    p.UpstreamLinkRemoved: _link_removed,
}
