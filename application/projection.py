"""The one projection: a pure function from recorded domain events to read-model row changes.

It runs inline, in the transaction that stores the events (ADR 002), and again over the
whole event store to rebuild the read models for an audit (R-R2). Each event carries the
values its rows need, so the projection never reads the read models it writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import singledispatch
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar
from uuid import UUID

from session_awareness.domain.positions import DRAINS_TOPIC, WATCH_TOPIC, notice_open
from session_awareness.domain.session import Session
from session_awareness.domain.signals import RUN_STATUSES, RunOutcome, to_ms

if TYPE_CHECKING:  # imported when the first event of each is projected (`_LATER`)
    from session_awareness.domain.drains import Drains
    from session_awareness.domain.watch import Watch

_T = TypeVar("_T", bound=tuple[Any, ...])


def _same_class_equal(self: tuple[Any, ...], other: object) -> bool:
    return type(other) is type(self) and tuple.__eq__(self, other)


def _same_class_unequal(self: tuple[Any, ...], other: object) -> bool:
    return not _same_class_equal(self, other)


def _row_change(cls: type[_T]) -> type[_T]:
    """A row change is a named tuple: immutable, and built at a third of a frozen
    dataclass's cost (a replay builds millions; ADR 021). Equal only to a row change of
    its own class with equal fields, as the dataclasses it replaces were."""
    cls.__eq__ = _same_class_equal  # type: ignore[method-assign]
    cls.__ne__ = _same_class_unequal  # type: ignore[method-assign,assignment]
    cls.__hash__ = tuple.__hash__  # type: ignore[method-assign]
    return cls


@_row_change
class SessionOpened(NamedTuple):
    """Insert or revive the session's registry row and make sure it has a head."""

    session_id: UUID
    agent_id: str
    key: str
    kind: str
    label: str | None
    parent_key: str | None
    at: int


@_row_change
class SessionReopened(NamedTuple):
    session_id: UUID
    kind: str
    label: str | None
    parent_key: str | None
    at: int


@_row_change
class SessionDescribed(NamedTuple):
    """The host changed an open session's kind, label or (first) parent."""

    session_id: UUID
    kind: str
    label: str | None
    parent_key: str | None


@_row_change
class SessionTouched(NamedTuple):
    """The session changed: its registry row's `updatedAt` moves."""

    session_id: UUID
    at: int


@_row_change
class MarkSet(NamedTuple):
    """The host's pin (`mark` "pinned") or archive (`mark` "archived") mark on a session."""

    session_id: UUID
    mark: str
    value: bool


@_row_change
class ChannelSeen(NamedTuple):
    """A human turn arrived over `channel`: the latest channel the registry shows."""

    session_id: UUID
    channel: str


@_row_change
class RunStarted(NamedTuple):
    """A spawn started run `run_id` on the session (a child) at `at`."""

    session_id: UUID
    run_id: str | None
    at: int


@_row_change
class RunEnded(NamedTuple):
    """Run `run_id` ended with `status` (`completed`, `failed`, `timeout`, `cancelled`); a
    report for a run other than the one running is ignored."""

    session_id: UUID
    run_id: str | None
    status: str
    at: int


@_row_change
class ParentLinked(NamedTuple):
    session_id: UUID
    parent_key: str | None


@_row_change
class SignalAppended(NamedTuple):
    """A retained `changesSince` row, the head moving to its sequence, and the session's
    `updatedAt` moving to `recorded_at` (what a `SessionTouched` would write: one change
    instead of two for every signal, the most frequent event of a replay)."""

    session_id: UUID
    position: int  # the event's notification id: global recording order, used by the row cap
    sequence: int
    kind: str
    actor_type: str
    actor_id: str | None
    run_id: str | None
    occurred_at: int
    summary: str
    payload: dict[str, Any] | None
    recorded_at: int


