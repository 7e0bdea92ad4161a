"""The projection's row changes as read-model statements (ADR 002), written one at a time.

Each row change (`application/projection.py`) becomes a few `Write`s: a statement, the key
whose rows it writes, its parameters. `ReadModelWrites.apply_changes` runs them in order;
`bulk` runs the same writes with the same end state in a few `executemany`s.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from session_awareness.application import projection as p
from session_awareness.domain import material
from session_awareness.infrastructure.readmodel.dialect import Rendered
from session_awareness.infrastructure.readmodel.tables import (
    ACTIVITY,
    CURSORS,
    EVENTS,
    HEADS,
    KEYS,
    LINKS,
    MATERIAL,
    MATERIAL_MOVED,
    REGISTRY,
)

Row = tuple[Any, ...]


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
    #: The key is the template's last parameter.
    unnest: str | None = None
    #: The same write for many keys at once with its rows as ONE JSON parameter, an array of
    #: the rows, each the template's parameters in their order (`jsonb_array_elements`;
    #: PostgreSQL's path for large saves), used instead of `unnest`: for a write whose
    #: rows the driver would otherwise bind as one array per column, value by value (a
    #: drain's 1,000 cursors). Every value a JSON number or string.
    json_rows: str | None = None
    #: The columns it writes, named, when they are a few a key's other writes may not
    #: touch: writes of different lanes commute, so the bulk path may reorder them (None:
    #: the write is ordered against every other write of its key).
    lane: str | None = None
    #: Its rows may run in any order, a key's twice (an insert that does nothing on a key
    #: present): its array form is exact for any batch of them.
    commutes: bool = False
    #: The statement's parameters from a row as the write and its fold keep it (None: the
    #: row is them): a fold may keep what it needs in a form no driver binds.
    params: Callable[[Row], Row] | None = None

    def bound(self, rows: list[Row]) -> list[Row]:
        """The statement's parameters of each row (`params`)."""
        params = self.params
        return rows if params is None else [params(row) for row in rows]

    def copy_statement(self) -> str:
        """`COPY table (columns) FROM STDIN`, for a write that `appends`."""
        insert, _, _ = self.template.partition(" VALUES ")
        return insert.replace("INSERT INTO ", "COPY ", 1) + " FROM STDIN"


class ReadModelWrites(Rendered):
    """Writes row changes through a cursor of the transaction that stores the events."""

    def apply_changes(
        self, c: Any, changes: Iterable[p.RowChange], quiet: Collection[UUID] = ()
    ) -> None:
        """Write row changes one statement at a time, in order: the inline path. A notice
        opened on a cursor in `quiet` (an ambient one, R-W7) publishes no wake."""
        sql, bind = self.sql, self.dialect.bind_id
        for change in changes:
            if type(change) is p.CursorsAcknowledged:
                self.cursors_acknowledged(c, change, quiet)
                continue
            for write, _, row in WRITES[type(change)](bind, change):
                c.execute(sql(write.template), row if write.params is None else write.params(row))
            if wakes(change, quiet):
                self.notice_opened(c, change.watch_id)  # type: ignore[union-attr]

    def cursors_acknowledged(
        self, c: Any, change: p.CursorsAcknowledged, quiet: Collection[UUID] = ()
    ) -> None:
        """A drain's cursors in one statement (its cursors are distinct, so their writes
        commute), then a wake for each notice it reopened on a cursor not in `quiet`."""
        at = change.updated_at
        rows = [(e[2], e[3], e[4], at, e[0]) for e in change.entries]
        if rows:
            self.write_batches(c, {_CURSOR_ACKNOWLEDGE: rows})
        for watch_id in change.reopened():
            if watch_id not in quiet:
                self.notice_opened(c, watch_id)

    def write_batches(self, c: Any, batches: dict[Write, list[Row]]) -> None:
        """Run each statement once per row given; the statements commute (different keys)."""
        for write, rows in batches.items():
            c.executemany(self.sql(write.template), write.bound(rows))

    def write_as_arrays(self, c: Any, batches: dict[Write, list[Row]]) -> None:
        """`write_batches` with a write for many keys in ONE statement where it has an array
        form (`unnest`, or its rows as one JSON text, `json_rows`; PostgreSQL) and that
        form is exact for its rows: one statement instead of one per row for the server to
        run. It is exact when the rows commute or name each key once; a batch that holds a
        key's rows in order (a replay's, where one session's writes that do not fold follow
        one another) goes row by row, since an `UPDATE … FROM` either form would set the
        key from any one of them."""
        sql = self.sql
        for write, given in batches.items():
            rows = write.bound(given)
            if (
                len(rows) < 2
                or not (write.json_rows or write.unnest)
                or not _exact_as_arrays(write, rows)
            ):
                c.executemany(sql(write.template), rows)
            elif write.json_rows is not None:
                c.execute(sql(write.json_rows), [json.dumps(rows, separators=(",", ":"))])
            else:
                c.execute(sql(write.unnest), [list(col) for col in zip(*rows, strict=True)])

    def notice_opened(self, c: Any, watch_id: UUID) -> None:
        """Hook: a notice opened in this transaction (PostgreSQL publishes a wake)."""


