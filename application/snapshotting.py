"""Snapshots of sessions and cursors, so a load reads at most `SNAPSHOT_INTERVAL` events
whatever the history's length (ADR 022).

A snapshot is taken after a save whose events reach a multiple of the interval, from the
saved aggregate itself (committed, so it is the state at its version): no read of the store,
unlike the library's `take_snapshot`. It is only a cache: the events stay the record, an
audit and a read-model rebuild read the events alone, and a snapshot that cannot be stored
is logged and skipped; the save it follows has committed already and is never undone or
retried for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eventsourcing.persistence import EventStore

from session_awareness.domain.positions import DRAINS_TOPIC, WATCH_TOPIC
from session_awareness.domain.session import Session
from session_awareness.logs import get_logger

log = get_logger()

#: Events between two snapshots of one aggregate: a load replays at most this many.
SNAPSHOT_INTERVAL = 100
#: The aggregates snapshotted, by their classes' topics, and how often.
SNAPSHOTTED_TOPICS: Mapping[str, int] = dict.fromkeys(
    (Session.TOPIC, WATCH_TOPIC, DRAINS_TOPIC), SNAPSHOT_INTERVAL
)


class SnapshottingIntervals(dict[type, int]):
    """The library's `snapshotting_intervals`, keyed by class as it asks, made from intervals
    keyed by topic: a class's entry is made when the class is first looked up, from its own
    topic. Naming `Watch` and `Drains` here would import their modules, and their many event
    classes, into every process that records, though one that builds or loads neither has
    none of them to snapshot (issue 39, ADR 039)."""

    def __init__(self, by_topic: Mapping[str, int]) -> None:
        super().__init__()
        self.by_topic = dict(by_topic)

    def __missing__(self, cls: type) -> int:
        interval = self.by_topic.get(cls.__dict__.get("TOPIC"))  # type: ignore[arg-type]
        if interval is None:
            raise KeyError(cls)
        self[cls] = interval
        return interval

    def get(self, cls: type, default: Any = None) -> Any:
        try:
            return self[cls]
        except KeyError:
            return default

    def __bool__(self) -> bool:
        return bool(self.by_topic)


#: The aggregates snapshotted, and how often (the library's `snapshotting_intervals`).
SNAPSHOTTING_INTERVALS: Mapping[type, int] = SnapshottingIntervals(SNAPSHOTTED_TOPICS)


def take_due_snapshots(
    store: EventStore[Any] | None, processing_event: Any, intervals: Mapping[type, int]
) -> int:
    """Snapshot each saved aggregate one of whose new events has a version that is a
    multiple of its interval, at the aggregate's version; how many were stored."""
    if store is None or not intervals:
        return 0
    due: dict[Any, Any] = {}
    for event in processing_event.events:
        aggregate = processing_event.aggregates.get(event.originator_id)
        interval = intervals.get(type(aggregate))
        if interval and event.originator_version % interval == 0:
            due[aggregate.id] = aggregate
    if not due:
        return 0
    try:
        store.put([type(aggregate).Snapshot.take(aggregate) for aggregate in due.values()])
    except Exception as error:  # noqa: BLE001 -- a cache; the save it follows has committed
        log.warning("snapshot_failed", aggregates=len(due), error=repr(error))
        return 0
    return len(due)


__all__ = [
    "SNAPSHOTTED_TOPICS",
    "SNAPSHOTTING_INTERVALS",
    "SNAPSHOT_INTERVAL",
    "SnapshottingIntervals",
    "take_due_snapshots",
]