@_row_change
class SignalUnretained(NamedTuple):
    """A signal whose retained row a later event of its session deletes (a prune's or a
    delete's watermark covers its sequence), as only a replay that looked ahead knows: the
    head and `updatedAt` move as for `SignalAppended`, and no row is written, since the
    rebuilt table would end without it anyway (R-R2)."""

    session_id: UUID
    sequence: int
    recorded_at: int


@_row_change
class KeyRecorded(NamedTuple):
    """An idempotency key the session recorded, kept for good (R-L5); the empty key when
    the session is opened (its index exists)."""

    session_id: UUID
    key: str


@_row_change
class MaterialMoved(NamedTuple):
    """A notify-eligible event: the session's newest material, from which every cursor on
    it derives its M (ADR 023)."""

    session_id: UUID
    sequence: int
    actor_id: str | None
    at: int


@_row_change
class HistoryPruned(NamedTuple):
    """Retained rows up to `watermark` go; the pruned watermark rises to it (R-R1, R-S3)."""

    session_id: UUID
    watermark: int


@_row_change
class SessionDeleted(NamedTuple):
    """The session is gone from queries; its rows go, its head stays (R-L4, R-W6)."""

    session_id: UUID
    watermark: int
    at: int


@_row_change
class CursorStarted(NamedTuple):
    watch_id: UUID
    watcher_key: str
    target_id: UUID
    target_key: str
    position: int
    updated_at: int


@_row_change
class CursorMoved(NamedTuple):
    """New positions; `notice_order` is set when a notice opens (the opening event's id).
    A notice a drain reopened keeps its place (`reopened`, ADR 024): the drain took every
    pending notice of its watcher, so the reopened ones keep their order among themselves
    and come before any opened later, as when each reopening was an event of its own."""

    watch_id: UUID
    acknowledged: int
    notified: int
    material: int
    notice_order: int | None
    updated_at: int
    reopened: bool = False


@_row_change
class CursorsAcknowledged(NamedTuple):
    """A drain's acknowledgements, or a sweep's re-deliveries, as the watcher's `Drains`
    event stores them (ADR 024, ADR 034), one change for all of its pairs: each entry is a
    cursor's id (hex), the `Watch` version the drain read and the positions it left
    (`Acknowledgement.stored`). Each cursor moves as a stored `Acknowledged` moved it, at
    `updated_at`; a notice a drain reopened keeps its place and wakes its watcher
    (`reopens`; a re-delivery never does). The save is refused if an event of one of the
    cursors past the version read was stored before `position` (the drain's own)."""

    entries: tuple[tuple[Any, ...], ...]
    updated_at: int
    position: int
    reopens: bool = True

    def reopened(self) -> list[UUID]:
        """The cursors whose notice a drain reopened (N > L after it, R-N3)."""
        if not self.reopens:
            return []
        return [UUID(int=int(e[0], 16)) for e in self.entries if notice_open(e[2], e[3])]


@_row_change
class CursorRemoved(NamedTuple):
    watch_id: UUID


@_row_change
class UpstreamLinkSet(NamedTuple):
    """An adopted session's upstream link row, written whole (R-U1)."""

    session_id: UUID
    catalog_id: str
    host_id: str
    thread_id: str
    upstream_kind: str
    upstream_ref: str
    marker: str | None
    position: str | None
    generation: int
    at: int


@_row_change
class UpstreamLinkAdvanced(NamedTuple):
    """The link's scan marker moved; a position, when given, replaces the last one (R-U3)."""

    session_id: UUID
    marker: str | None
    position: str | None
    at: int


@_row_change
class UpstreamLinkRemoved(NamedTuple):
    session_id: UUID


RowChange = (
    SessionOpened
    | SessionReopened
    | SessionDescribed
    | SessionTouched
    | MarkSet
    | ChannelSeen
    | RunStarted
    | RunEnded
    | ParentLinked
    | SignalAppended
    | SignalUnretained
    | KeyRecorded
    | MaterialMoved
    | HistoryPruned
    | SessionDeleted
    | CursorStarted
    | CursorMoved
    | CursorsAcknowledged
    | CursorRemoved
    | UpstreamLinkSet
    | UpstreamLinkAdvanced
    | UpstreamLinkRemoved
)


