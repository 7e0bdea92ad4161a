"""Who is told: the cursor moves a recorded signal makes on its audience (R-W1–R-W7, R-N1–R-N7).

Pure decisions over loaded aggregates, one per command: a record loads what `needs` names
(the target's cursors, its parent, the main session) and asks `record` once; its `Recorded`
says what was appended, which cursors started, which notices opened and who is woken (R-N5;
never for an ambient cursor, `wakes`, R-W7). A drain asks `drain` once; its `Drained` says
the same of the notices it reopened. The application saves what changed and carries the wakes.

- `audience` names who may be told of a notify-eligible event: every cursor holder on the
  target, plus its parent (R-W4), minus those who caused it (`material.caused_by`, R-W5).
- `tell` moves each of their cursors: a synced cursor opens one notice, a pending one stores
  nothing, its material position being the target's (R-N2, ADR 023); a parent without an
  active cursor gets one at L = 0 first (R-W4).
- `material` is a cursor's M, derived from the target; `acknowledge` drains a pending
  notice with it (R-N3); `acknowledge_handed` drains only the notices handed over that are
  still the ones shown (`Handed`, R-N8); `last_moved` is when the cursor last moved, M
  included (R-W6).
- `redeliver` raises a pending notice's N to its M when the start-up sweep re-delivers it,
  so its drain acknowledges up to M (R-N6).
- `seed_spawn` sets the parent's cursor at the spawn's sequence (R-W1).
- `register` starts an explicit watch at the target's head, leaving an active one as it is
  (R-W2), and promotes an ambient one for good (R-W7).
- `ambient_watcher` names the main session a human turn on a `group` session makes aware
  of it, and `grant_ambient` gives that main session an ambient cursor on the group at its
  head, before the turn is recorded (R-W7).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from session_awareness.domain import material as rule
from session_awareness.domain.intake import SignalRequest
from session_awareness.domain.keys import (
    AGENT_PREFIX,
    InvalidKeyError,
    SessionRef,
    check_key,
    may_hold_cursor,
)
from session_awareness.domain.positions import Via, notice_open, notice_text
from session_awareness.domain.session import Session
from session_awareness.domain.signals import SignalKind

if TYPE_CHECKING:  # imported where a cursor or a drain is built: a record that tells no one
    # builds neither, and their event classes are a tenth of a hook run (ADR 039)
    from session_awareness.domain.drains import Acknowledgement, Drains
    from session_awareness.domain.watch import Watch


@dataclass(frozen=True, slots=True)
class Opened:
    """A notice that opened: its watcher is told (woken after commit, R-N5)."""

    watch: Watch
    sequence: int

    @property
    def watcher(self) -> str:
        return self.watch.watcher


@dataclass(frozen=True, slots=True)
class Told:
    """What `tell` decided: the notices that opened, in audience order, and the cursors it
    created (new aggregates the application must save)."""

    opened: tuple[Opened, ...] = ()
    started: tuple[Watch, ...] = field(default=())


class StaleCursorError(Exception):
    """A cursor has seen a sequence the loaded target has not: one of the two copies is
    older than the store (another writer saved between the reads)."""


# -- one decision per record (issue 35) ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Needs:
    """What a record loads before the domain decides it: the parent whose session it checks
    (R-W4), the main session an ambient grant may go to (R-W7), and the watchers whose
    cursors on the target it reads (every holder on the index, the parent, the main session):
    a superset of those told, since who is told is decided after the grant."""

    parent: str | None
    main: str | None
    cursors: tuple[str, ...]


def needs(
    ref: SessionRef,
    *,
    kind: str,
    parent: str | None,
    watchers: Collection[str],
    signal: SignalKind,
    main_key: str | None,
) -> Needs:
    """What a record of `signal` on the session `ref` (its `kind`, `parent` and watcher
    index) loads; `main_key` None when ambient group watches are off."""
    main = None if main_key is None else ambient_watcher(ref, kind, signal, main_key)
    checked = _parent_to_check(ref, parent, watchers)
    extra = [key for key in (checked, main) if key is not None and key not in watchers]
    return Needs(checked, main, (*watchers, *dict.fromkeys(extra)))


@dataclass(frozen=True, slots=True)
class Notice:
    """A notice a record opened: its watcher, woken after commit unless `wakes` is False
    (an ambient cursor's, R-W7)."""

    watcher: str
    wakes: bool


@dataclass(frozen=True, slots=True)
class Recorded:
    """What one record decided: the signal's sequence (None: skipped, `skipped` says why,
    R-L6), the notices it opened in audience order (R-N2, R-N5), the cursors it created (new
    aggregates to save), the main session it gave an ambient cursor at `head` (R-W7), and the
    cursors whose notice opens without publishing a wake (`quiet`, R-W7)."""

    sequence: int | None
    skipped: str | None = None
    opened: tuple[Notice, ...] = ()
    started: tuple[Watch, ...] = ()
    granted: str | None = None
    head: int = 0
    quiet: tuple[UUID, ...] = ()

    @property
    def wakes(self) -> tuple[str, ...]:
        """The watchers woken after commit, in the order their notices opened."""
        return tuple(notice.watcher for notice in self.opened if notice.wakes)


def record(
    session: Session,
    request: SignalRequest,
    *,
    cursors: Mapping[str, Watch | None],
    parent: Session | None,
    main_session: Session | None,
    main: str | None,
    at: datetime,
) -> Recorded:
    """Record `request` on the live `session`, given what `needs` named loaded: `cursors`,
    the cursor each of those watchers holds on the session (or None), `parent` the session of
    `needs.parent`, `main_session` the session of `main` (`needs.main`). In order: the main
    session's ambient grant (R-W7), the R-L6 skip, the append, then the audience's cursors
    (R-W4, R-W5, R-N2). `StaleCursorError` when a cursor is ahead of the session."""
    started: list[Watch] = []
    granted, head = None, session.state_version
    if main is not None:
        held = cursors[main]
        deleted = main_session is not None and main_session.deleted
        watch = grant_ambient(session, main, held, main_deleted=deleted, at=at)
        if watch is not None:
            granted, cursors = main, {**cursors, main: watch}
            if held is None:
                started.append(watch)
    if request.needs_audience and not has_audience(session):
        return Recorded(None, "no_parent_or_watcher", started=tuple(started))
    sequence = append(session, request, at)
    if not request.kind.notifies:
        return Recorded(sequence, started=tuple(started), granted=granted, head=head)
    deleted = parent is not None and parent.deleted
    told = tell(
        session,
        sequence,
        {w: cursors[w] for w in audience(session, actor=request.actor_id, parent_deleted=deleted)},
        at=at,
    )
    return Recorded(
        sequence,
        opened=tuple(Notice(o.watcher, wakes(o.watch)) for o in told.opened),
        started=(*started, *told.started),
        granted=granted,
        head=head,
        quiet=tuple(o.watch.id for o in told.opened if not wakes(o.watch)),
    )


def append(
    session: Session, request: SignalRequest, at: datetime, lineage: Sequence[str] = ()
) -> int:
    """Append the requested signal to the session; its sequence (R-L4)."""
    return session.record(
        request.kind,
        actor_type=request.actor_type,
        summary=request.summary,
        occurred_at=request.occurred_at,
        at=at,
        actor_id=request.actor_id,
        run_id=request.run_id,
        payload=request.payload,
        dedupe_key=request.dedupe_key,
        lineage=lineage,
    )


def has_audience(session: Session) -> bool:
    """Whether anyone could be told of a human turn on the session: a parent or a watcher
    (R-L6)."""
    return bool(session.parent_key or session.watchers)


def parent_to_check(session: Session) -> str | None:
    """The parent that would get a cursor at L = 0 (R-W4), if its session is not deleted:
    a parent that holds none on the index yet and may hold one on this target (R-W3)."""
    return _parent_to_check(session.ref, session.parent_key, session.watchers)


def _parent_to_check(ref: SessionRef, parent: str | None, watchers: Collection[str]) -> str | None:
    if not parent or parent in watchers or parent == ref.key:
        return None
    return parent if may_hold_cursor(parent, ref) else None


def audience(session: Session, *, actor: str | None, parent_deleted: bool = False) -> list[str]:
    """Who is told of a notify-eligible event on the session: every cursor holder, then the
    parent (R-W4) unless its session is deleted; the event's actor is skipped, its cursor
    untouched (R-W5)."""
    candidates = list(session.watchers)
    parent = parent_to_check(session)
    if parent is not None and not parent_deleted:
        candidates.append(parent)
    return [watcher for watcher in candidates if not rule.caused_by(actor, watcher)]


def tell(
    session: Session, sequence: int, watches: Mapping[str, Watch | None], *, at: datetime
) -> Told:
    """Move the cursor of each watcher in `watches` (the `audience`, with the cursor each
    holds on the session, or None) for the event at `sequence` (R-N2). A cursor holder whose
    cursor is gone is passed over; the parent without an active cursor gets one at L = 0 and
    joins the session's watcher index (R-W4). `StaleCursorError` when a cursor is already at
    or past `sequence`."""
    opened: list[Opened] = []
    started: list[Watch] = []
    for watcher, held in watches.items():
        watch = held
        if watch is None or not watch.active:
            if watcher != session.parent_key:
                continue
            new = watch is None
            watch = _place(session, watcher, watch, via=Via.PARENT, at_sequence=0, at=at)
            if new:
                started.append(watch)
        if watch.material >= sequence:
            raise StaleCursorError(f"{watcher}'s cursor is ahead of {session.key}")
        if watch.observe(sequence, at=at):
            opened.append(Opened(watch, sequence))
    return Told(tuple(opened), tuple(started))


def material(watch: Watch, session: Session) -> int:
    """The cursor's M: the newest notify-eligible event on the target not caused by its
    watcher (R-W5), never below the positions the cursor stored (it started there)."""
    return rule.derived(watch.material, session.material, session.material_other, watch.watcher)


def acknowledge(watch: Watch, session: Session | None, *, at: datetime) -> bool:
    """Drain the cursor's pending notice with the target's M (the cursor's own when the
    target is gone); True when a fresh notice opens for the remainder (R-N3)."""
    held = watch.material if session is None else material(watch, session)
    return watch.acknowledge(material=held, at=at)


@dataclass(frozen=True, slots=True)
class Drained:
    """What one drain decided (R-N3, R-N5, R-W7, ADR 024): the watcher's `Drains` to save
    (None: nothing was pending), the notices handed over (oldest first) and each cursor's
    entry in that order, as the `Drains` event stores it (`Watch.drain_entry`; the event's
    own lists, not to be changed), at the drain's time `at`; how many of them reopened a
    notice, whether the watcher is woken after commit (a reopened notice on a cursor that is
    not ambient), and the cursors whose reopened notice publishes no wake (`quiet`: ambient
    ones)."""

    drains: Drains | None = None
    texts: tuple[str, ...] = ()
    entries: tuple[list[Any], ...] = ()
    at: datetime | None = None
    reopened: int = 0
    wakes: bool = False
    quiet: tuple[UUID, ...] = ()

    @property
    def acknowledged(self) -> tuple[Acknowledgement, ...]:
        """Each cursor's acknowledgement, as `Watch.acknowledgement` makes it (R-N3), in the
        order of `entries`."""
        from session_awareness.domain.drains import Acknowledgement  # noqa: PLC0415

        return tuple(Acknowledgement.of(entry, self.at) for entry in self.entries)


def drain(
    drains: Drains | None,
    watcher: str,
    cursors: Iterable[tuple[Watch | None, int]],
    *,
    at: datetime,
) -> Drained:
    """Acknowledge each of the watcher's pending cursors, given with its target's M for the
    watcher (R-N3), in ONE event on the watcher's `Drains` (created by its first drain, ADR
    024). A cursor that is gone or no longer pending is passed over (the read model that named
    it may be a save behind). A reopened notice wakes its watcher once (R-N5), unless it is on
    an ambient cursor (R-W7). Each pair is decided once (`Watch.drain_entry`): a drain of
    1,000 pairs builds no object per pair besides its text and its stored entry."""
    texts: list[str] = []
    entries: list[list[Any]] = []
    reopened: list[Watch] = []
    for watch, held in cursors:
        if watch is None:
            continue
        entry = watch.drain_entry(material=held)
        if entry is None:
            continue
        texts.append(notice_text(watch.target.key, watch.acknowledged))
        entries.append(entry)
        if notice_open(entry[2], entry[3]):  # a fresh notice for newer material (R-N3)
            reopened.append(watch)
    if not entries:
        return Drained()
    from session_awareness.domain.drains import Drains  # noqa: PLC0415 -- see the imports

    return Drained(
        Drains.record(drains, watcher, entries, at=at),
        tuple(texts),
        tuple(entries),
        at,
        len(reopened),
        wakes=any(wakes(watch) for watch in reopened),
        quiet=tuple(watch.id for watch in reopened if not wakes(watch)),
    )


@dataclass(frozen=True, slots=True)
class Handed:
    """A pending notice as it was handed over before being acknowledged (R-N8): its cursor,
    and the positions the notice showed, L (its text's `changesSince`) and N (the material
    it covers). The same notice is still pending while the cursor holds both."""

    watch_id: UUID
    acknowledged: int
    notified: int

    def shows(self, watch: Watch) -> bool:
        """Whether `watch` still holds this notice: pending at the same L and N. A cursor
        whose notice moved on (drained elsewhere, reopened, re-delivered) holds another."""
        return (
            watch.id == self.watch_id
            and watch.pending
            and (watch.acknowledged, watch.notified) == (self.acknowledged, self.notified)
        )


def acknowledge_handed(
    drains: Drains | None,
    watcher: str,
    cursors: Iterable[tuple[Watch | None, int]],
    handed: Iterable[Handed],
    *,
    at: datetime,
) -> Drained:
    """Acknowledge what was handed over, and only that (R-N8): of the watcher's cursors (each
    with its target's M, as `drain` takes them), those whose notice is still the one handed
    are drained as `drain` drains them (R-N3), in the same one event on the watcher's `Drains`
    (ADR 024, ADR 047). A cursor whose notice moved on since stays pending, to be handed over
    again; a cursor that became pending after the hand-over was never handed, and is left."""
    shown = {notice.watch_id: notice for notice in handed}
    kept = [
        (watch, held)
        for watch, held in cursors
        if watch is not None and watch.id in shown and shown[watch.id].shows(watch)
    ]
    return drain(drains, watcher, kept, at=at)


def wakes(watch: Watch) -> bool:
    """Whether a notice opened on the cursor wakes its watcher (R-N5): not an ambient
    cursor's, which queues and never wakes (R-W7)."""
    return not watch.ambient


def redeliver(
    drains: Drains | None, watcher: str, pending: Iterable[tuple[Watch, int]], *, at: datetime
) -> tuple[Drains | None, list[Acknowledgement]]:
    """The start-up sweep's re-delivery of the watcher's pending notices, each given with its
    target's M for the watcher (R-N6): every one with material past its frozen N has N raised
    to M, L kept, in ONE event on the watcher's `Drains` (ADR 034), so its drain acknowledges
    up to M. Returns the `Drains` to save (None when nothing moved) and the entries."""
    moved = [watch.redelivery(material=held, at=at) for watch, held in pending]
    entries = [entry for entry in moved if entry is not None]
    if not entries:
        return drains, entries
    from session_awareness.domain.drains import Drains  # noqa: PLC0415 -- see the imports

    return Drains.redeliver(drains, watcher, entries, at=at), entries


def last_moved(watch: Watch, session: Session | None) -> datetime:
    """When the cursor last moved: its own last event or its watcher's drain of it (ADR
    024), or the newest material event that reached it (a pending cursor stores none),
    whichever is later (R-W6's idle time)."""
    moved = watch.moved_on
    if session is None:
        return moved
    reached = session.material_time_for(watch.watcher)
    return reached if reached is not None and reached > moved else moved


def seed_spawn(
    session: Session, parent: str, watch: Watch | None, sequence: int, *, at: datetime
) -> Watch | None:
    """Seed the parent's cursor on the child at the spawn's sequence, overwriting any
    (R-W1), and put the parent on the child's watcher index. None when the parent may not
    hold a cursor on the child (itself, or a bare key of another agent, R-W3); otherwise
    the cursor, new or restarted (the application saves a new one)."""
    if parent == session.key or not may_hold_cursor(parent, session.ref):
        return None
    return _place(session, parent, watch, via=Via.SPAWN, at_sequence=sequence, at=at)


def register(session: Session, watcher: str, watch: Watch | None, *, at: datetime) -> Watch | None:
    """An explicit watch at the session's head (R-W2): the cursor started or restarted, or
    None when the pair already has an active one (a pending notice survives; an ambient
    cursor becomes an explicit one for good, positions kept, R-W7). The refusals of R-W3
    are the caller's, made before the target is loaded."""
    if watch is not None and watch.active:
        watch.promote(at=at)
        return None
    return _place(session, watcher, watch, via=Via.WATCH, at_sequence=session.state_version, at=at)


def grant_ambient(
    session: Session, main: str, watch: Watch | None, *, main_deleted: bool, at: datetime
) -> Watch | None:
    """Give `main` (the agent's main session, `ambient.ambient_watcher`) an ambient cursor on
    the group session at its head, before a human turn is recorded there (R-W7), so that the
    turn opens a notice that queues and never wakes. Nothing when `main` holds an active
    cursor already (never downgraded) or its session was deleted (R-N6's gone watcher).
    Returns the cursor granted (new or restarted; the application saves a new one), or None."""
    if (watch is not None and watch.active) or main_deleted:
        return None
    return _place(session, main, watch, via=Via.AMBIENT, at_sequence=session.state_version, at=at)


def _place(
    session: Session, watcher: str, watch: Watch | None, *, via: Via, at_sequence: int, at: datetime
) -> Watch:
    """Start the pair's cursor at `at_sequence` (or restart the one it held) and put the
    watcher on the session's index: every cursor origin's last step."""
    if watch is None:
        from session_awareness.domain.watch import Watch  # noqa: PLC0415 -- see the imports

        watch = Watch.start(watcher, session.ref, via=via, at_sequence=at_sequence, at=at)
    else:
        watch.restart(via=via, at_sequence=at_sequence, at=at)
    session.add_watcher(watcher, at=at)
    return watch


# -- ambient group watches (R-W7) ------------------------------------------------------------

#: The default last segment of an agent's main session key (`agent:<agentId>:main`).
DEFAULT_MAIN_KEY = "main"
#: The session kind whose human turns give the agent's main session an ambient cursor.
GROUP_KIND = "group"


def main_session_key(agent_id: str, main_key: str) -> str:
    """The agent's main session: `agent:<agentId>:<main_key>`."""
    return f"{AGENT_PREFIX}{agent_id}:{main_key}"


def check_main_key(main_key: object) -> str:
    """A main key every agent's main session key can be built from; `InvalidKeyError` else."""
    if (
        not isinstance(main_key, str)
        or not main_key
        or ":" in main_key
        or any(c.isspace() for c in main_key)
    ):
        raise InvalidKeyError(
            f"main_key must be one key segment, without ':' or spaces, got {main_key!r}"
        )
    try:
        check_key(main_session_key("agent", main_key))
    except InvalidKeyError:
        raise InvalidKeyError(f"main_key cannot end a session key: {main_key[:60]!r}") from None
    return main_key


def ambient_watcher(target: SessionRef, kind: str, signal: SignalKind, main_key: str) -> str | None:
    """The main session that gets an ambient cursor on `target` before `signal` is recorded
    on it, or None: only a human turn on a `group` session, never the main session itself,
    and only a watcher that may hold a cursor on the target (R-W3)."""
    if signal is not SignalKind.HUMAN_DIRECT_MESSAGE or kind != GROUP_KIND:
        return None
    main = main_session_key(target.agent_id, main_key)
    if main == target.key or not may_hold_cursor(main, target):
        return None
    return main
