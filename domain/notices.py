"""Who is told: the cursor moves a recorded signal makes on its audience (R-W1–R-W7, R-N1–R-N7).

Pure decisions over loaded aggregates: the application loads the target `Session` and the
`Watch`es its audience holds, asks here what moves, saves what changed and wakes, after
commit, the watchers of the notices this module says opened.

- `audience` names who may be told of a notify-eligible event: every cursor holder on the
  target, plus its parent (R-W4), minus the event's actor (R-W5).
- `tell` moves each of their cursors: a synced cursor opens one notice, a pending one stores
  nothing, its material position being the target's (R-N2, ADR 023); a parent without an
  active cursor gets one at L = 0 first (R-W4).
- `material` is a cursor's M, derived from the target; `acknowledge` drains a pending
  notice with it (R-N3); `last_moved` is when the cursor last moved, M included (R-W6).
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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from session_awareness.domain import material as rule
from session_awareness.domain.drains import Acknowledgement, Drains
from session_awareness.domain.keys import (
    AGENT_PREFIX,
    InvalidKeyError,
    SessionRef,
    check_key,
    may_hold_cursor,
)
from session_awareness.domain.session import Session
from session_awareness.domain.signals import SignalKind
from session_awareness.domain.watch import Via, Watch


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


def has_audience(session: Session) -> bool:
    """Whether anyone could be told of a human turn on the session: a parent or a watcher
    (R-L6)."""
    return bool(session.parent_key or session.watchers)


def parent_to_check(session: Session) -> str | None:
    """The parent that would get a cursor at L = 0 (R-W4), if its session is not deleted:
    a parent that holds none on the index yet and may hold one on this target (R-W3)."""
    parent = session.parent_key
    if not parent or parent in session.watchers or parent == session.key:
        return None
    return parent if may_hold_cursor(parent, session.ref) else None


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
    return max(watch.material, session.material_for(watch.watcher))


def acknowledge(watch: Watch, session: Session | None, *, at: datetime) -> bool:
    """Drain the cursor's pending notice with the target's M (the cursor's own when the
    target is gone); True when a fresh notice opens for the remainder (R-N3)."""
    held = watch.material if session is None else material(watch, session)
    return watch.acknowledge(material=held, at=at)


def drain(
    drains: Drains | None, watcher: str, pending: Iterable[tuple[Watch, int]], *, at: datetime
) -> tuple[Drains | None, list[Acknowledgement]]:
    """Acknowledge each of the watcher's pending cursors, given with its target's M for the
    watcher (R-N3), in ONE event on the watcher's `Drains` (created by its first drain, ADR
    024). Returns the `Drains` to save (None when nothing was pending) and each cursor's
    acknowledgement, in the order given."""
    drained = [watch.acknowledgement(material=held, at=at) for watch, held in pending]
    if not drained:
        return drains, drained
    return Drains.record(drains, watcher, drained, at=at), drained


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