def project(recorded: Iterable[tuple[int, Any]]) -> list[RowChange]:
    """The row changes of `(notification_id, domain_event)` pairs, in recording order."""
    changes: list[RowChange] = []
    by_class = _BY_CLASS
    for position, event in recorded:
        rows = by_class.get(type(event))
        if rows is None:  # `_rows`' own choice for the class, looked up once
            rows = by_class[type(event)] = _row_function(type(event))
        changes.extend(rows(event, position))
    return changes


def _row_function(cls: type) -> Callable[[Any, int], list[RowChange]]:
    """`_rows`' choice for an event class, the rows of its aggregate's events registered
    first if they are registered later (`_LATER`)."""
    aggregate = str(getattr(cls, "TOPIC", "")).partition(".")[0]
    register = _LATER.get(aggregate)
    if register is not None:
        register()
        _LATER.pop(aggregate, None)  # after: a thread that finds it gone finds them registered
    return _rows.dispatch(cls)


#: Each event class's row function: `singledispatch` resolves it; calling through its
#: wrapper costs a weak-dictionary lookup per event (a replay projects millions). Each
#: registration names its class: read from the annotation, `register` would evaluate the
#: module's string annotations (`typing.get_type_hints`) at import, about 1 ms of every
#: process that records (issue 39).
_BY_CLASS: dict[type, Callable[[Any, int], list[RowChange]]] = {}


@singledispatch
def _rows(event: Any, position: int) -> list[RowChange]:
    """Events without rows (watcher index changes, resets) only touch their session."""
    if isinstance(event, Session.Event):
        return [SessionTouched(event.originator_id, to_ms(event.timestamp))]
    return []


@_rows.register(Session.Opened)
def _(event: Session.Opened, position: int) -> list[RowChange]:
    return [
        SessionOpened(
            event.originator_id,
            event.agent_id,
            event.key,
            event.kind,
            event.label,
            event.parent_key,
            to_ms(event.timestamp),
        ),
        KeyRecorded(event.originator_id, ""),
    ]


@_rows.register(Session.Reopened)
def _(event: Session.Reopened, position: int) -> list[RowChange]:
    at = to_ms(event.timestamp)
    return [SessionReopened(event.originator_id, event.kind, event.label, event.parent_key, at)]


@_rows.register(Session.Described)
def _(event: Session.Described, position: int) -> list[RowChange]:
    return [
        SessionDescribed(event.originator_id, event.kind, event.label, event.parent_key),
        SessionTouched(event.originator_id, to_ms(event.timestamp)),
    ]


@_rows.register(Session.Signal)
def _(event: Session.Signal, position: int) -> list[RowChange]:
    sid, sequence, at = event.originator_id, event.sequence, to_ms(event.timestamp)
    try:
        kind, notifies, more = _SIGNAL_CLASSES[type(event)]
    except KeyError:
        kind, notifies, more = _signal_class(type(event))
    rows: list[RowChange] = [
        SignalAppended(
            sid, position, sequence, kind, event.actor_type, event.actor_id, event.run_id,
            event.occurred_at, event.summary, event.payload, at,
        )
    ]  # fmt: skip
    if event.dedupe_key is not None:
        rows.append(KeyRecorded(sid, event.dedupe_key))
    if notifies:
        rows.append(MaterialMoved(sid, sequence, event.actor_id, at))
    if more is not None:
        rows.extend(more(event, at))
    return rows


def _spawned(event: Session.ChildSpawned, at: int) -> list[RowChange]:
    return [
        ParentLinked(event.originator_id, event.actor_id),
        RunStarted(event.originator_id, event.run_id, at),
    ]


def _run_ended(event: Session.RunCompleted | Session.RunFailed, at: int) -> list[RowChange]:
    return [RunEnded(event.originator_id, event.run_id, run_status(event), at)]


