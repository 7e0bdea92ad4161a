"""Copies of aggregates handed out by the repository's cache (bench/PROPOSALS.md, P4)."""

from __future__ import annotations

from copy import deepcopy
from datetime import UTC, datetime

from session_awareness.domain.copying import GrowOnlySet
from session_awareness.domain.keys import SessionRef
from session_awareness.domain.session import Session
from session_awareness.domain.signals import ActorType, SignalKind
from session_awareness.domain.watch import Via, Watch

AT = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


class TestCopying:
    def test_a_copied_session_can_change_without_touching_the_original(self) -> None:
        """R-L4, R-L5: a command works on a copy; the cached session keeps its state."""
        session = Session.open(
            SessionRef.of("agent:main:c"), kind="subagent", label=None, parent_key=None, at=AT
        )
        session.add_watcher("agent:main:main", at=AT)
        session.collect_events()
        copy = deepcopy(session)
        copy.record(
            SignalKind.COMPACTED, actor_type=ActorType.SYSTEM, summary="session compacted",
            occurred_at=1, at=AT, dedupe_key="compaction:1",
        )  # fmt: skip
        copy.add_watcher("agent:ops:main", at=AT)
        assert (session.state_version, session.version) == (0, 2)
        assert len(session.seen) == 0 and session.watchers == {"agent:main:main": True}
        assert session.pending_events == []
        assert (copy.state_version, len(copy.pending_events)) == (1, 2)

    def test_a_copied_watch_can_move_without_touching_the_original(self) -> None:
        """R-N2: the cached cursor stays synced while a copy opens a notice."""
        watch = Watch.start("agent:main:main", SessionRef.of("agent:main:c"),
                            via=Via.SPAWN, at_sequence=1, at=AT)  # fmt: skip
        watch.collect_events()
        copy = deepcopy(watch)
        assert copy.observe(2, at=AT) is True
        assert (watch.acknowledged, watch.notified, watch.material) == (1, 1, 1)
        assert watch.pending_events == [] and not watch.pending


class TestGrowOnlySet:
    """R-L5: a session's idempotency keys, copied cheaply for every command."""

    def test_a_copy_and_its_original_grow_apart(self) -> None:
        original = GrowOnlySet()
        original.add("a")
        copy = original.copy()
        copy.add("b")
        original.add("c")
        assert set(original) == {"a", "c"} and set(copy) == {"a", "b"}
        assert "b" not in original and "c" not in copy

    def test_membership_survives_the_merges_into_a_new_base(self) -> None:
        keys = [f"k{number}" for number in range(GrowOnlySet.MERGE * 3 + 7)]
        grown = GrowOnlySet()
        snapshots = []
        for number, key in enumerate(keys):
            grown.add(key)
            grown.add(key)  # adding twice changes nothing
            if number % GrowOnlySet.MERGE == 0:
                snapshots.append((number, grown.copy()))
        assert len(grown) == len(keys) and all(key in grown for key in keys)
        for number, snapshot in snapshots:
            assert set(snapshot) == set(keys[: number + 1])
            assert keys[number + 1] not in snapshot