def _exact_as_arrays(write: Write, rows: list[Row]) -> bool:
    if write.commutes:
        return True
    return len({row[-1] for row in rows}) == len(rows)  # each key once


def wakes(change: p.RowChange, quiet: Collection[UUID]) -> bool:
    """Whether the change opens a notice that publishes a wake: not on a `quiet` cursor."""
    return (
        type(change) is p.CursorMoved
        and (change.notice_order is not None or change.reopened)
        and change.watch_id not in quiet
    )


def _greatest_first(old: Row, new: Row) -> Row:
    """`SET col = GREATEST(col, ?)` twice is once with the greater value (the rows of one
    key differ only in that value: the other parameter is the key)."""
    return old if old[0] > new[0] else new


def _last(old: Row, new: Row) -> Row:
    """A value set twice is set once, to the last value."""
    return new


def _moved(old: Row, new: Row) -> Row:
    """A cursor's positions: the last ones; its notice order: the last one set."""
    return new if new[3] is not None else (*new[:3], old[3], *new[4:])


def _material_folded(old: Row, new: Row) -> Row:
    """Two notify-eligible events on one session as one write: the domain's `moved` of the
    first write's marks by the second event. A mark the first left to the row (None) stays
    the row's when the second event's actor caused the first (the same actor)."""
    e1, at1, a1, other1 = _material_of(old)
    e2, at2, a2, _ = _material_of(new)
    _, other2 = material.moved((e1, a1, at1), other1, e2, a2, at2)
    return material_params(sid=new[-1], sequence=e2, at=at2, actor=a2, other=other2)


def _runs_ended(old: Row, new: Row) -> Row:
    """Terminal reports r1 … rn of one session as one write. Once a report applies, the
    run is no longer running, so every later one applies too: the row ends as rn's report
    sets it, if any applies at all. One applies when the row is not running, or when it
    runs one of the runs reported (`ids`, in order). The start time survives only when the
    row's run is rn and every report that applied named it: from the first report on when
    the row was not running (all the reports name rn: `same`), from the first report of
    the running run on when it was (the reports from the first of rn on all name rn:
    `tail`)."""
    run, ids, same, tail = new[0], old[4], old[5], old[6]
    if run != old[0]:
        same, tail = False, run not in ids
    ids[run] = None  # the fold's own dict, built for this row (`_run_ended`)
    return (run, new[1], new[2], new[3], ids, same, tail)


def _runs_ended_params(row: Row) -> Row:
    """`_RUN_END`'s parameters from `_runs_ended`'s row."""
    run, status, at, sid, ids, same, tail = row
    return (run, tail, same, run, status, at, sid, json.dumps(list(ids)))


def material_params(
    *, sid: Any, sequence: int, at: int, actor: str | None, other: tuple[Any, Any] = (None, None)
) -> Row:
    """`MATERIAL_MOVED`'s parameters; `other` (sequence, time) None: the newest by another
    actor follows from the row."""
    o, o_at = other
    return (o, actor, o, o_at, actor, sequence, at, actor, sid)


def _material_of(params: Row) -> tuple[Any, Any, Any, tuple[Any, Any]]:
    """(sequence, at, actor, (other, other_at)) back from `material_params`' row."""
    return params[5], params[6], params[7], (params[0], params[3])