def _human_turn(event: Session.HumanDirectMessage, at: int) -> list[RowChange]:
    channel = (event.payload or {}).get("channel")
    return [ChannelSeen(event.originator_id, channel)] if isinstance(channel, str) else []


#: A signal class's kind (its value), whether it notifies, and the rows it has besides the
#: signal's own (None: none), looked up once per class rather than per event.
_SIGNAL_CLASSES: dict[type, tuple[str, bool, Callable[[Any, int], list[RowChange]] | None]] = {}


def _signal_class(cls: type) -> tuple[str, bool, Callable[[Any, int], list[RowChange]] | None]:
    more: Callable[[Any, int], list[RowChange]] | None = None
    if issubclass(cls, Session.ChildSpawned):
        more = _spawned
    elif issubclass(cls, Session.RunCompleted | Session.RunFailed):
        more = _run_ended
    elif issubclass(cls, Session.HumanDirectMessage):
        more = _human_turn
    kind = cls.KIND  # type: ignore[attr-defined]
    found = _SIGNAL_CLASSES[cls] = (kind.value, kind.notifies, more)
    return found


#: A failed run's `payload.outcome` as the registry's run status (the domain's mapping).
_FAILED_STATUS = {o.value: s for o, s in RUN_STATUSES.items() if o is not RunOutcome.OK}


def run_status(event: Session.RunCompleted | Session.RunFailed) -> str:
    """`completed`, or `failed` | `timeout` | `cancelled` from a failed run's outcome."""
    if isinstance(event, Session.RunCompleted):
        return "completed"
    return _FAILED_STATUS.get(str((event.payload or {}).get("outcome")), "failed")


@_rows.register(Session.PinSet)
def _(event: Session.PinSet, position: int) -> list[RowChange]:
    """Host bookkeeping: the mark changes, the session's `updatedAt` does not."""
    return [MarkSet(event.originator_id, "pinned", event.pinned)]


@_rows.register(Session.ArchiveSet)
def _(event: Session.ArchiveSet, position: int) -> list[RowChange]:
    return [MarkSet(event.originator_id, "archived", event.archived)]


@_rows.register(Session.TranscriptNoted)
def _(event: Session.TranscriptNoted, position: int) -> list[RowChange]:
    """Where the transcript is: no row, and not an update of the session either."""
    return []


@_rows.register(Session.HistoryPruned)
def _(event: Session.HistoryPruned, position: int) -> list[RowChange]:
    return [HistoryPruned(event.originator_id, event.watermark)]


@_rows.register(Session.Deleted)
def _(event: Session.Deleted, position: int) -> list[RowChange]:
    return [
        SessionDeleted(event.originator_id, event.watermark, to_ms(event.timestamp)),
        UpstreamLinkRemoved(event.originator_id),
    ]


@_rows.register(Session.UpstreamLinked)
def _(event: Session.UpstreamLinked, position: int) -> list[RowChange]:
    at = to_ms(event.timestamp)
    return [
        UpstreamLinkSet(
            event.originator_id,
            event.catalog_id,
            event.host_id,
            event.thread_id,
            event.upstream_kind,
            event.upstream_ref,
            event.marker,
            event.position,
            event.generation,
            at,
        ),
        SessionTouched(event.originator_id, at),
    ]


@_rows.register(Session.UpstreamAdvanced)
def _(event: Session.UpstreamAdvanced, position: int) -> list[RowChange]:
    """Scan bookkeeping: the link row moves, the session's `updatedAt` does not."""
    return [
        UpstreamLinkAdvanced(
            event.originator_id, event.marker, event.position, to_ms(event.timestamp)
        )
    ]


@_rows.register(Session.UpstreamUnlinked)
def _(event: Session.UpstreamUnlinked, position: int) -> list[RowChange]:
    return [
        UpstreamLinkRemoved(event.originator_id),
        SessionTouched(event.originator_id, to_ms(event.timestamp)),
    ]


# -- the cursor's and the drains' rows, registered with their aggregate's first event ------


