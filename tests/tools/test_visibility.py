"""Visibility: what a caller's tools may see, and invisible reads as unknown (SPEC R-T2)."""

from __future__ import annotations

import pytest

from session_awareness.application import SessionAwareness
from tests.tools.conftest import WorldFactory
from tests.tools.helpers import HELPER, MAIN, OPS, PEER, WORKER, error, unknown

SEEN_BY_MAIN = {
    "self": [MAIN],
    "tree": [HELPER, WORKER, MAIN],
    "agent": [PEER, HELPER, WORKER, MAIN],
    "all": [OPS, PEER, HELPER, WORKER, MAIN],
}


def listed(svc: SessionAwareness, caller: str, **arguments: object) -> list[str]:
    answer = svc.tools.call("sessions_list", dict(arguments), caller=caller)
    return [row["sessionKey"] for row in answer["sessions"]]


class TestVisibility:
    @pytest.mark.parametrize(("mode", "keys"), SEEN_BY_MAIN.items())
    def test_each_mode_lists_exactly_what_the_caller_may_see(
        self, open_world: WorldFactory, mode: str, keys: list[str]
    ) -> None:
        """R-T2: self, tree (transitively spawned), agent and all scope sessions_list."""
        svc = open_world(visibility=mode)
        assert listed(svc, MAIN) == keys
        assert svc.tools.call("sessions_list", {}, caller=MAIN)["visibility"] == mode

    def test_the_tree_is_the_caller_and_what_it_spawned_not_its_parent(
        self, world: SessionAwareness
    ) -> None:
        """R-T2: a worker sees itself and its own child, not the manager that spawned it."""
        assert listed(world, WORKER) == [HELPER, WORKER]
        assert world.tools.call("session_status", {"sessionKey": MAIN}, caller=WORKER) == (
            unknown(MAIN)
        )

    def test_children_outside_the_callers_view_are_left_out_of_a_row(
        self, open_world: WorldFactory
    ) -> None:
        """R-T2: under self, the caller's row names no child it may not see."""
        svc = open_world(visibility="self")
        answer = svc.tools.call("sessions_list", {}, caller=MAIN)
        assert answer["sessions"][0]["childSessionKeys"] == []

    def test_an_agent_filter_cannot_widen_the_agent_view(self, open_world: WorldFactory) -> None:
        """R-T2: under agent, asking for another agent's sessions lists nothing."""
        svc = open_world(visibility="agent")
        assert listed(svc, MAIN, agentId="ops") == []
        assert listed(svc, MAIN, agentId="main") == SEEN_BY_MAIN["agent"]

    @pytest.mark.parametrize("tool", ["session_status", "sessions_send"])
    def test_an_invisible_session_reads_exactly_like_a_deleted_one(
        self, world: SessionAwareness, tool: str
    ) -> None:
        """R-T2: a session outside the caller's visibility is reported like an unknown one."""
        arguments = {"sessionKey": PEER, "message": "hi"} if tool == "sessions_send" else {}
        arguments.setdefault("sessionKey", PEER)
        invisible = world.tools.call(tool, arguments, caller=MAIN)
        world.delete_session(PEER)
        gone = world.tools.call(tool, arguments, caller=MAIN)
        never = world.tools.call(
            tool, {**arguments, "sessionKey": "agent:main:nobody"}, caller=MAIN
        )
        assert invisible == gone == unknown(PEER)
        assert never == unknown("agent:main:nobody")

    def test_an_invisible_label_reads_exactly_like_an_unknown_label(
        self, world: SessionAwareness
    ) -> None:
        """R-T2: a label held only by invisible sessions is unknown, not a hint."""
        arguments = {"label": "peer", "message": "hi"}
        invisible = world.tools.call("sessions_send", arguments, caller=MAIN)
        world.delete_session(PEER)
        gone = world.tools.call("sessions_send", arguments, caller=MAIN)
        assert invisible == gone == error("unknown_session", "Unknown label: peer", "label")

    def test_the_tree_needs_no_session_for_the_caller(self, world: SessionAwareness) -> None:
        """R-T2: a caller that was never opened still sees the sessions it spawned."""
        ghost, child = "agent:main:ghost", "agent:main:subagent:ghost-child"
        world.record_child_spawned(child, parent=ghost, run_id="run-g")
        assert listed(world, ghost) == [child]
        answer = world.tools.call("session_status", {"sessionKey": child}, caller=ghost)
        assert answer == {"sessionKey": child, "stateVersion": 1}

    def test_the_agent_view_needs_no_session_for_the_caller(self, open_world: WorldFactory) -> None:
        """R-T2: under agent, a caller that was never opened sees its agent's sessions."""
        svc = open_world(visibility="agent")
        assert listed(svc, "agent:main:ghost") == SEEN_BY_MAIN["agent"]
        answer = svc.tools.call("session_status", {"sessionKey": PEER}, caller="agent:main:ghost")
        assert answer == {"sessionKey": PEER, "stateVersion": 0}

    def test_under_self_the_caller_sees_its_own_status(self, open_world: WorldFactory) -> None:
        """R-T2: self is only the caller; "current" names it."""
        svc = open_world(visibility="self")
        assert svc.tools.call("session_status", {}, caller=WORKER) == {
            "sessionKey": WORKER,
            "stateVersion": 1,
        }
        assert svc.tools.call("session_status", {"sessionKey": HELPER}, caller=WORKER) == (
            unknown(HELPER)
        )
