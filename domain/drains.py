"""The Drains aggregate: a watcher's drains, one event each (ADR 024, R-N3).

A drain acknowledges every pending notice of one watcher at once. Storing one `Watch` event
per drained pair cost as much as the reference's whole drain again in event rows alone, so a
drain stores ONE `Drained` event on the watcher's `Drains`, listing each pair it acknowledged:
the cursor's id, the `Watch` version it read, and the positions it left.

A cursor's positions are its `Watch`'s own, unless the watcher's `Drains` holds an entry for
it that names the Watch's current version: then they are the entry's (`latest_for`). Every
`Watch` event that can follow a drain supersedes its entry by itself: the position events
carry all three positions, a promotion of a drained cursor carries them too
(`Watch.MadeExplicit`), and a removal ends the cursor. The store refuses a drain whose
cursor was changed after it was read (the save checks each entry's version), so a stored
entry always names the version the cursor had when the drain committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar
from uuid import UUID

from eventsourcing.domain import Aggregate

from session_awareness.domain.copying import copy_state
from session_awareness.domain.keys import drains_id
from session_awareness.domain.positions import DRAINS_TOPIC, notice_open
from session_awareness.domain.snapshots import StateSnapshot, snapshot_attributes

T = DRAINS_TOPIC


@dataclass(frozen=True, slots=True)
class Acknowledgement:
    """One drained pair: the cursor, the `Watch` version the drain read, and the positions
    it left (L = the old N; N = M = the target's M, R-N3), at the drain's time."""

    watch_id: UUID
    version: int
    acknowledged: int
    notified: int
    material: int
    at: datetime | None = None

    @property
    def reopened(self) -> bool:
        """Whether a fresh notice opened for material newer than the drained notice."""
        return notice_open(self.acknowledged, self.notified)

    def stored(self) -> list[Any]:
        """The entry as a `Drained` event stores it (JSON's types; the time is the event's)."""
        return [self.watch_id.hex, self.version, self.acknowledged, self.notified, self.material]

    @classmethod
    def of(cls, entry: list[Any], at: datetime | None) -> Acknowledgement:
        wid, version, acknowledged, notified, material = entry
        # `UUID(int=…)`: half the time of parsing the hex (a drain reads one per pair).
        return cls(UUID(int=int(wid, 16)), version, acknowledged, notified, material, at)


class Drains(Aggregate):
    """The latest acknowledgement of each of one watcher's cursors."""

    TOPIC = T

    class Event(Aggregate.Event):
        TOPIC = f"{T}.Event"

    class Started(Event, Aggregate.Created):
        """The watcher's first drain."""

        TOPIC = f"{T}.Started"
        watcher: str
        entries: list[list[Any]]

    class Drained(Event):
        """A later drain: every pair it acknowledged."""

        TOPIC = f"{T}.Drained"
        entries: list[list[Any]]

        def apply(self, aggregate: Drains) -> None:
            aggregate.take(self.entries, self.timestamp)

    class Redelivered(Event):
        """The start-up sweep re-delivered pending notices (R-N6, ADR 034): each entry keeps
        its cursor's L and raises N to M, as the reference's sweep re-materializes a notice,
        so the notice's drain acknowledges everything up to M. Not a drain: nothing was
        acknowledged."""

        TOPIC = f"{T}.Redelivered"
        entries: list[list[Any]]

        def apply(self, aggregate: Drains) -> None:
            aggregate.take(self.entries, self.timestamp)

    class Snapshot(StateSnapshot):
        """The watcher's latest acknowledgements at a version (ADR 022)."""

        TOPIC = f"{T}.Snapshot"

    #: The form of `snapshot_state`; a change of it is a new shape, read by `restore_state`.
    SNAPSHOT_SHAPE: ClassVar[int] = 1

    def __init__(self, watcher: str, entries: list[list[Any]]) -> None:
        self.watcher = watcher
        #: Each cursor's latest entry as stored, with its drain's time, by the cursor id's
        #: hex: read back into an `Acknowledgement` only when it is asked for.
        self.latest: dict[str, tuple[list[Any], datetime]] = {}
        self.take(entries, None)

    def __deepcopy__(self, memo: dict[int, object]) -> Drains:
        """One level deep, like the other aggregates: its acknowledgements are immutable."""
        return copy_state(self)

    def take(self, entries: list[list[Any]], at: datetime | None) -> None:
        when = at or self.modified_on
        latest = self.latest
        for entry in entries:
            latest[entry[0]] = (entry, when)

    def latest_for(self, watch_id: UUID, version: int) -> Acknowledgement | None:
        """The acknowledgement that gives a cursor its positions: the latest of the cursor,
        if it names the cursor's current version (a later `Watch` event supersedes it)."""
        found = self._naming(watch_id, version)
        if found is None:
            return None
        entry, at = found
        return Acknowledgement(watch_id, version, entry[2], entry[3], entry[4], at)

    def gives_positions(self, watch_id: UUID, version: int) -> bool:
        """Whether a drain gives the cursor at `version`, as its own events make it, other
        positions: `latest_for` finds an entry (read by the entry's hex id and version,
        without building it)."""
        return self._naming(watch_id, version) is not None

    def _naming(self, watch_id: UUID, version: int) -> tuple[list[Any], datetime] | None:
        """The overlay rule (ADR 024): the cursor's latest entry, if it names `version`."""
        found = self.latest.get(watch_id.hex)
        return found if found is not None and found[0][1] == version else None

    @classmethod
    def record(
        cls, drains: Drains | None, watcher: str, entries: list[list[Any]], *, at: datetime
    ) -> Drains:
        """Store one drain of `watcher` on its `Drains` (created by its first drain): the
        `entries` of the pairs it acknowledged, each as `Acknowledgement.stored` gives it
        (`Watch.drain_entry`), stored as given."""
        if drains is None:
            return cls._create(
                cls.Started, id=drains_id(watcher), timestamp=at, watcher=watcher, entries=entries
            )
        drains.trigger_event(cls.Drained, timestamp=at, entries=entries)
        return drains

    @classmethod
    def redeliver(
        cls, drains: Drains | None, watcher: str, entries: list[Acknowledgement], *, at: datetime
    ) -> Drains:
        """Store one sweep's re-deliveries of `watcher`'s notices on its `Drains` (created,
        empty, when the watcher never drained)."""
        if drains is None:
            drains = cls._create(
                cls.Started, id=drains_id(watcher), timestamp=at, watcher=watcher, entries=[]
            )
        stored = [entry.stored() for entry in entries]
        drains.trigger_event(cls.Redelivered, timestamp=at, entries=stored)
        return drains

    def snapshot_state(self) -> dict[str, Any]:
        """The watcher and its acknowledgements in JSON's types (`Drains.Snapshot`)."""
        state = snapshot_attributes(self)
        state["latest"] = [[*entry, at] for entry, at in self.latest.values()]
        return state

    @classmethod
    def restore_state(cls, state: dict[str, Any]) -> dict[str, Any]:
        """The attributes `snapshot_state` wrote, as the aggregate keeps them."""
        latest = {row[0]: (row[:5], row[5]) for row in state["latest"]}
        return {**state, "latest": latest}


def acknowledgements(
    event: Drains.Started | Drains.Drained | Drains.Redelivered,
) -> list[Acknowledgement]:
    """The pairs a stored drain acknowledged (or a sweep re-delivered), at its time."""
    return [Acknowledgement.of(entry, event.timestamp) for entry in event.entries]


__all__ = ["Acknowledgement", "Drains", "acknowledgements", "notice_open"]
