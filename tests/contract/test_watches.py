"""Watchers and cursors (R-W1–R-W7)."""

from __future__ import annotations

import pytest

from session_awareness.application import SessionAwareness, UnknownSessionError
from tests.conftest import FakeClock
from tests.contract.helpers import CHILD, MANAGER, OTHER, PEER, cursor, notice, sequences, spawn


class TestSpawnEdge:
    def test_the_spawn_seeds_the_parents_cursor_at_the_spawn_sequence(
        self, svc: SessionAwareness
    ) -> None:
        """R-W1: recording child_spawned seeds P's cursor on C at s: L = N = M = s."""
        assert spawn(svc) == 1
        assert cursor(svc, MANAGER, CHILD) == (1, 1, 1)
        assert svc.pending_notices(MANAGER) == []

    def test_a_second_spawn_edge_overwrites_a_pending_cursor(self, svc: SessionAwareness) -> None:
        """R-W1: the spawn edge overwrites any existing cursor for the pair."""
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal created")
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 1)]
        assert svc.record_child_spawned(CHILD, parent=MANAGER, run_id="run-2") == 3
        assert cursor(svc, MANAGER, CHILD) == (3, 3, 3)
        assert svc.pending_notices(MANAGER) == []

    def test_a_repeated_spawn_report_for_the_same_run_records_nothing(
        self, svc: SessionAwareness
    ) -> None:
        """R-L5: child spawned is idempotent per run id."""
        spawn(svc)
        assert svc.record_child_spawned(CHILD, parent=MANAGER, run_id="run-1") is None
        assert sequences(svc, CHILD) == [1]


class TestExplicitWatch:
    def test_a_watch_starts_at_the_targets_current_head(self, svc: SessionAwareness) -> None:
        """R-W2: registration starts at T's stateVersion; earlier history never notifies."""
        svc.open_session(PEER)
        svc.open_session(MANAGER)
        svc.open_session("agent:main:worker")
        svc.watch(MANAGER, "agent:main:worker")
        svc.unwatch(MANAGER, "agent:main:worker")
        svc.record_goal_changed("agent:main:worker", summary="goal created")
        svc.record_goal_changed("agent:main:worker", summary="goal updated")
        assert svc.watch(PEER, "agent:main:worker") is True
        assert cursor(svc, PEER, "agent:main:worker") == (2, 2, 2)
        assert svc.pending_notices(PEER) == []
        svc.record_human_direct_message("agent:main:worker", channel="discord")
        assert svc.pending_notices(PEER) == [notice("agent:main:worker", 2)]

    def test_registering_again_keeps_a_pending_notice(self, svc: SessionAwareness) -> None:
        """R-W2: if the pair already has a cursor it is left untouched."""
        svc.open_session("agent:main:worker")
        svc.open_session(PEER)
        assert svc.watch(PEER, "agent:main:worker")
        svc.record_goal_changed("agent:main:worker", summary="goal created")
        assert svc.watch(PEER, "agent:main:worker") is True
        assert svc.pending_notices(PEER) == [notice("agent:main:worker", 0)]
        assert cursor(svc, PEER, "agent:main:worker") == (0, 1, 1)

    def test_unwatch_removes_the_cursor_and_its_notices(self, svc: SessionAwareness) -> None:
        """R-W6 (Beyond): an explicit unwatch(W, T) removes the pair's cursor."""
        svc.open_session("agent:main:worker")
        svc.open_session(PEER)
        svc.watch(PEER, "agent:main:worker")
        svc.record_goal_changed("agent:main:worker", summary="goal created")
        assert svc.unwatch(PEER, "agent:main:worker") is True
        assert svc.pending_notices(PEER) == []
        assert svc.unwatch(PEER, "agent:main:worker") is False
        svc.record_goal_changed("agent:main:worker", summary="goal updated")
        assert svc.pending_notices(PEER) == []


