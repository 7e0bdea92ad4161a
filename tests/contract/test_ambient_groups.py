"""Ambient group watches: a human turn on a group makes the agent's main session aware of it,
quietly (R-W7, with R-L6, R-N5, R-N6, R-W6)."""

from __future__ import annotations

import pytest

from session_awareness.application import ConfigurationError, SessionAwareness, open_service
from session_awareness.testing import RecordingWaker
from tests.conftest import FakeClock, ServiceFactory
from tests.contract.helpers import CHILD, MANAGER, cursor, notice, sequences, spawn

TEAM = "agent:main:team"


def group(svc: SessionAwareness, key: str = TEAM, **options: object) -> str:
    svc.open_session(key, kind="group", **options)  # type: ignore[arg-type]
    return key


def kinds_of_cursor(svc: SessionAwareness, watcher: str, target: str) -> list[str]:
    """The `via` of every activation of the pair in the target's history, oldest first."""
    return [
        entry.get("via", entry["event"])
        for entry in svc.history(target)
        if entry.get("watcher") == watcher
        and entry["event"] in ("cursor_registered", "cursor_seeded", "cursor_promoted")
    ]


class TestTheGrant:
    def test_a_human_turn_on_a_group_gives_main_one_quiet_notice(
        self, svc: SessionAwareness, waker: RecordingWaker
    ) -> None:
        """R-W7, R-L6: the turn on a group without parent or watcher is recorded, because
        main first gets an ambient cursor at the group's head; one notice, no wake."""
        group(svc)
        svc.record_goal_changed(TEAM, summary="goal created")  # not a human turn: no grant
        assert cursor(svc, MANAGER, TEAM) is None
        assert svc.record_human_direct_message(TEAM, channel="slack") == 2
        assert cursor(svc, MANAGER, TEAM) == (1, 2, 2)
        assert svc.pending_notices(MANAGER) == [notice(TEAM, 1)]
        assert waker.woken == []

    def test_further_turns_coalesce_into_the_same_notice_and_never_wake(
        self, svc: SessionAwareness, waker: RecordingWaker
    ) -> None:
        """R-W7, R-N2, R-N3: the ambient cursor is an ordinary cursor that never wakes, not
        when a notice opens, nor when a drain reopens one."""
        group(svc)
        for _ in range(3):
            svc.record_human_direct_message(TEAM, channel="slack")
        assert svc.pending_notices(MANAGER) == [notice(TEAM, 0)]
        assert svc.drain_notices(MANAGER) == [notice(TEAM, 0)]
        assert svc.pending_notices(MANAGER) == [notice(TEAM, 1)]  # reopened for 2..3
        assert svc.drain_notices(MANAGER) == [notice(TEAM, 1)]
        svc.record_human_direct_message(TEAM, channel="slack")
        assert svc.pending_notices(MANAGER) == [notice(TEAM, 3)]
        assert waker.woken == []
        assert kinds_of_cursor(svc, MANAGER, TEAM) == ["ambient"]

    def test_the_main_key_is_configurable(self, open_svc: ServiceFactory) -> None:
        """R-W7: `main_key` names the agent's main session, `agent:<agentId>:<main_key>`."""
        svc = open_svc(main_key="lobby")
        group(svc, "agent:ops:team")
        svc.open_session("agent:ops:main")
        assert svc.record_human_direct_message("agent:ops:team", channel="slack") == 1
        assert svc.pending_notices("agent:ops:lobby") == [notice("agent:ops:team", 0)]
        assert svc.pending_notices("agent:ops:main") == []

    def test_a_bare_key_group_makes_its_own_agents_main_aware(self, svc: SessionAwareness) -> None:
        """R-W7, R-W3: a bare-key group belongs to one agent, whose main may watch it."""
        svc.open_session("team", agent_id="ops", kind="group")
        svc.open_session(MANAGER)
        assert svc.record_human_direct_message("team", agent_id="ops", channel="slack") == 1
        assert svc.pending_notices("agent:ops:main") == [notice("team", 0)]
        assert svc.pending_notices(MANAGER) == []

    def test_turned_off_a_group_turn_without_audience_records_nothing(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-W7, R-L6: with `ambient_groups=False` the gate is the plain one."""
        svc = open_svc(ambient_groups=False)
        group(svc)
        assert svc.record_human_direct_message(TEAM, channel="slack") is None
        assert cursor(svc, MANAGER, TEAM) is None
        assert sequences(svc, TEAM) == []

    @pytest.mark.parametrize("kind", ["main", "cron", "hook", "node", "subagent", "other"])
    def test_sessions_of_other_kinds_are_not_made_ambient(
        self, svc: SessionAwareness, kind: str
    ) -> None:
        """R-W7: only `group` sessions; a turn elsewhere without audience records nothing."""
        svc.open_session("agent:main:elsewhere", kind=kind)
        svc.open_session(MANAGER)
        assert svc.record_human_direct_message("agent:main:elsewhere", channel="x") is None
        assert svc.pending_notices(MANAGER) == []

    def test_a_group_that_is_the_main_session_gets_no_cursor_on_itself(
        self, svc: SessionAwareness
    ) -> None:
        """R-W7, R-W3: the main session of kind group is not its own watcher."""
        group(svc, MANAGER)
        assert svc.record_human_direct_message(MANAGER, channel="slack") is None
        assert svc.read_model.cursors_on_target(svc.resolve(MANAGER).session_id) == []


class TestTheMainSession:
    def test_a_main_session_not_opened_yet_gets_the_cursor(self, svc: SessionAwareness) -> None:
        """R-W7, R-W4: like a parent without a session, main may hold a cursor before it
        is opened; its notice waits for it."""
        group(svc)
        svc.record_human_direct_message(TEAM, channel="slack")
        svc.open_session(MANAGER)
        assert svc.drain_notices(MANAGER) == [notice(TEAM, 0)]

    def test_a_deleted_main_session_gets_no_cursor(self, svc: SessionAwareness) -> None:
        """R-W7, R-N6: a watcher that is gone is not made aware again."""
        svc.open_session(MANAGER)
        svc.delete_session(MANAGER)
        group(svc)
        assert svc.record_human_direct_message(TEAM, channel="slack") is None
        assert cursor(svc, MANAGER, TEAM) is None

    def test_resetting_main_removes_the_ambient_cursor_until_the_next_turn(
        self, svc: SessionAwareness
    ) -> None:
        """R-W6, R-W7: a reset removes every cursor main holds; the next turn grants anew."""
        svc.open_session(MANAGER)
        group(svc)
        svc.record_human_direct_message(TEAM, channel="slack")
        svc.reset_session(MANAGER)
        assert svc.pending_notices(MANAGER) == []
        assert svc.record_human_direct_message(TEAM, channel="slack") == 2
        assert svc.pending_notices(MANAGER) == [notice(TEAM, 1)]


class TestPromotion:
    def test_an_explicit_watch_promotes_the_cursor_and_keeps_its_notice(
        self, svc: SessionAwareness, waker: RecordingWaker
    ) -> None:
        """R-W7, R-W2: watching the pair makes it explicit for good: the pending notice
        survives, and from then on its notices wake."""
        svc.open_session(MANAGER)
        group(svc)
        svc.record_human_direct_message(TEAM, channel="slack")
        assert svc.watch(MANAGER, TEAM) is True
        assert svc.pending_notices(MANAGER) == [notice(TEAM, 0)]
        assert waker.woken == []
        svc.record_human_direct_message(TEAM, channel="slack")
        assert svc.drain_notices(MANAGER) == [notice(TEAM, 0)]  # reopened for #2: a wake
        assert waker.woken == [MANAGER]
        assert kinds_of_cursor(svc, MANAGER, TEAM) == ["ambient", "watch"]

    def test_a_promoted_cursor_is_never_downgraded_by_later_turns(
        self, open_svc: ServiceFactory, waker: RecordingWaker
    ) -> None:
        """R-W7: a later turn finds an active explicit cursor and leaves it explicit."""
        svc = open_svc(wake_coalesce_seconds=0)
        group(svc)
        svc.record_human_direct_message(TEAM, channel="slack")
        svc.watch(MANAGER, TEAM)
        svc.drain_notices(MANAGER)
        svc.record_human_direct_message(TEAM, channel="slack")
        assert waker.woken == [MANAGER]
        assert kinds_of_cursor(svc, MANAGER, TEAM) == ["ambient", "watch"]

    def test_an_explicit_watch_first_is_never_made_ambient(
        self, svc: SessionAwareness, waker: RecordingWaker
    ) -> None:
        """R-W7, R-W2: main already watching the group keeps its cursor, which wakes."""
        group(svc)
        svc.open_session(MANAGER)
        svc.watch(MANAGER, TEAM)
        svc.record_human_direct_message(TEAM, channel="slack")
        assert waker.woken == [MANAGER]
        assert kinds_of_cursor(svc, MANAGER, TEAM) == ["watch"]

    def test_a_group_main_spawned_keeps_its_spawn_cursor(
        self, svc: SessionAwareness, waker: RecordingWaker
    ) -> None:
        """R-W7, R-W1: the parent's spawn cursor is active, so nothing ambient is granted."""
        spawn(svc)
        svc.open_session(CHILD, kind="group")
        svc.record_human_direct_message(CHILD, channel="slack")
        assert waker.woken == [MANAGER]
        assert kinds_of_cursor(svc, MANAGER, CHILD) == ["spawn"]


class TestExpiryAndRestart:
    def test_an_idle_ambient_cursor_expires_and_a_later_turn_grants_it_at_the_head(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-W6, R-W7: ambient cursors expire after 30 idle days like any other."""
        group(svc)
        svc.open_session(MANAGER)
        svc.record_human_direct_message(TEAM, channel="slack")
        clock.advance(days=31)
        assert svc.prune()["expiredCursors"] == 1
        assert svc.pending_notices(MANAGER) == []
        assert svc.record_human_direct_message(TEAM, channel="slack") == 2
        assert svc.pending_notices(MANAGER) == [notice(TEAM, 1)]

    def test_the_startup_sweep_keeps_ambient_notices_without_waking(
        self, open_svc: ServiceFactory, waker: RecordingWaker
    ) -> None:
        """R-N6, R-W7: after a restart the ambient notice is still pending, once, and the
        sweep wakes nobody for it."""
        svc = open_svc()
        svc.open_session(MANAGER)
        group(svc)
        svc.record_human_direct_message(TEAM, channel="slack")
        svc.close()
        again = open_svc()
        assert waker.woken == []
        assert again.sweep() == 0
        assert again.pending_notices(MANAGER) == [notice(TEAM, 0)]

    def test_the_sweep_wakes_a_watcher_that_also_has_an_explicit_notice(
        self, svc: SessionAwareness, waker: RecordingWaker
    ) -> None:
        """R-N6, R-W7: an ambient notice beside a spawn cursor's does not stop that wake."""
        group(svc)
        svc.record_human_direct_message(TEAM, channel="slack")
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal created")
        waker.woken.clear()
        assert svc.sweep() == 1
        assert waker.woken == [MANAGER]
        assert svc.pending_notices(MANAGER) == [notice(TEAM, 0), notice(CHILD, 1)]


class TestHistory:
    def test_history_shows_the_ambient_grant_and_the_promotion(self, svc: SessionAwareness) -> None:
        """R-W7: the audit trail of the group names the grant and the promotion."""
        group(svc)
        svc.record_human_direct_message(TEAM, channel="slack")
        svc.watch(MANAGER, TEAM)
        cursor_events = [
            (entry["event"], entry.get("via"))
            for entry in svc.history(TEAM)
            if entry.get("watcher") == MANAGER and entry["event"] != "watcher_added"
        ]
        assert cursor_events == [
            ("cursor_registered", "ambient"),
            ("notice_opened", None),
            ("cursor_promoted", "watch"),
        ]


class TestConfiguration:
    @pytest.mark.parametrize("main_key", ["", "a:b", " main", 'ma"in', 7])
    def test_a_main_key_that_cannot_name_a_session_is_refused(self, main_key: object) -> None:
        """R-W7: `main_key` is one key segment; anything else is a ConfigurationError."""
        with pytest.raises(ConfigurationError, match="main_key"):
            open_service("sqlite:///:memory:", main_key=main_key)  # type: ignore[arg-type]

    def test_ambient_groups_must_be_a_boolean(self) -> None:
        with pytest.raises(ConfigurationError, match="ambient_groups"):
            open_service("sqlite:///:memory:", ambient_groups="yes")  # type: ignore[arg-type]
