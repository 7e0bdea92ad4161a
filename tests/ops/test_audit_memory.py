"""The audit's rule checks keep a few small facts per session and per cursor, never per
event: the audit of a store of a million sessions stays within 500 MB (issue 39, item 6;
R-R2, docs/performance.md)."""

from __future__ import annotations

import tracemalloc
from datetime import UTC, datetime
from uuid import UUID

from session_awareness.application.invariants import Invariants
from session_awareness.domain.keys import SessionRef, watch_id
from session_awareness.domain.session import Session
from session_awareness.domain.watch import Via, Watch

NOW = datetime(2026, 12, 5, tzinfo=UTC)
#: What the checks may keep per family (a main session, four sub-agents it watches): about
#: 850 bytes now, 2,200 when each dict kept its own UUID objects and tuples (over 400 MB of
#: checks alone for the 200,000 families of a million sessions).
BYTES_PER_FAMILY = 1_200


def family(number: int, position: int) -> list[tuple[int, object]]:
    """The events of one family as `bench.scale` seeds it: the main's goals, each child's
    twelve signals, its watcher announced, its cursor started and a notice opened."""
    main = f"agent:a{number}:main"
    events: list[object] = []
    mid = fresh(SessionRef.of(main).session_id)
    for sequence in (1, 2):
        events.append(signal(mid, sequence))
    for index in range(4):
        sid = fresh(SessionRef.of(f"agent:a{number}:subagent:c{index}").session_id)
        events += [signal(sid, sequence) for sequence in range(1, 13)]
        events.append(Session.WatcherAdded(
            originator_id=sid, originator_version=14, timestamp=NOW, watcher=main
        ))  # fmt: skip
        wid = fresh(watch_id(main, sid))
        events.append(Watch.Started(
            originator_id=wid, originator_version=1, timestamp=NOW,
            originator_topic="session_awareness:Watch", watcher=main, target_id=sid,
            target_agent_id=f"a{number}", target_key=f"agent:a{number}:subagent:c{index}",
            via=Via.SPAWN, at_sequence=1,
        ))  # fmt: skip
        events.append(Watch.NoticeOpened(
            originator_id=wid, originator_version=2, timestamp=NOW, acknowledged=1,
            notified=2, material=12,
        ))  # fmt: skip
    return [(position + offset, event) for offset, event in enumerate(events)]


def fresh(uid: UUID) -> UUID:
    """A copy of an id, as an event decoded from the store carries its own."""
    return UUID(int=uid.int)


def signal(sid: UUID, sequence: int) -> object:
    return Session.HumanDirectMessage(
        originator_id=sid, originator_version=sequence + 1, timestamp=NOW, sequence=sequence,
        actor_type="human", actor_id=None, run_id=None, occurred_at=0, summary="turn",
        payload=None, dedupe_key=None,
    )  # fmt: skip


def kept(invariants: Invariants, families: int) -> int:
    """The bytes the checks of `families` families keep, each family's events built, checked
    and dropped in turn, as an audit decodes a page at a time (the id caches are filled
    first: they are bounded, and not the checks')."""
    for number in range(families):
        family(number, 0)
    position = 0
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for number in range(families):
            recorded = family(number, position)
            for at, event in recorded:
                invariants.check(at, event)
            position += len(recorded)
        del recorded
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_the_checks_keep_a_bounded_few_bytes_per_family() -> None:
    """R-R2: checking 3,000 families keeps at most `BYTES_PER_FAMILY` a family, and the
    replay finds nothing to report."""
    invariants = Invariants()
    assert kept(invariants, 3_000) / 3_000 <= BYTES_PER_FAMILY
    assert invariants.finish() == []
