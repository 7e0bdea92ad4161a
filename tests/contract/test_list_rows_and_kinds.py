"""One `sessions_list` row shape for every surface, refused kinds, and the kind `open_session`
infers (R-K2, R-K3, R-S5, R-T1), on both backends."""

from __future__ import annotations

import pytest

from session_awareness.application import InvalidArgumentError, SessionAwareness
from tests.conftest import FakeClock, ServiceFactory
from tests.contract.helpers import CHILD, MANAGER, spawn


class TestListRows:
    def test_rows_are_the_tools_rows_with_children_and_the_update_time(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-S5, R-T1: sessionKey, agentId, kind, label, parentSessionKey, childSessionKeys,
        updatedAt (ms), stateVersion only when > 0, the marks, and the run fields of a
        session that ran as a child, in the tool's key order."""
        spawn(svc)
        rows = {row["sessionKey"]: row for row in svc.sessions_list()}
        assert list(rows[CHILD]) == [
            "sessionKey", "agentId", "kind", "label", "parentSessionKey", "childSessionKeys",
            "updatedAt", "stateVersion", "pinned", "archived", "runStatus", "lastRunAborted",
        ]  # fmt: skip
        assert rows[MANAGER]["childSessionKeys"] == [CHILD]
        assert rows[CHILD]["childSessionKeys"] == []
        assert rows[CHILD]["updatedAt"] == int(clock().timestamp() * 1000)
        assert "stateVersion" not in rows[MANAGER]

    def test_a_signal_moves_the_update_time_to_when_it_was_recorded(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-S5: every signal moves its session's updatedAt, written with the signal's row
        (inline, and by the rebuild every contract test ends with)."""
        spawn(svc)
        later = clock.advance(minutes=5)
        svc.record_goal_changed(CHILD, summary="goal created")
        rows = {row["sessionKey"]: row for row in svc.sessions_list()}
        assert rows[CHILD]["updatedAt"] == int(later.timestamp() * 1000)

    def test_the_embedding_api_and_the_tool_give_the_same_rows(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-T1: under visibility `all`, `sessions_list()` and the tool agree row for row."""
        svc = open_svc(visibility="all")
        spawn(svc)
        svc.open_session("agent:ops:cron", kind="cron", label="nightly")
        tool = svc.tools.call("sessions_list", {}, caller=MANAGER)
        assert tool["sessions"] == svc.sessions_list()

    def test_a_bare_keys_children_are_its_own_agents(self, svc: SessionAwareness) -> None:
        """R-T1, R-T3: a bare parent key names its agent's session, so `worker` of agent
        `main` and `helper` and `worker` of agent `ops`, each under their own `global`, are
        listed each under its own parent; `children` and `descendants` answer per agent
        with `agent_id`, and for every agent's session of the key without it."""
        for agent in ("main", "ops"):
            svc.open_session("global", agent_id=agent)
            svc.open_session("worker", agent_id=agent, kind="other", parent="global")
        svc.open_session("helper", agent_id="ops", kind="other", parent="global")
        svc.open_session("helper", agent_id="main", kind="other")
        svc.open_session("deep", agent_id="ops", kind="other", parent="helper")
        rows = {(r["agentId"], r["sessionKey"]): r for r in svc.sessions_list()}
        assert rows["main", "global"]["childSessionKeys"] == ["worker"]
        assert rows["ops", "global"]["childSessionKeys"] == ["helper", "worker"]
        assert rows["main", "helper"]["childSessionKeys"] == []
        assert rows["ops", "helper"]["childSessionKeys"] == ["deep"]
        assert svc.children(["global"], agent_id="main") == {"global": ["worker"]}
        assert svc.children(["global"], agent_id="ops") == {"global": ["helper", "worker"]}
        assert svc.children(["global"]) == {"global": ["helper", "worker"]}
        assert svc.descendants("global", agent_id="main") == {"worker"}
        assert svc.descendants("global", agent_id="ops") == {"helper", "worker", "deep"}
        assert svc.descendants("helper", agent_id="main") == set()
        assert svc.descendants("global") == {"helper", "worker", "deep"}

    def test_search_matches_the_key_or_the_label(self, svc: SessionAwareness) -> None:
        """R-T1: `search` is a substring of the key or of the label, as in the tool."""
        spawn(svc)
        svc.open_session("agent:ops:cron", kind="cron", label="nightly")
        assert [r["sessionKey"] for r in svc.sessions_list(search="night")] == ["agent:ops:cron"]
        assert [r["sessionKey"] for r in svc.sessions_list(search="subagent")] == [CHILD]


class TestKinds:
    @pytest.mark.parametrize(
        ("kinds", "field"),
        [(["bogus"], "kinds.0"), (["main", "robot"], "kinds.1"), (["main", 3], "kinds.1"),
         ("main", "kinds")],
    )  # fmt: skip
    def test_an_unknown_kind_is_refused_naming_the_item(
        self, svc: SessionAwareness, kinds: object, field: str
    ) -> None:
        """R-K3: a kind outside the seven is an error naming it, never an empty list."""
        spawn(svc)
        with pytest.raises(InvalidArgumentError) as raised:
            svc.sessions_list(kinds=kinds)  # type: ignore[arg-type]
        assert raised.value.field == field
        assert "cron, group, hook, main, node, other, subagent" in str(raised.value)

    def test_without_a_kind_a_subagent_key_opens_a_subagent(self, svc: SessionAwareness) -> None:
        """R-K2: `open_session` infers `subagent` from a `:subagent:` segment, else `main`."""
        svc.open_session(CHILD)
        svc.open_session(MANAGER)
        kinds = {row["sessionKey"]: row["kind"] for row in svc.sessions_list()}
        assert kinds == {CHILD: "subagent", MANAGER: "main"}

    def test_a_kind_given_is_kept_even_on_a_subagent_key(self, svc: SessionAwareness) -> None:
        """An explicit kind wins over the inference."""
        svc.open_session(CHILD, kind="other")
        assert svc.sessions_list()[0]["kind"] == "other"
