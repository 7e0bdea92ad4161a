"""Notices: one, not many (R-N1–R-N7)."""

from __future__ import annotations

import pytest

from session_awareness.application import ConfigurationError, SessionAwareness, open_service
from tests.conftest import FakeClock, RecordingWaker, ServiceFactory
from tests.contract.helpers import CHILD, MANAGER, OTHER, PEER, cursor, notice, restart, spawn


class TestWorkedExample:
    def test_three_changes_give_one_notice_then_one_reopen_then_nothing(
        self, svc: SessionAwareness
    ) -> None:
        """R-N1–R-N7 worked example (R-N2, R-N3): 1 notice, drain, 1 reopen, drain, nothing."""
        assert spawn(svc) == 1
        assert cursor(svc, MANAGER, CHILD) == (1, 1, 1)
        assert svc.record_human_direct_message(CHILD, channel="telegram") == 2
        assert svc.record_goal_changed(CHILD, summary="goal updated", actor_type="human") == 3
        assert svc.record_human_direct_message(CHILD, channel="telegram") == 4

        assert svc.pending_notices(MANAGER) == [notice(CHILD, 1)]
        assert cursor(svc, MANAGER, CHILD) == (1, 2, 4)

        assert svc.drain_notices(MANAGER) == [notice(CHILD, 1)]
        assert cursor(svc, MANAGER, CHILD) == (2, 4, 4)
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 2)]

        assert svc.drain_notices(MANAGER) == [notice(CHILD, 2)]
        assert cursor(svc, MANAGER, CHILD) == (4, 4, 4)
        assert svc.drain_notices(MANAGER) == []
        assert svc.pending_notices(MANAGER) == []


class TestCoalescing:
    def test_twenty_rapid_changes_give_one_line(self, svc: SessionAwareness) -> None:
        """R-N2: while a notice is pending, further changes move only the material watermark."""
        spawn(svc)
        for _ in range(20):
            assert svc.record_human_direct_message(CHILD, channel="slack") is not None
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 1)]
        assert cursor(svc, MANAGER, CHILD) == (1, 2, 21)

    def test_the_notice_text_is_byte_stable_while_pending(self, svc: SessionAwareness) -> None:
        """R-N1: the pending notice's text does not change as more changes arrive."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="slack")
        first = svc.pending_notices(MANAGER)
        svc.record_goal_changed(CHILD, summary="goal cleared")
        assert svc.pending_notices(MANAGER) == first
        assert first[0].encode() == notice(CHILD, 1).encode()

    def test_draining_with_nothing_new_yields_nothing(self, svc: SessionAwareness) -> None:
        """R-N3: a drain acknowledges; draining twice with nothing new yields nothing."""
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal created")
        assert svc.drain_notices(MANAGER) == [notice(CHILD, 1)]
        assert svc.drain_notices(MANAGER) == []
        assert cursor(svc, MANAGER, CHILD) == (2, 2, 2)

    def test_a_change_after_the_drain_opens_a_fresh_notice_from_the_new_position(
        self, svc: SessionAwareness
    ) -> None:
        """R-N2, R-N3: once synced, the next change opens a new notice at the acknowledged L."""
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal created")
        svc.drain_notices(MANAGER)
        svc.record_goal_changed(CHILD, summary="goal updated")
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 2)]


class TestManyPairs:
    def test_every_pending_pair_keeps_its_one_notice_oldest_first(
        self, svc: SessionAwareness
    ) -> None:
        """R-N4: one pending notice per pair is durable state; none is lost however many."""
        targets = [f"agent:main:subagent:c{i:02d}" for i in range(40)]
        for index, target in enumerate(targets):
            spawn(svc, child=target, run=f"run-{index}")
        for target in reversed(targets):
            svc.record_human_direct_message(target, channel="telegram")
            svc.record_human_direct_message(target, channel="telegram")
        assert svc.pending_notices(MANAGER) == [notice(t, 1) for t in reversed(targets)]
        assert svc.drain_notices(MANAGER) == [notice(t, 1) for t in reversed(targets)]
        assert svc.pending_notices(MANAGER) == [notice(t, 2) for t in reversed(targets)]

    def test_pending_notices_of_one_watcher_do_not_leak_to_another(
        self, svc: SessionAwareness
    ) -> None:
        """R-N2: notices are per watcher; another watcher's pending state is its own."""
        spawn(svc)
        svc.open_session("agent:main:peer")
        assert svc.watch("agent:main:peer", CHILD)
        svc.record_goal_changed(CHILD, summary="goal created")
        svc.drain_notices(MANAGER)
        assert svc.pending_notices("agent:main:peer") == [notice(CHILD, 1)]
        assert svc.pending_notices(MANAGER) == []


