"""Copies of aggregates handed out by the repository's cache (bench/PROPOSALS.md, P4)."""

from __future__ import annotations

from copy import deepcopy
from datetime import UTC, datetime

from session_awareness.domain.copying import copy_state
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

    def test_a_copy_of_a_session_keeps_its_own_idempotency_keys(self) -> None:
        """R-L5: the keys a command's copy records are not the cached session's, and the
        other way round (`copy_state` copies the set, one level deep)."""
        session = Session.open(
            SessionRef.of("agent:main:c"), kind="subagent", label=None, parent_key=None, at=AT
        )
        session.record(
            SignalKind.COMPACTED, actor_type=ActorType.SYSTEM, summary="session compacted",
            occurred_at=1, at=AT, dedupe_key="compaction:a",
        )  # fmt: skip
        copy = copy_state(session)
        for target, key in ((copy, "compaction:b"), (session, "compaction:c")):
            target.record(
                SignalKind.COMPACTED, actor_type=ActorType.SYSTEM, summary="session compacted",
                occurred_at=2, at=AT, dedupe_key=key,
            )  # fmt: skip
        assert session.has_seen("compaction:c") and not session.has_seen("compaction:b")
        assert copy.has_seen("compaction:b") and not copy.has_seen("compaction:c")
        assert session.has_seen("compaction:a") and copy.has_seen("compaction:a")
