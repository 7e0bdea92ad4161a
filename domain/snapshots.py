"""Snapshots of aggregates whose state is written out explicitly, in JSON's own types.

The library's `Snapshot.take` stores `vars(aggregate)` as it is, which the JSON transcoder
cannot always encode (value objects, sets) or decodes into other types (a tuple
comes back a list). An aggregate snapshotted here says what its state is instead:
`snapshot_state()` gives it in JSON's types, tagged with its `SNAPSHOT_SHAPE`, and
`restore_state(state)` turns it back into the aggregate's attributes. A snapshot is only a
cache of the replay of the aggregate's events up to its version; a shape the class does not
know is refused, never guessed.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import Snapshot
from eventsourcing.utils import get_topic, resolve_topic


class StateSnapshot(Snapshot):
    """A snapshot of an aggregate's explicit state (`snapshot_state`), stamped with the
    time of the aggregate's last event: taking one reads no clock."""

    @classmethod
    def take(cls, aggregate: Any) -> StateSnapshot:
        state = aggregate.snapshot_state()
        state["shape"] = type(aggregate).SNAPSHOT_SHAPE
        return cls(
            originator_id=aggregate.id,
            originator_version=aggregate.version,
            timestamp=aggregate.modified_on,
            topic=get_topic(type(aggregate)),
            state=state,
        )

    def mutate(self, _: Any) -> Any:
        cls = resolve_topic(self.topic)
        state = dict(self.state)
        shape = state.pop("shape", None)
        if shape != cls.SNAPSHOT_SHAPE:
            raise SnapshotShapeError(
                f"a {cls.__name__} snapshot of shape {shape!r}, expected {cls.SNAPSHOT_SHAPE}"
            )
        attributes = cls.restore_state(state)
        attributes["_id"] = self.originator_id
        attributes["_version"] = self.originator_version
        attributes["_pending_events"] = []
        aggregate = object.__new__(cls)
        aggregate.__dict__.update(attributes)
        return aggregate


#: What a snapshot's version and id say already, and what it never holds (the library's).
_NOT_STATE = frozenset({"_id", "_version", "_pending_events"})


def snapshot_attributes(aggregate: Any) -> dict[str, Any]:
    """The aggregate's attributes a snapshot keeps: all but its id, version and pending
    events (its creation and modification times included)."""
    return {name: value for name, value in vars(aggregate).items() if name not in _NOT_STATE}


class SnapshotShapeError(ValueError):
    """A stored snapshot whose shape this version does not read."""


__all__ = ["SnapshotShapeError", "StateSnapshot", "snapshot_attributes"]