class TestWakes:
    def test_a_main_session_watcher_is_woken_once_when_a_notice_opens(
        self, svc: SessionAwareness, waker: RecordingWaker
    ) -> None:
        """R-N5: a watcher that is not a sub-agent is woken immediately, once per notice."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")
        svc.record_human_direct_message(CHILD, channel="telegram")
        assert waker.woken == [MANAGER]

    def test_a_sub_agent_watcher_is_not_woken(
        self, svc: SessionAwareness, waker: RecordingWaker
    ) -> None:
        """R-N5: a sub-agent watcher sees the notice on its next turn, without a wake."""
        grandchild = "agent:main:subagent:child:subagent:grandchild"
        spawn(svc)
        svc.record_child_spawned(grandchild, parent=CHILD, run_id="run-2")
        svc.record_goal_changed(grandchild, summary="goal created", actor_type="human")
        assert svc.pending_notices(CHILD) == [notice(grandchild, 1)]
        assert waker.woken == []

    def test_a_reopened_notice_wakes_the_watcher_again(
        self, svc: SessionAwareness, waker: RecordingWaker, clock: FakeClock
    ) -> None:
        """R-N3, R-N5: the fresh notice opened by a drain is a new notice and wakes (once
        the coalescing window of the first wake has passed)."""
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal created")
        svc.record_goal_changed(CHILD, summary="goal updated")
        clock.advance(seconds=20)
        svc.drain_notices(MANAGER)
        assert waker.woken == [MANAGER, MANAGER]

    def test_wakes_coalesce_per_watcher_within_the_window(
        self, svc: SessionAwareness, waker: RecordingWaker, clock: FakeClock
    ) -> None:
        """R-N5: at most one wake per watcher per 20 s of the service clock; the notices
        themselves are unchanged."""
        spawn(svc)
        spawn(svc, child=OTHER, run="run-2")
        svc.record_goal_changed(CHILD, summary="goal created")
        clock.advance(seconds=19)
        svc.record_goal_changed(OTHER, summary="goal created")
        assert waker.woken == [MANAGER]
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 1), notice(OTHER, 1)]
        clock.advance(seconds=1)
        svc.drain_notices(MANAGER)
        svc.record_goal_changed(CHILD, summary="goal updated")
        assert waker.woken == [MANAGER, MANAGER]

    def test_each_watcher_has_its_own_window_and_zero_turns_coalescing_off(
        self, open_svc: ServiceFactory, waker: RecordingWaker
    ) -> None:
        """R-N5: `wake_coalesce_seconds=0` wakes every time; windows are per watcher."""
        svc = open_svc(wake_coalesce_seconds=0)
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal created")
        svc.drain_notices(MANAGER)
        svc.record_goal_changed(CHILD, summary="goal updated")
        svc.open_session(PEER)
        svc.watch(PEER, CHILD)
        svc.record_goal_changed(CHILD, summary="goal status changed to done")
        assert waker.woken == [MANAGER, MANAGER, PEER]

    def test_a_bad_coalescing_window_is_refused(self, database_url: str) -> None:
        for bad in (-1, float("nan"), float("inf"), True, "20"):
            with pytest.raises(ConfigurationError):
                open_service(database_url, wake_coalesce_seconds=bad)  # type: ignore[arg-type]

    def test_a_failing_waker_does_not_undo_the_recording(self, open_svc: ServiceFactory) -> None:
        """R-L8, R-N5: a host waker that raises is logged; the signal and notice stay."""

        def broken(_: str) -> None:
            raise RuntimeError("host is down")

        svc = open_svc(waker=broken)
        spawn(svc)
        assert svc.record_goal_changed(CHILD, summary="goal created") == 2
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 1)]


class TestRestart:
    def test_a_pending_notice_survives_a_restart_exactly_once(
        self, open_svc: ServiceFactory, waker: RecordingWaker
    ) -> None:
        """R-N6: after close and reopen of the same file the notice is there once, and the
        startup sweep wakes its watcher once."""
        svc = open_svc()
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")
        svc.close()
        waker.woken.clear()

        again = restart(open_svc)
        assert again.pending_notices(MANAGER) == [notice(CHILD, 1)]
        assert waker.woken == [MANAGER]
        assert again.drain_notices(MANAGER) == [notice(CHILD, 1)]
        assert again.pending_notices(MANAGER) == []

    def test_a_re_delivered_notice_drains_up_to_its_material_mark(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-N6, R-N3: the worked example's notice pending over a restart: the start-up sweep
        re-delivers it with N raised to M, so its drain acknowledges 2, 3 and 4 at once and
        no follow-up notice opens for what its page already covered (as the reference)."""
        svc = open_svc()
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2: opens
        svc.record_goal_changed(CHILD, summary="goal updated", actor_type="human")  # 3
        svc.record_human_direct_message(CHILD, channel="telegram")  # 4
        assert cursor(svc, MANAGER, CHILD) == (1, 2, 4)
        svc.close()

        again = restart(open_svc)
        assert cursor(again, MANAGER, CHILD) == (1, 4, 4)
        assert again.pending_notices(MANAGER) == [notice(CHILD, 1)]
        assert again.drain_notices(MANAGER) == [notice(CHILD, 1)]
        assert cursor(again, MANAGER, CHILD) == (4, 4, 4)
        assert again.pending_notices(MANAGER) == []
        assert again.drain_notices(MANAGER) == []
        report = again.audit()
        assert report.clean, report.as_dict()

    def test_material_after_the_re_delivery_still_gets_one_follow_up(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-N6, R-N2, R-N3: only what the sweep found is covered; a change after it is the
        remainder the drain reopens for, once."""
        svc = open_svc()
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2: opens
        svc.record_human_direct_message(CHILD, channel="telegram")  # 3
        svc.close()
        again = restart(open_svc)
        again.record_goal_changed(CHILD, summary="goal updated", actor_type="human")  # 4
        assert again.drain_notices(MANAGER) == [notice(CHILD, 1)]
        assert cursor(again, MANAGER, CHILD) == (3, 4, 4)
        assert again.drain_notices(MANAGER) == [notice(CHILD, 3)]
        assert again.drain_notices(MANAGER) == []
        assert again.audit().clean

    def test_a_drained_notice_reopened_before_the_restart_is_re_delivered_too(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-N6, R-N3: a notice a drain reopened (its positions on the watcher's drains, ADR
        024) is re-delivered like one a record opened, its L kept."""
        svc = open_svc()
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2: opens
        svc.record_human_direct_message(CHILD, channel="telegram")  # 3
        svc.drain_notices(MANAGER)  # L = 2, reopened at 3
        svc.record_human_direct_message(CHILD, channel="telegram")  # 4
        svc.close()
        again = restart(open_svc)
        assert cursor(again, MANAGER, CHILD) == (2, 4, 4)
        assert again.drain_notices(MANAGER) == [notice(CHILD, 2)]
        assert again.pending_notices(MANAGER) == []
        assert again.audit().clean

    def test_a_second_restart_stores_nothing_more(self, open_svc: ServiceFactory) -> None:
        """R-N6: the re-delivery is one event per watcher, once; a restart that finds N = M
        stores nothing, and an idle watcher's notice is not duplicated."""
        svc = open_svc()
        spawn(svc)
        spawn(svc, child=OTHER, run="run-2")
        for target in (CHILD, OTHER, CHILD, OTHER):
            svc.record_human_direct_message(target, channel="telegram")
        svc.close()
        again = restart(open_svc)
        stored = again.store.recorder.max_notification_id()
        again.close()
        third = restart(open_svc)
        assert third.store.recorder.max_notification_id() == stored
        assert third.pending_notices(MANAGER) == [notice(CHILD, 1), notice(OTHER, 1)]
        assert [cursor(third, MANAGER, t) for t in (CHILD, OTHER)] == [(1, 3, 3), (1, 3, 3)]

    def test_the_sweep_wakes_each_watcher_once_and_skips_sub_agents(
        self, svc: SessionAwareness, waker: RecordingWaker
    ) -> None:
        """R-N6: a sweep wakes every non-sub-agent watcher with pending notices, once."""
        spawn(svc)
        spawn(svc, child=OTHER, run="run-2")
        svc.record_child_spawned("agent:main:subagent:child:subagent:g", parent=CHILD, run_id="r3")
        for target in (CHILD, OTHER, "agent:main:subagent:child:subagent:g"):
            svc.record_goal_changed(target, summary="goal created", actor_type="human")
        waker.woken.clear()
        assert svc.sweep() == 1
        assert waker.woken == [MANAGER]

    def test_the_sweep_skips_watchers_whose_session_was_deleted(
        self, svc: SessionAwareness, waker: RecordingWaker
    ) -> None:
        """R-N6: pairs whose watcher session no longer exists are skipped."""
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal created")
        svc.delete_session(MANAGER)
        waker.woken.clear()
        assert svc.sweep() == 0
        assert waker.woken == []