_OPEN = Write(REGISTRY.name, REGISTRY.insert())
_HEAD = Write(HEADS.name, HEADS.insert() + " ON CONFLICT DO NOTHING")
_REOPEN = Write(
    REGISTRY.name,
    "UPDATE {s}session_registry SET kind = ?, label = ?, parent_key = ?, opened_at = ?, "
    "updated_at = ?, deleted = 0 WHERE session_id = ?",
)
_DESCRIBE = Write(
    REGISTRY.name,
    "UPDATE {s}session_registry SET kind = ?, label = ?, parent_key = ? WHERE session_id = ?",
)
_TOUCH = Write(
    REGISTRY.name,
    "UPDATE {s}session_registry SET updated_at = {greatest}(updated_at, ?) WHERE session_id = ?",
    _greatest_first,
)
_PARENT = Write(REGISTRY.name, "UPDATE {s}session_registry SET parent_key = ? WHERE session_id = ?")
_SIGNAL = Write(EVENTS.name, EVENTS.insert(), appends=True)
_HEAD_VERSION = Write(
    HEADS.name,
    "UPDATE {s}session_state_heads SET state_version = {greatest}(state_version, ?) "
    "WHERE session_id = ?",
    _greatest_first,
)
_KEY = Write(
    KEYS.name,
    KEYS.insert() + " ON CONFLICT DO NOTHING",
    # Many keys (a replay's page, a batch of records) in one statement: `DO NOTHING` takes
    # a pair given twice, as the rows one at a time would.
    unnest=(
        "INSERT INTO {s}session_dedupe_keys (session_id, dedupe_key) "
        "SELECT * FROM unnest(?::{id}[], ?::{text}[]) ON CONFLICT DO NOTHING"
    ),
    commutes=True,
)
_DROP_HISTORY = Write(
    EVENTS.name, "DELETE FROM {s}session_state_events WHERE session_id = ? AND sequence <= ?"
)
_HEAD_WATERMARK = Write(
    HEADS.name,
    "UPDATE {s}session_state_heads SET pruned_watermark = {greatest}(pruned_watermark, ?) "
    "WHERE session_id = ?",
    _greatest_first,
)
_DELETE = Write(
    REGISTRY.name,
    "UPDATE {s}session_registry SET deleted = 1, updated_at = ? WHERE session_id = ?",
)
#: A cursor (re)started: its positions and time set, its notice order cleared.
_CURSOR_START = Write(
    CURSORS.name,
    CURSORS.upsert(("acknowledged", "notified", "material", "notice_order", "updated_at")),
)
_CURSOR_MOVE = Write(
    CURSORS.name,
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
#: A drain's (or a sweep's) cursors, each given by its id's hex as the drain stores it (ADR
#: 024): one statement for them all, built without an object per pair. On PostgreSQL the
#: rows go as one JSON text: bound as five arrays, psycopg quoted each of their 5,000 values
#: one by one, a third of the drain's CPU time there (docs/performance.md).
_CURSOR_ACKNOWLEDGE = Write(
    CURSORS.name,
    "UPDATE {s}session_watch_cursors SET acknowledged = ?, notified = ?, material = ?, "
    "updated_at = ? WHERE watch_id = CAST(? AS {id})",
    json_rows=(
        "UPDATE {s}session_watch_cursors AS c SET acknowledged = CAST(v->>0 AS {int}), "
        "notified = CAST(v->>1 AS {int}), material = CAST(v->>2 AS {int}), "
        "updated_at = CAST(v->>3 AS {int}) "
        "FROM jsonb_array_elements(CAST(? AS jsonb)) AS v WHERE c.watch_id = CAST(v->>4 AS {id})"
    ),
)
#: A notify-eligible event moves the target's two material marks (`tables.MATERIAL_MOVED`).
_MATERIAL = Write(MATERIAL.name, MATERIAL_MOVED, _material_folded)
_MATERIAL_OPEN = Write(MATERIAL.name, MATERIAL.insert(("session_id",)) + " ON CONFLICT DO NOTHING")
_CURSOR_REMOVE = Write(CURSORS.name, "DELETE FROM {s}session_watch_cursors WHERE watch_id = ?")
_ACTIVITY_OPEN = Write(
    ACTIVITY.name,
    ACTIVITY.insert(("session_id", "pinned", "archived")) + " ON CONFLICT DO NOTHING",
)
_ACTIVITY_RESET = Write(
    ACTIVITY.name,
    "UPDATE {s}session_activity SET channel = NULL, run_id = NULL, run_status = NULL, "
    "run_started_at = NULL, run_ended_at = NULL, pinned = 0, archived = 0 WHERE session_id = ?",
)
_MARKS = {
    mark: Write(
        ACTIVITY.name,
        f"UPDATE {{s}}session_activity SET {mark} = ? WHERE session_id = ?",
        _last,
        lane=mark,
    )
    for mark in ("pinned", "archived")
}
_CHANNEL = Write(
    ACTIVITY.name,
    "UPDATE {s}session_activity SET channel = ? WHERE session_id = ?",
    _last,
    lane="channel",
)
_RUN_START = Write(
    ACTIVITY.name,
    "UPDATE {s}session_activity SET run_id = ?, run_status = 'running', run_started_at = ?, "
    "run_ended_at = NULL WHERE session_id = ?",
    lane="run",
)
#: A terminal report ends the run it names; one for another run than a running one is
#: ignored. `SET` expressions read the row as it was, so the start time survives only when
#: the report is for the run that started. A key's consecutive reports fold into one
#: statement of the same effect (`_runs_ended`); a single report is the case of one.
_RUN_END = Write(
    ACTIVITY.name,
    "UPDATE {s}session_activity SET run_started_at = CASE WHEN run_id = ? AND "
    "(CASE WHEN run_status = 'running' THEN ? ELSE ? END) THEN run_started_at END, "
    "run_id = ?, run_status = ?, run_ended_at = ? WHERE session_id = ? AND "
    "(run_status IS NULL OR run_status <> 'running' OR run_id IN ({texts}))",
    _runs_ended,
    lane="run",
    params=_runs_ended_params,
)
_LINK_SET = Write(LINKS.name, LINKS.upsert())
_LINK_ADVANCE = Write(
    LINKS.name,
    "UPDATE {s}session_upstream_links SET marker = ?, "
    "last_position = COALESCE(?, last_position), updated_at = ? WHERE session_id = ?",
)
_LINK_REMOVE = Write(LINKS.name, "DELETE FROM {s}session_upstream_links WHERE session_id = ?")

#: A row change's writes: (statement, the key whose rows it writes, parameters).
Writes = list[tuple[Write, Any, Row]]
Bind = Callable[[UUID], Any]


def _session_opened(bind: Bind, change: p.SessionOpened) -> Writes:
    sid = bind(change.session_id)
    return [
        (_OPEN, sid, (sid, change.agent_id, change.key, change.kind, change.label,
                      change.parent_key, change.at, change.at, 0)),
        (_HEAD, sid, (sid, 0, 0)),
        (_ACTIVITY_OPEN, sid, (sid, 0, 0)),
        (_MATERIAL_OPEN, sid, (sid,)),
    ]  # fmt: skip


def _session_reopened(bind: Bind, change: p.SessionReopened) -> Writes:
    sid = bind(change.session_id)
    return [
        (_REOPEN, sid, (change.kind, change.label, change.parent_key, change.at, change.at, sid)),
        (_ACTIVITY_RESET, sid, (sid,)),
    ]


def _mark_set(bind: Bind, change: p.MarkSet) -> Writes:
    sid = bind(change.session_id)
    return [(_MARKS[change.mark], sid, (int(change.value), sid))]


def _channel_seen(bind: Bind, change: p.ChannelSeen) -> Writes:
    sid = bind(change.session_id)
    return [(_CHANNEL, sid, (change.channel, sid))]


def _run_started(bind: Bind, change: p.RunStarted) -> Writes:
    sid = bind(change.session_id)
    return [(_RUN_START, sid, (change.run_id, change.at, sid))]


def _run_ended(bind: Bind, change: p.RunEnded) -> Writes:
    sid, run = bind(change.session_id), change.run_id
    return [(_RUN_END, sid, (run, change.status, change.at, sid, {run: None}, True, True))]


def _session_described(bind: Bind, change: p.SessionDescribed) -> Writes:
    sid = bind(change.session_id)
    return [(_DESCRIBE, sid, (change.kind, change.label, change.parent_key, sid))]


def _session_touched(bind: Bind, change: p.SessionTouched) -> Writes:
    sid = bind(change.session_id)
    return [(_TOUCH, sid, (change.at, sid))]


def _parent_linked(bind: Bind, change: p.ParentLinked) -> Writes:
    sid = bind(change.session_id)
    return [(_PARENT, sid, (change.parent_key, sid))]


def _signal_appended(bind: Bind, change: p.SignalAppended) -> Writes:
    sid = bind(change.session_id)
    return [
        (_SIGNAL, sid, (sid, change.sequence, change.position, change.kind, change.actor_type,
                        change.actor_id, change.run_id, change.occurred_at, change.summary,
                        _dump(change.payload), change.recorded_at)),
        (_HEAD_VERSION, sid, (change.sequence, sid)),
        (_TOUCH, sid, (change.recorded_at, sid)),
    ]  # fmt: skip


def _signal_unretained(bind: Bind, change: p.SignalUnretained) -> Writes:
    """`_signal_appended`'s writes but its row's: a later deletion would remove it."""
    sid = bind(change.session_id)
    return [
        (_HEAD_VERSION, sid, (change.sequence, sid)),
        (_TOUCH, sid, (change.recorded_at, sid)),
    ]


def _key_recorded(bind: Bind, change: p.KeyRecorded) -> Writes:
    sid = bind(change.session_id)
    return [(_KEY, sid, (sid, change.key))]


def _material_moved(bind: Bind, change: p.MaterialMoved) -> Writes:
    sid = bind(change.session_id)
    params = material_params(sid=sid, sequence=change.sequence, at=change.at, actor=change.actor_id)
    return [(_MATERIAL, sid, params)]


def _history_pruned(bind: Bind, change: p.HistoryPruned) -> Writes:
    sid = bind(change.session_id)
    return [
        (_DROP_HISTORY, sid, (sid, change.watermark)),
        (_HEAD_WATERMARK, sid, (change.watermark, sid)),
    ]


def _session_deleted(bind: Bind, change: p.SessionDeleted) -> Writes:
    sid = bind(change.session_id)
    return [
        (_DROP_HISTORY, sid, (sid, change.watermark)),
        (_HEAD_WATERMARK, sid, (change.watermark, sid)),
        (_DELETE, sid, (change.at, sid)),
    ]


def _cursor_started(bind: Bind, change: p.CursorStarted) -> Writes:
    wid, at = bind(change.watch_id), change.position
    return [
        (_CURSOR_START, wid, (wid, change.watcher_key, bind(change.target_id),
                              change.target_key, at, at, at, None, change.updated_at)),
    ]  # fmt: skip


def _cursor_moved(bind: Bind, change: p.CursorMoved) -> Writes:
    wid = bind(change.watch_id)
    return [
        (_CURSOR_MOVE, wid, (change.acknowledged, change.notified, change.material,
                             change.notice_order, change.updated_at, wid)),
    ]  # fmt: skip


def _cursors_acknowledged(bind: Bind, change: p.CursorsAcknowledged) -> Writes:
    """Each cursor's move as a key of its own, so that the bulk path (a rebuild) orders it
    among the cursor's other writes; a save writes them in one statement instead
    (`ReadModelWrites.cursors_acknowledged`)."""
    at, writes = change.updated_at, []
    for e in change.entries:
        wid = bind(UUID(int=int(e[0], 16)))
        writes.append((_CURSOR_MOVE, wid, (e[2], e[3], e[4], None, at, wid)))
    return writes


def _cursor_removed(bind: Bind, change: p.CursorRemoved) -> Writes:
    wid = bind(change.watch_id)
    return [(_CURSOR_REMOVE, wid, (wid,))]


def _link_set(bind: Bind, change: p.UpstreamLinkSet) -> Writes:
    sid = bind(change.session_id)
    return [
        (_LINK_SET, sid, (sid, change.catalog_id, change.host_id, change.thread_id,
                          change.upstream_kind, change.upstream_ref, change.marker,
                          change.position, change.generation, change.at, change.at)),
    ]  # fmt: skip


def _link_advanced(bind: Bind, change: p.UpstreamLinkAdvanced) -> Writes:
    sid = bind(change.session_id)
    return [(_LINK_ADVANCE, sid, (change.marker, change.position, change.at, sid))]


def _link_removed(bind: Bind, change: p.UpstreamLinkRemoved) -> Writes:
    sid = bind(change.session_id)
    return [(_LINK_REMOVE, sid, (sid,))]


#: Each row change's statements; a change without an entry is a bug (KeyError).
WRITES: dict[type, Callable[[Bind, Any], Writes]] = {
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
    p.SignalUnretained: _signal_unretained,
    p.KeyRecorded: _key_recorded,
    p.MaterialMoved: _material_moved,
    p.HistoryPruned: _history_pruned,
    p.SessionDeleted: _session_deleted,
    p.CursorStarted: _cursor_started,
    p.CursorMoved: _cursor_moved,
    p.CursorsAcknowledged: _cursors_acknowledged,
    p.CursorRemoved: _cursor_removed,
    p.UpstreamLinkSet: _link_set,
    p.UpstreamLinkAdvanced: _link_advanced,
    p.UpstreamLinkRemoved: _link_removed,
}

#: `json.dumps(…, sort_keys=True, separators=(",", ":"))`, without building an encoder per call.
_PAYLOAD_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


@functools.lru_cache(maxsize=1024)
def _text_payload(items: tuple[tuple[str, str], ...]) -> str:
    """The JSON of a payload whose values are all text, kept for the next one like it (a
    replay meets the same few channels and outcomes over and over; an encoding costs
    several times a look-up)."""
    return _PAYLOAD_JSON.encode(dict(items))


def _dump(payload: dict[str, Any] | None) -> str | None:
    """The payload's JSON text, keys sorted. Only payloads whose values are all text are
    kept (`_text_payload`), so a hit is the same text: an integer equal to `True` never
    answers for it."""
    if payload is None:
        return None
    items = tuple(payload.items())
    if all(type(value) is str for _, value in items):
        return _text_payload(items)
    return _PAYLOAD_JSON.encode(payload)