class TestRefusals:
    def test_a_session_cannot_watch_itself(self, svc: SessionAwareness) -> None:
        """R-W3: W = T is refused and nothing is stored."""
        svc.open_session(MANAGER)
        assert svc.watch(MANAGER, MANAGER) is False
        assert cursor(svc, MANAGER, MANAGER) is None

    def test_a_bare_watcher_key_is_refused(self, svc: SessionAwareness) -> None:
        """R-W3: a watcher that is not agent-qualified (e.g. `global`) gets no cursor."""
        svc.open_session(MANAGER)
        svc.open_session("global", agent_id="main")
        assert svc.watch("global", MANAGER) is False
        assert svc.read_model.cursors_of_watcher("global", pending_only=False) == []

    def test_an_unknown_target_is_refused(self, svc: SessionAwareness) -> None:
        """R-W3: a target that resolves to no session is refused."""
        svc.open_session(MANAGER)
        assert svc.watch(MANAGER, "agent:main:nobody") is False
        assert svc.watch(MANAGER, "nobody") is False

    def test_an_ambiguous_bare_target_needs_the_agent_id(self, svc: SessionAwareness) -> None:
        """R-W3: a bare key shared by several agents resolves only with the target's agent id,
        and only the watcher's own agent's bare session may be watched."""
        svc.open_session("global", agent_id="main")
        svc.open_session("global", agent_id="ops")
        svc.open_session(MANAGER)
        assert svc.watch(MANAGER, "global") is False
        assert svc.watch(MANAGER, "global", target_agent_id="ops") is False
        assert svc.watch(MANAGER, "global", target_agent_id="main") is True
        svc.record_goal_changed("global", summary="goal created", agent_id="ops")
        svc.record_goal_changed("global", summary="goal created", agent_id="main")
        assert svc.pending_notices(MANAGER) == [notice("global", 0)]
        assert (
            svc.read_model.cursors_of_watcher(MANAGER, pending_only=False)[0].target_id
            == (svc.resolve_id("global", "main")[1])
        )

    def test_a_bare_session_still_keeps_a_log_and_answers_changes_since(
        self, svc: SessionAwareness
    ) -> None:
        """R-W3: bare-key sessions get the durable log and changesSince, without notices."""
        svc.open_session("global", agent_id="main")
        svc.record_child_spawned("agent:main:subagent:x", parent="global", run_id="r")
        assert svc.record_goal_changed("global", summary="goal created") == 1
        assert sequences(svc, "global") == [1]
        assert svc.pending_notices("global") == []

    def test_a_deleted_target_is_refused(self, svc: SessionAwareness) -> None:
        """R-W3: a deleted session no longer resolves."""
        svc.open_session("agent:main:worker")
        svc.delete_session("agent:main:worker")
        svc.open_session(PEER)
        assert svc.watch(PEER, "agent:main:worker") is False