def _watch_started(event: Watch.Started, position: int) -> list[RowChange]:
    return [_cursor_started(event)]


def _watch_restarted(event: Watch.Restarted, position: int) -> list[RowChange]:
    return [_cursor_started(event)]


def _cursor_started(event: Watch.Started | Watch.Restarted) -> CursorStarted:
    return CursorStarted(
        event.originator_id,
        event.watcher,
        event.target_id,
        event.target_key,
        event.at_sequence,
        to_ms(event.timestamp),
    )


def _watch_moved(event: Watch.Moved, position: int) -> list[RowChange]:
    """Positions that open no notice (`MaterialAdvanced`, kept to replay older stores)."""
    return [_cursor_moved(event, None)]


def _notice_opened(event: Watch.NoticeOpened, position: int) -> list[RowChange]:
    return [_cursor_moved(event, position)]


def _acknowledged(event: Watch.Acknowledged, position: int) -> list[RowChange]:
    """A drain stored on the cursor itself (before ADR 024): a fresh notice when it reopened."""
    opens = notice_open(event.acknowledged, event.notified)
    return [_cursor_moved(event, position if opens else None)]


def _cursor_moved(event: Watch.Moved, notice_order: int | None) -> CursorMoved:
    return CursorMoved(
        event.originator_id,
        event.acknowledged,
        event.notified,
        event.material,
        notice_order,
        to_ms(event.timestamp),
    )


def _watch_removed(event: Watch.Removed, position: int) -> list[RowChange]:
    return [CursorRemoved(event.originator_id)]


def _drains_started(event: Drains.Started, position: int) -> list[RowChange]:
    return _drained(event, position)


def _drains_drained(event: Drains.Drained, position: int) -> list[RowChange]:
    return _drained(event, position)


def _drains_redelivered(event: Drains.Redelivered, position: int) -> list[RowChange]:
    """Each re-delivered notice keeps its place and its L; N moves to M (R-N6, ADR 034). No
    wake is published: the sweep wakes its watchers itself."""
    return [CursorsAcknowledged(_entries(event), to_ms(event.timestamp), position, False)]


def _drained(event: Drains.Started | Drains.Drained, position: int) -> list[RowChange]:
    """Each drained cursor moves as a stored `Acknowledged` moved it (ADR 024)."""
    return [CursorsAcknowledged(_entries(event), to_ms(event.timestamp), position)]


def _entries(event: Drains.Started | Drains.Drained | Drains.Redelivered) -> Any:
    """The event's entries as stored, made immutable (a row change is hashable)."""
    return tuple(map(tuple, event.entries))


def _register_watch_rows() -> None:
    from session_awareness.domain.watch import Watch  # noqa: PLC0415 -- see `_LATER`

    _rows.register(Watch.Started, _watch_started)
    _rows.register(Watch.Restarted, _watch_restarted)
    _rows.register(Watch.Moved, _watch_moved)
    _rows.register(Watch.NoticeOpened, _notice_opened)
    _rows.register(Watch.Acknowledged, _acknowledged)
    _rows.register(Watch.Removed, _watch_removed)


def _register_drains_rows() -> None:
    from session_awareness.domain.drains import Drains  # noqa: PLC0415 -- see `_LATER`

    _rows.register(Drains.Started, _drains_started)
    _rows.register(Drains.Drained, _drains_drained)
    _rows.register(Drains.Redelivered, _drains_redelivered)


#: The row functions of a cursor's and a watcher's drains' events (`Watch`, `Drains`), by the
#: aggregate's topic, registered on `_rows` when the first event of that aggregate is
#: projected: naming their classes here would import both aggregates' modules, and their
#: many event classes, into every process that records, though one that records a turn
#: nobody watches builds or decodes no event of theirs (issue 39, ADR 039). An event of
#: theirs, built or decoded, has imported its class already.
_LATER: dict[str, Callable[[], None]] = {
    WATCH_TOPIC: _register_watch_rows,
    DRAINS_TOPIC: _register_drains_rows,
}
