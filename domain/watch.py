"""The Watch aggregate: the cursor of one watcher on one target (R-W1–R-W7, R-N1–R-N7).

Positions: L `acknowledged`, N `notified` (frozen while a notice is pending), M `material`.
Synced means L = N = M; pending means N > L. Every position event carries all three
positions, so a projection can copy them without knowing the machine.

M is not stored per event: it is the newest notify-eligible event on the target not caused
by the watcher, which the target `Session` answers (`Session.material_for`, ADR 023). The
cursor's `material` is M as of its last stored event, a lower bound: a pending cursor stores
nothing when M moves, and `acknowledge` is given the target's M.

    inactive --start/restart--> synced --observe--> pending --observe--> pending (nothing stored)
    pending --acknowledge(M)--> synced (M = N) | pending again, one fresh notice (M > N)
    synced|pending --remove--> inactive

A drain stores its acknowledgements on the watcher's `Drains`, not here (ADR 024): a loaded
cursor whose own events say it is pending takes the positions of the watcher's latest
acknowledgement of this very version (`overlay`).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar
from uuid import UUID

from eventsourcing.domain import Aggregate

from session_awareness.domain.copying import copy_state
from session_awareness.domain.keys import SessionRef, watch_id
from session_awareness.domain.positions import (
    WATCH_TOPIC,
    RemovalReason,
    Via,
    notice_open,
    notice_text,
)
from session_awareness.domain.snapshots import StateSnapshot, snapshot_attributes

if TYPE_CHECKING:  # imported by the two commands that build one: a drain's, a sweep's
    from session_awareness.domain.drains import Acknowledgement

T = WATCH_TOPIC


class Watch(Aggregate):
    """The cursor state machine for one (watcher, target) pair."""

    TOPIC = T

    class Event(Aggregate.Event):
        TOPIC = f"{T}.Event"

    class Created(Event, Aggregate.Created):
        TOPIC = f"{T}.Created"

    class Started(Created):
        """The pair's first cursor, synced at `at_sequence`."""

        TOPIC = f"{T}.Started"
        watcher: str
        target_id: UUID
        target_agent_id: str
        target_key: str
        via: str
        at_sequence: int

    class Restarted(Event):
        """A cursor set again at `at_sequence`: a spawn edge overwrite or a new registration."""

        TOPIC = f"{T}.Restarted"
        watcher: str
        target_id: UUID
        target_agent_id: str
        target_key: str
        via: str
        at_sequence: int

        def apply(self, aggregate: Watch) -> None:
            aggregate.set_positions(self.at_sequence, self.at_sequence, self.at_sequence)
            aggregate.active = True
            aggregate.via = self.via

    class Promoted(Event):
        """An ambient cursor became an explicit watch, positions kept (R-W7); `via` is the
        cursor's new origin."""

        TOPIC = f"{T}.Promoted"
        via: str

        def apply(self, aggregate: Watch) -> None:
            aggregate.via = self.via

    class MadeExplicit(Promoted):
        """A drained ambient cursor became an explicit watch: it carries the positions the
        watcher's drain left, since it supersedes that drain's entry (ADR 024)."""

        TOPIC = f"{T}.MadeExplicit"
        acknowledged: int
        notified: int
        material: int

        def apply(self, aggregate: Watch) -> None:
            aggregate.set_positions(self.acknowledged, self.notified, self.material)
            aggregate.via = self.via

    class Moved(Event):
        """Base of the position events; never stored itself."""

        TOPIC = f"{T}.Moved"
        acknowledged: int
        notified: int
        material: int

        def apply(self, aggregate: Watch) -> None:
            aggregate.set_positions(self.acknowledged, self.notified, self.material)

    class NoticeOpened(Moved):
        """A material event reached a synced cursor: N = M = the event; one notice (R-N2)."""

        TOPIC = f"{T}.NoticeOpened"

    class MaterialAdvanced(Moved):
        """A material event reached a pending cursor: only M moves (frozen N, R-N2). No
        longer stored (M is derived from the target, ADR 023); kept to replay older stores."""

        TOPIC = f"{T}.MaterialAdvanced"

    class Acknowledged(Moved):
        """The watcher drained the notice: L = old N; reopened when M > old N (R-N3)."""

        TOPIC = f"{T}.Acknowledged"

    class Removed(Event):
        TOPIC = f"{T}.Removed"
        reason: str

        def apply(self, aggregate: Watch) -> None:
            aggregate.active = False

    class Snapshot(StateSnapshot):
        """The cursor's state at a version (ADR 022)."""

        TOPIC = f"{T}.Snapshot"

    #: The form of `snapshot_state`; a change of it is a new shape, read by `restore_state`.
    SNAPSHOT_SHAPE: ClassVar[int] = 1
    #: The drain whose positions this loaded copy shows, with the cursor's own positions
    #: (`overlay`); never part of the cursor's state, which is its events'.
    drained: tuple[Acknowledgement, tuple[int, int, int]] | None = None

    def __init__(  # noqa: PLR0917 -- the library passes the Started event's fields by name
        self,
        watcher: str,
        target_id: UUID,
        target_agent_id: str,
        target_key: str,
        via: str,
        at_sequence: int,
    ) -> None:
        self.watcher = watcher
        self.target = SessionRef(target_agent_id, target_key)
        self.target_id = target_id
        self.active = True
        self.via = via
        self.acknowledged = self.notified = self.material = at_sequence

    def __deepcopy__(self, memo: dict[int, object]) -> Watch:
        """The repository hands out a copy of each cached aggregate (so a failed save never
        corrupts the cache). Containers are copied one level deep, everything else shared:
        every value kept in them is immutable. `copy.deepcopy` walked each of a long session's
        idempotency keys on every load (bench/PROPOSALS.md, P4)."""
        return copy_state(self)

    def snapshot_state(self) -> dict[str, Any]:
        """The cursor's attributes in JSON's types (`Watch.Snapshot`)."""
        state = snapshot_attributes(self)
        state["target"] = [self.target.agent_id, self.target.key]
        if self.drained is not None:  # the cursor's own positions, not a drain's
            state.pop("drained")
            state["acknowledged"], state["notified"], state["material"] = self.drained[1]
        return state

    @classmethod
    def restore_state(cls, state: dict[str, Any]) -> dict[str, Any]:
        """The attributes `snapshot_state` wrote, as the cursor keeps them."""
        agent_id, key = state["target"]
        return {**state, "target": SessionRef(agent_id, key)}

    def set_positions(self, acknowledged: int, notified: int, material: int) -> None:
        self.acknowledged, self.notified, self.material = acknowledged, notified, material
        if self.drained is not None:  # an event of the cursor's own supersedes the drain's
            del self.drained

    def overlay(self, drained: Acknowledgement) -> None:
        """Show the positions a drain of this version left (ADR 024); the watcher's `Drains`
        gives it (`Drains.latest_for`)."""
        if drained.version != self.version:
            raise WatchStateError(f"a drain of version {drained.version}, not {self.version}")
        own = self.drained[1] if self.drained is not None else self.positions
        self.acknowledged, self.notified = drained.acknowledged, drained.notified
        self.material = drained.material
        self.drained = (drained, own)

    @property
    def positions(self) -> tuple[int, int, int]:
        return self.acknowledged, self.notified, self.material

    @property
    def moved_on(self) -> datetime:
        """When the cursor last moved by its own events or a drain (M aside, ADR 023)."""
        at = self.drained[0].at if self.drained is not None else None
        return at if at is not None and at > self.modified_on else self.modified_on

    @property
    def pending(self) -> bool:
        return self.active and notice_open(self.acknowledged, self.notified)

    @property
    def synced(self) -> bool:
        return self.active and self.acknowledged == self.notified == self.material

    @property
    def ambient(self) -> bool:
        """Whether the cursor is an ambient one: its notices queue up, never wake (R-W7)."""
        return self.active and self.via == Via.AMBIENT

    @property
    def notice(self) -> str | None:
        """The pending notice's text, or None when synced or inactive."""
        return notice_text(self.target.key, self.acknowledged) if self.pending else None

    # -- commands --------------------------------------------------------------------------

    @classmethod
    def start(
        cls, watcher: str, target: SessionRef, *, via: Via, at_sequence: int, at: datetime
    ) -> Watch:
        """A new cursor for the pair, synced at `at_sequence`."""
        return cls._create(
            cls.Started,
            id=watch_id(watcher, target.session_id),
            timestamp=at,
            watcher=watcher,
            target_id=target.session_id,
            target_agent_id=target.agent_id,
            target_key=target.key,
            via=via.value,
            at_sequence=at_sequence,
        )

    def restart(self, *, via: Via, at_sequence: int, at: datetime) -> None:
        """Set the cursor synced at `at_sequence`; only a spawn edge may overwrite an active one."""
        if self.active and via is not Via.SPAWN:
            raise WatchStateError("an active cursor is only overwritten by a spawn edge (R-W1)")
        self.trigger_event(
            self.Restarted,
            timestamp=at,
            watcher=self.watcher,
            target_id=self.target_id,
            target_agent_id=self.target.agent_id,
            target_key=self.target.key,
            via=via.value,
            at_sequence=at_sequence,
        )

    def promote(self, *, at: datetime) -> bool:
        """An explicit watch of an ambient cursor's pair: it becomes an explicit one for good,
        its positions (a pending notice too) kept; True when it was ambient (R-W2, R-W7)."""
        self.check_active()
        if self.via != Via.AMBIENT:
            return False
        if self.drained is None:
            self.trigger_event(self.Promoted, timestamp=at, via=Via.WATCH.value)
        else:  # it supersedes the drain's entry, so it keeps the drain's positions
            acknowledged, notified, material = self.positions
            self.trigger_event(
                self.MadeExplicit, timestamp=at, via=Via.WATCH.value,
                acknowledged=acknowledged, notified=notified, material=material,
            )  # fmt: skip
        return True

    def observe(self, sequence: int, *, at: datetime) -> bool:
        """A notify-eligible event on the target; True when it opens a notice (R-N2). A
        pending cursor stores nothing: its M is the target's (ADR 023)."""
        self.check_active()
        if sequence <= self.material:
            raise WatchStateError(
                f"event {sequence} is not after material position {self.material}"
            )
        if self.pending:
            return False
        self._move(self.NoticeOpened, self.acknowledged, sequence, sequence, at)
        return True

    def drain_entry(self, *, material: int) -> list[Any] | None:
        """What draining the pending notice leaves, `material` being the target's M for this
        watcher (`Session.material_for`): L = the old N; N = M = the target's M, so a fresh
        notice opens for the remainder when it is past the old N (R-N3). In the form the
        watcher's `Drains` stores it (`Acknowledgement.stored`: the cursor's id as hex, the
        version read, L, N, M), a plain list since a drain builds one for each of its pending
        cursors; None when no notice is pending. The cursor itself does not change."""
        if not self.pending:
            return None
        notified = max(self.material, material)
        return [self.id.hex, self.version, self.notified, notified, notified]

    def acknowledgement(self, *, material: int, at: datetime) -> Acknowledgement:
        """`drain_entry` as an `Acknowledgement` at `at` (R-N3, ADR 024);
        `WatchStateError` when no notice is pending."""
        entry = self.drain_entry(material=material)
        if entry is None:
            raise WatchStateError("no pending notice to acknowledge")
        from session_awareness.domain.drains import Acknowledgement  # noqa: PLC0415

        return Acknowledgement.of(entry, at)

    def redelivery(self, *, material: int, at: datetime) -> Acknowledgement | None:
        """What the start-up sweep's re-delivery of the pending notice leaves (R-N6), as the
        reference's sweep re-materializes it: L and the notice's text kept, N raised to M
        (`material` being the target's M for this watcher), so draining it acknowledges
        everything up to M and opens no follow-up for what its page already covers. None
        when N is M already. The watcher's `Drains` stores it (ADR 034)."""
        if not self.pending:
            raise WatchStateError("no pending notice to re-deliver")
        held = max(self.material, material)
        if held <= self.notified:
            return None
        from session_awareness.domain.drains import Acknowledgement  # noqa: PLC0415

        return Acknowledgement(self.id, self.version, self.acknowledged, held, held, at)

    def acknowledge(self, *, material: int, at: datetime) -> bool:
        """The same drain of this one cursor, stored as its own `Acknowledged` event: the
        shape stores written before ADR 024 hold. True when a fresh notice opens."""
        drained = self.acknowledgement(material=material, at=at)
        self._move(self.Acknowledged, drained.acknowledged, drained.notified, drained.material, at)
        return drained.reopened

    def remove(self, reason: RemovalReason, *, at: datetime) -> None:
        self.check_active()
        if self.drained is not None:  # a removal supersedes the drain: its own positions
            self.set_positions(*self.drained[1])
        self.trigger_event(self.Removed, timestamp=at, reason=reason.value)

    def check_active(self) -> None:
        if not self.active:
            raise WatchStateError("the cursor was removed")

    def _move(
        self, cls: type[Watch.Moved], acknowledged: int, notified: int, material: int, at: datetime
    ) -> None:
        self.trigger_event(
            cls, timestamp=at, acknowledged=acknowledged, notified=notified, material=material
        )


class WatchStateError(Exception):
    """A cursor transition that the cursor's current state does not allow."""


__all__ = ["RemovalReason", "Via", "Watch", "WatchStateError", "notice_text"]