class TestWatchersOfAnEvent:
    def test_a_parent_without_a_cursor_gets_one_from_zero(self, svc: SessionAwareness) -> None:
        """R-W4: T's parent without a cursor gets one created with L = 0."""
        svc.open_session(MANAGER)
        svc.open_session(CHILD, kind="subagent", parent=MANAGER)
        svc.record_goal_changed(CHILD, summary="goal created")
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 0)]
        assert cursor(svc, MANAGER, CHILD) == (0, 1, 1)

    def test_every_cursor_holder_and_the_parent_are_told(self, svc: SessionAwareness) -> None:
        """R-W4: the watchers of an event are every cursor holder on T plus T's parent."""
        spawn(svc)
        svc.open_session(PEER)
        svc.open_session(OTHER)
        svc.watch(PEER, CHILD)
        svc.watch(OTHER, CHILD)
        svc.record_human_direct_message(CHILD, channel="telegram")
        for watcher in (MANAGER, PEER, OTHER):
            assert len(svc.pending_notices(watcher)) == 1

    def test_the_actor_is_not_told_of_its_own_change(self, svc: SessionAwareness) -> None:
        """R-W5: a watcher whose key is the event's actorId is skipped, cursor untouched; the
        event still appears in a later changesSince."""
        spawn(svc)
        svc.open_session(PEER)
        svc.watch(PEER, CHILD)
        before = cursor(svc, MANAGER, CHILD)
        svc.record_goal_changed(CHILD, summary="goal updated", actor_type="agent", actor_id=MANAGER)
        assert svc.pending_notices(MANAGER) == []
        assert cursor(svc, MANAGER, CHILD) == before
        assert svc.pending_notices(PEER) == [notice(CHILD, 1)]
        assert sequences(svc, CHILD, 1) == [2]

    def test_log_only_kinds_move_no_cursor(self, svc: SessionAwareness) -> None:
        """R-L1: child_spawned, run_* and compacted notify no watcher."""
        spawn(svc)
        svc.record_run_terminal(CHILD, run_id="run-1", outcome="ok")
        svc.record_compacted(CHILD, operation_id="op-1")
        svc.record_child_spawned(CHILD + ":subagent:g", parent=CHILD, run_id="run-9")
        assert svc.pending_notices(MANAGER) == []
        assert cursor(svc, MANAGER, CHILD) == (1, 1, 1)


class TestCleanup:
    def test_resetting_the_watcher_removes_its_cursors_and_keeps_the_targets_history(
        self, svc: SessionAwareness
    ) -> None:
        """R-C1, R-W6: resetting W removes every cursor held by W; T's history is kept."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")
        svc.reset_session(MANAGER)
        assert svc.pending_notices(MANAGER) == []
        assert cursor(svc, MANAGER, CHILD) is None
        assert sequences(svc, CHILD) == [1, 2]

    def test_after_a_reset_the_parent_is_told_again_from_zero(self, svc: SessionAwareness) -> None:
        """R-W4, R-W6: a reset parent has no cursor; the next change creates one at L = 0."""
        spawn(svc)
        svc.reset_session(MANAGER)
        svc.record_goal_changed(CHILD, summary="goal created")
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 0)]

    def test_deleting_a_session_removes_its_cursors_both_ways_and_its_rows(
        self, svc: SessionAwareness
    ) -> None:
        """R-C2, R-W6: deleting removes cursors where it is watcher or target, and its rows."""
        spawn(svc)
        svc.open_session(OTHER)
        svc.watch(CHILD, OTHER)
        svc.record_goal_changed(OTHER, summary="goal created")
        svc.record_goal_changed(CHILD, summary="goal created")
        svc.delete_session(CHILD)
        assert svc.pending_notices(MANAGER) == []
        assert svc.pending_notices(CHILD) == []
        assert cursor(svc, CHILD, OTHER) is None
        with pytest.raises(UnknownSessionError):
            svc.session_status(CHILD, changes_since=0)
        svc.record_goal_changed(OTHER, summary="goal updated")
        assert svc.pending_notices(CHILD) == []

    def test_cursors_not_updated_for_thirty_days_expire(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-W6: prune removes cursors whose last update is older than 30 days."""
        spawn(svc)
        spawn(svc, child=OTHER, run="run-2")
        clock.advance(days=20)
        svc.record_goal_changed(OTHER, summary="goal created")
        clock.advance(days=10, seconds=1)
        result = svc.prune()
        assert result["expiredCursors"] == 1
        assert cursor(svc, MANAGER, CHILD) is None
        assert svc.pending_notices(MANAGER) == [notice(OTHER, 1)]

    def test_an_expired_parent_cursor_comes_back_from_zero(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-W4, R-W6: after expiry the parent is told again, its cursor recreated at L = 0."""
        spawn(svc)
        clock.advance(days=31)
        svc.prune()
        svc.record_goal_changed(CHILD, summary="goal created")
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 0)]
