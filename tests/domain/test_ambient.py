"""Ambient group watches in the domain: who is made aware, and the cursor's promotion (R-W7)."""

from __future__ import annotations

import pytest

from session_awareness.domain.keys import InvalidKeyError, SessionRef
from session_awareness.domain.notices import ambient_watcher, check_main_key
from session_awareness.domain.signals import SignalKind
from session_awareness.domain.watch import RemovalReason, Via, Watch, WatchStateError
from tests.domain.test_watch import (
    TARGET,
    WATCHER,
    at,
    event_store_mapper,
    given,
    positions,
    replay,
)

HUMAN = SignalKind.HUMAN_DIRECT_MESSAGE


class TestWhoIsMadeAware:
    def test_a_human_turn_on_a_group_names_its_agents_main_session(self) -> None:
        """R-W7: `agent:<agentId>:<main_key>` of the group's agent."""
        team = SessionRef.of("agent:ops:team")
        assert ambient_watcher(team, "group", HUMAN, "main") == "agent:ops:main"
        assert ambient_watcher(team, "group", HUMAN, "lobby") == "agent:ops:lobby"
        assert ambient_watcher(SessionRef("ops", "team"), "group", HUMAN, "main") == (
            "agent:ops:main"
        )

    @pytest.mark.parametrize(
        ("kind", "signal"),
        [("main", HUMAN), ("cron", HUMAN), ("subagent", HUMAN), ("group", SignalKind.GOAL_CHANGED)],
    )
    def test_other_kinds_and_other_signals_make_nobody_aware(
        self, kind: str, signal: SignalKind
    ) -> None:
        """R-W7: only a human turn, only on a group."""
        assert ambient_watcher(SessionRef.of("agent:ops:team"), kind, signal, "main") is None

    def test_the_main_session_is_never_its_own_ambient_watcher(self) -> None:
        """R-W7: unless the group is that main session itself."""
        assert ambient_watcher(SessionRef.of("agent:ops:main"), "group", HUMAN, "main") is None

    @pytest.mark.parametrize("main_key", ["", "a:b", "ma in", "x\n", 'a"b', None])
    def test_a_main_key_that_cannot_end_a_session_key_is_refused(self, main_key: object) -> None:
        with pytest.raises(InvalidKeyError, match="main_key"):
            check_main_key(main_key)


class TestPromotion:
    def test_an_ambient_cursor_is_promoted_with_its_positions_and_pending_notice(self) -> None:
        """R-W7, R-W2: promotion changes only where the cursor came from."""
        watch = given(start=3, via=Via.AMBIENT, observed=[4, 5])
        assert watch.ambient
        assert watch.promote(at=at(300)) is True
        [promoted] = watch.collect_events()
        assert isinstance(promoted, Watch.Promoted)
        assert promoted.via == "watch"
        assert not watch.ambient
        assert positions(watch) == (3, 4, 4)  # M = 5 is the target's (ADR 023)
        assert watch.pending

    def test_an_explicit_or_spawn_cursor_is_left_as_it_is(self) -> None:
        """R-W7: never downgraded, and nothing to promote."""
        for via in (Via.WATCH, Via.SPAWN, Via.PARENT):
            watch = given(via=via)
            assert watch.promote(at=at(300)) is False
            assert list(watch.collect_events()) == []

    def test_a_removed_cursor_cannot_be_promoted(self) -> None:
        with pytest.raises(WatchStateError):
            given(via=Via.AMBIENT, removed=True).promote(at=at(300))

    def test_a_restart_sets_the_new_origin(self) -> None:
        """R-W7: an ambient cursor that expired and is registered again is ambient no more."""
        watch = given(via=Via.AMBIENT)
        watch.remove(RemovalReason.EXPIRED, at=at(300))
        watch.restart(via=Via.WATCH, at_sequence=4, at=at(301))
        assert watch.via == "watch" and not watch.ambient

    def test_the_promotion_survives_the_event_store(self) -> None:
        """R-W7: stored and read back, the promoted cursor replays to the same state."""
        watch = Watch.start(WATCHER, TARGET, via=Via.AMBIENT, at_sequence=2, at=at(0))
        watch.observe(3, at=at(1))
        watch.promote(at=at(2))
        mapper = event_store_mapper()
        events = [mapper.to_domain_event(mapper.to_stored_event(e)) for e in watch.collect_events()]
        again = replay(events)
        assert (again.via, positions(again), again.pending) == ("watch", (2, 3, 3), True)
