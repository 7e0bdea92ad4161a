"""Visibility: what a caller's tools may see, and invisible reads as unknown (R-T2)."""

from __future__ import annotations

import pytest

from session_awareness.application import SessionAwareness
from tests.tools.conftest import WorldFactory
from tests.tools.helpers import HELPER, MAIN, OPS, PEER, WORKER, error, note, unknown

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
        answer = svc.tools.call("sessions_list", {}, caller=MAIN)
        assert answer.get("visibility") == (None if mode == "all" else note(mode))

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


TEAM = "agent:main:team"  # a same-agent group
OPS_TEAM = "agent:ops:team"  # another agent's group
CRON = "agent:main:nightly"


class TestWatchedGroupsInTheTree:
    def test_a_watched_same_agent_group_is_readable_under_tree(
        self, world: SessionAwareness
    ) -> None:
        """R-T2: tree reads include the same-agent group sessions the caller watches."""
        world.open_session(TEAM, kind="group", label="team")
        assert world.tools.call("session_status", {"sessionKey": TEAM}, caller=MAIN) == (
            unknown(TEAM)
        )
        assert world.watch(MAIN, TEAM)
        assert world.tools.call("session_status", {"sessionKey": TEAM}, caller=MAIN) == {
            "sessionKey": TEAM,
            "stateVersion": 0,
        }
        assert TEAM in listed(world, MAIN)

    def test_a_watched_group_is_read_not_sent_to(self, world: SessionAwareness) -> None:
        """R-T2: "reads include": sending to a watched group stays outside the tree."""
        world.open_session(TEAM, kind="group")
        world.watch(MAIN, TEAM)
        answer = world.tools.call("sessions_send", {"sessionKey": TEAM, "message": "hi"},
                                  caller=MAIN)  # fmt: skip
        assert answer == unknown(TEAM)

    def test_watched_sessions_that_are_not_same_agent_groups_stay_hidden(
        self, world: SessionAwareness
    ) -> None:
        """R-T2: another agent's group, or a watched session of another kind, is not added."""
        world.open_session(OPS_TEAM, kind="group")
        world.open_session(CRON, kind="cron")
        assert world.watch(MAIN, OPS_TEAM) and world.watch(MAIN, CRON)
        for key in (OPS_TEAM, CRON):
            answer = world.tools.call("session_status", {"sessionKey": key}, caller=MAIN)
            assert answer == unknown(key)
        assert listed(world, MAIN) == SEEN_BY_MAIN["tree"]

    def test_an_unwatched_group_leaves_the_tree_again(self, world: SessionAwareness) -> None:
        """R-T2, R-W6: the group is readable while the cursor exists."""
        world.open_session(TEAM, kind="group")
        world.watch(MAIN, TEAM)
        world.unwatch(MAIN, TEAM)
        answer = world.tools.call("session_status", {"sessionKey": TEAM}, caller=MAIN)
        assert answer == unknown(TEAM)


class TestSandboxedSessions:
    @pytest.mark.parametrize("mode", ["agent", "all"])
    def test_a_sandboxed_caller_is_clamped_to_its_tree(
        self, open_world: WorldFactory, mode: str
    ) -> None:
        """R-T2: whatever the configured level, a sandboxed session sees its tree."""
        svc = open_world(visibility=mode)
        svc.open_session(MAIN, sandboxed=True)
        answer = svc.tools.call("sessions_list", {}, caller=MAIN)
        assert {row["sessionKey"] for row in answer["sessions"]} == set(SEEN_BY_MAIN["tree"])
        assert answer["visibility"] == note("tree")
        assert svc.tools.call("session_status", {"sessionKey": PEER}, caller=MAIN) == (
            unknown(PEER)
        )

    def test_a_sandboxed_caller_under_self_stays_self(self, open_world: WorldFactory) -> None:
        """R-T2: the clamp only ever narrows."""
        svc = open_world(visibility="self")
        svc.open_session(MAIN, sandboxed=True)
        assert set(listed(svc, MAIN)) == set(SEEN_BY_MAIN["self"])

    def test_other_sessions_keep_the_configured_level(self, open_world: WorldFactory) -> None:
        """R-T2: the mark is per session: an unsandboxed caller sees what the mode allows."""
        svc = open_world(visibility="agent")
        svc.open_session(MAIN, sandboxed=True)
        assert set(listed(svc, PEER)) == set(SEEN_BY_MAIN["agent"])


class TestBareKeysInTools:
    def test_a_bare_key_resolves_within_the_callers_agent(self, open_world: WorldFactory) -> None:
        """R-T2, R-W3: `global` of two agents is never ambiguous to an agent: it is its own
        agent's, unless `agentId` names another its visibility spans."""
        svc = open_world(visibility="all")
        svc.open_session("global", agent_id="main")
        svc.open_session("global", agent_id="ops")
        svc.record_goal_changed("global", summary="goal created", agent_id="ops")
        mine = svc.tools.call("session_status", {"sessionKey": "global"}, caller=MAIN)
        theirs = svc.tools.call("session_status", {"sessionKey": "global", "agentId": "ops"},
                                caller=MAIN)  # fmt: skip
        assert mine == {"sessionKey": "global", "stateVersion": 0}
        assert theirs == {"sessionKey": "global", "stateVersion": 1}
        assert svc.tools.call("session_status", {"sessionKey": "global"}, caller=OPS) == theirs

    def test_an_agent_id_outside_the_view_reads_as_unknown(self, world: SessionAwareness) -> None:
        """R-T2: under tree, another agent's bare session is unknown, like a missing one."""
        world.open_session("global", agent_id="ops")
        answer = world.tools.call("session_status", {"sessionKey": "global", "agentId": "ops"},
                                  caller=MAIN)  # fmt: skip
        assert answer == unknown("global")

    def test_an_agent_id_contradicting_a_qualified_key_reads_as_unknown(
        self, open_world: WorldFactory
    ) -> None:
        """R-T2: `agentId` never re-homes a qualified key."""
        svc = open_world(visibility="all")
        answer = svc.tools.call("session_status", {"sessionKey": OPS, "agentId": "main"},
                                caller=MAIN)  # fmt: skip
        assert answer == unknown(OPS)

    def test_sending_to_a_bare_key_watches_the_callers_own_agents_session(
        self, open_world: WorldFactory
    ) -> None:
        """R-W2, R-W3: the watch lands on the session the key named for the caller."""
        svc = open_world(visibility="all")
        svc.open_session("global", agent_id="main")
        svc.open_session("global", agent_id="ops")
        answer = svc.tools.call(
            "sessions_send", {"sessionKey": "global", "message": "hi", "watch": True}, caller=MAIN
        )
        assert answer == {"status": "accepted", "sessionKey": "global", "watched": True}
        svc.record_goal_changed("global", summary="goal created", agent_id="ops")
        assert svc.pending_notices(MAIN) == []
        svc.record_goal_changed("global", summary="goal created", agent_id="main")
        assert len(svc.pending_notices(MAIN)) == 1

    def test_a_bare_child_in_the_tree_is_that_agents_session_only(
        self, world: SessionAwareness
    ) -> None:
        """R-T2: MAIN spawned `global` of ops; under tree it sees that one, named with its
        agentId, and not `global` of its own agent, which it did not spawn."""
        world.open_session("global", agent_id="main")
        world.record_child_spawned("global", parent=MAIN, run_id="r", agent_id="ops")
        theirs = world.tools.call("session_status", {"sessionKey": "global", "agentId": "ops"},
                                  caller=MAIN)  # fmt: skip
        assert theirs == {"sessionKey": "global", "stateVersion": 1}
        mine = world.tools.call("session_status", {"sessionKey": "global"}, caller=MAIN)
        assert mine == unknown("global")
        rows = world.tools.call("sessions_list", {}, caller=MAIN)["sessions"]
        assert [(r["agentId"], r["sessionKey"]) for r in rows if r["sessionKey"] == "global"] == [
            ("ops", "global")
        ]

    @pytest.mark.parametrize("mode", ["tree", "agent"])
    def test_another_agents_sessions_of_the_same_bare_keys_leave_a_row_unchanged(
        self, open_world: WorldFactory, mode: str
    ) -> None:
        """R-T2: a row's children are its own session's, matched by (agent, key): ops's
        `global`, `worker` and `helper`, invisible to MAIN, neither add a child (`helper`,
        whose `main` namesake has no parent), nor repeat one (`worker`), so the row reads as
        if they did not exist."""

        svc = open_world(visibility=mode)
        svc.open_session("global", agent_id="main", kind="other", parent=MAIN)
        svc.open_session("worker", agent_id="main", kind="other", parent="global")
        svc.open_session("helper", agent_id="main", kind="other", parent=MAIN)

        def global_rows() -> list[dict[str, object]]:
            answer = svc.tools.call("sessions_list", {"search": "global"}, caller=MAIN)
            return [row for row in answer["sessions"] if row["sessionKey"] == "global"]

        alone = global_rows()
        assert [row["childSessionKeys"] for row in alone] == [["worker"]]
        svc.open_session("global", agent_id="ops", kind="main")
        svc.open_session("worker", agent_id="ops", kind="other", parent="global")
        svc.open_session("helper", agent_id="ops", kind="other", parent="global")
        assert global_rows() == alone


class TestAmbientGroupsInTheTree:
    def test_a_group_main_is_made_aware_of_is_readable_under_tree(
        self, world: SessionAwareness
    ) -> None:
        """R-T2, R-W7: the ambient cursor a group's human turn gives main counts as a watch:
        the group is read (status, list) from main, as an explicitly watched one is."""
        world.open_session(TEAM, kind="group")
        assert world.tools.call("session_status", {"sessionKey": TEAM}, caller=MAIN) == (
            unknown(TEAM)
        )
        assert world.record_human_direct_message(TEAM, channel="slack") == 1
        assert world.tools.call("session_status", {"sessionKey": TEAM}, caller=MAIN) == {
            "sessionKey": TEAM,
            "stateVersion": 1,
        }
        assert TEAM in listed(world, MAIN)
        answer = world.tools.call("session_status", {"sessionKey": TEAM}, caller=PEER)
        assert answer == unknown(TEAM)

    def test_without_ambient_groups_the_group_stays_unknown_to_main(
        self, open_world: WorldFactory
    ) -> None:
        """R-T2, R-W7: turned off, a group main does not watch stays outside its tree."""
        svc = open_world(ambient_groups=False)
        svc.open_session(TEAM, kind="group")
        svc.record_human_direct_message(TEAM, channel="slack")
        assert svc.tools.call("session_status", {"sessionKey": TEAM}, caller=MAIN) == (
            unknown(TEAM)
        )
        assert TEAM not in listed(svc, MAIN)
