"""Parents through the embedding API, on every backend: no cycle, no re-parenting, the host's
word on an open session applied, and bare keys watched only within their agent
(R-T3, R-K3, R-W1, R-W3, R-W4)."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from session_awareness.application import InvalidArgumentError, SessionAwareness
from tests.conftest import ServiceFactory
from tests.contract.helpers import CHILD, MANAGER, OTHER, cursor, spawn

GRANDCHILD = "agent:main:subagent:grandchild"


def parent_of(svc: SessionAwareness, key: str, agent_id: str | None = None) -> str | None:
    [row] = svc.session_rows(keys=[key], agent_id=agent_id)
    return row.parent_key


def rejections(logs: list[dict[str, object]]) -> list[object]:
    return [entry.get("reason") for entry in logs if entry["event"] == "signal_rejected"]


class TestSpawnEdges:
    def test_a_session_cannot_spawn_its_own_manager(self, svc: SessionAwareness) -> None:
        """R-T3: a child's spawn edge onto its own parent (a cycle) records nothing and logs
        `signal_rejected` with the reason."""
        spawn(svc)
        with capture_logs() as logs:
            assert svc.record_child_spawned(MANAGER, parent=CHILD, run_id="up") is None
        assert rejections(logs) == ["parent_cycle"]
        assert parent_of(svc, MANAGER) is None
        assert svc.session_status(MANAGER)["stateVersion"] == 0
        assert cursor(svc, CHILD, MANAGER) is None

    def test_a_session_cannot_spawn_an_ancestor_two_levels_up(self, svc: SessionAwareness) -> None:
        """R-T3: the whole ancestry is checked, not only the direct parent."""
        spawn(svc)
        svc.record_child_spawned(GRANDCHILD, parent=CHILD, run_id="g")
        with capture_logs() as logs:
            assert svc.record_child_spawned(MANAGER, parent=GRANDCHILD, run_id="x") is None
        assert rejections(logs) == ["parent_cycle"]

    def test_a_session_cannot_spawn_itself(self, svc: SessionAwareness) -> None:
        """R-T3: a session is never its own child."""
        svc.open_session(MANAGER)
        with capture_logs() as logs:
            assert svc.record_child_spawned(MANAGER, parent=MANAGER, run_id="self") is None
        assert rejections(logs) == ["parent_cycle"]

    def test_an_established_parent_is_not_replaced(self, svc: SessionAwareness) -> None:
        """R-T3: another parent's spawn edge is refused; the first parent keeps its cursor."""
        spawn(svc)
        svc.open_session(OTHER)
        with capture_logs() as logs:
            assert svc.record_child_spawned(CHILD, parent=OTHER, run_id="steal") is None
        assert rejections(logs) == ["reparent"]
        assert parent_of(svc, CHILD) == MANAGER
        assert cursor(svc, OTHER, CHILD) is None
        assert svc.session_status(CHILD)["stateVersion"] == 1

    def test_the_same_parent_spawning_again_overwrites_the_cursor(
        self, svc: SessionAwareness
    ) -> None:
        """R-W1: a new run id from the same parent is recorded and reseeds its cursor."""
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal created")
        assert svc.record_child_spawned(CHILD, parent=MANAGER, run_id="run-2") == 3
        assert cursor(svc, MANAGER, CHILD) == (3, 3, 3)

    def test_open_session_under_a_descendant_is_refused(self, svc: SessionAwareness) -> None:
        """R-T3: the host's `parent=` obeys the same rule, as a typed error naming `parent`."""
        spawn(svc)
        with pytest.raises(InvalidArgumentError) as refused:
            svc.open_session(MANAGER, parent=CHILD)
        assert refused.value.field == "parent"
        assert parent_of(svc, MANAGER) is None

    def test_a_ghost_parent_cannot_be_opened_under_its_own_child(
        self, svc: SessionAwareness
    ) -> None:
        """R-T3: a parent never opened still has its children; opening it under one of them
        would close a cycle."""
        ghost = "agent:main:ghost"
        svc.record_child_spawned(CHILD, parent=ghost, run_id="r")
        with pytest.raises(InvalidArgumentError):
            svc.open_session(ghost, parent=CHILD)
        assert svc.session_rows(keys=[ghost]) == []


class TestOpenAgain:
    def test_a_changed_kind_and_label_are_applied_and_kept_in_history(
        self, svc: SessionAwareness
    ) -> None:
        """R-K3: opening an open session with another kind or label is never a silent no-op."""
        svc.open_session(CHILD, kind="subagent", label="draft", parent=MANAGER)
        svc.open_session(CHILD, kind="group", label="final")
        [row] = svc.session_rows(keys=[CHILD])
        assert (row.kind, row.label, row.parent_key) == ("group", "final", MANAGER)
        described = [e for e in svc.history(CHILD) if e["event"] == "described"]
        assert [(e["kind"], e["label"]) for e in described] == [("group", "final")]

    def test_what_the_host_leaves_out_stays(self, svc: SessionAwareness) -> None:
        """R-K3: an open without kind or label changes neither, and records nothing."""
        svc.open_session(CHILD, kind="subagent", label="draft")
        before = len(svc.history(CHILD))
        svc.open_session(CHILD)
        [row] = svc.session_rows(keys=[CHILD])
        assert (row.kind, row.label) == ("subagent", "draft")
        assert len(svc.history(CHILD)) == before

    def test_a_first_parent_can_be_given_later_but_not_a_second(
        self, svc: SessionAwareness
    ) -> None:
        """R-T3: a parentless session takes a parent once; a different one is refused."""
        svc.open_session(CHILD)
        svc.open_session(CHILD, parent=MANAGER)
        assert parent_of(svc, CHILD) == MANAGER
        with pytest.raises(InvalidArgumentError):
            svc.open_session(CHILD, parent=OTHER)
        assert parent_of(svc, CHILD) == MANAGER

    def test_the_sandbox_mark_is_kept_across_a_restart(
        self, open_svc: ServiceFactory, svc: SessionAwareness
    ) -> None:
        """R-T2: `sandboxed=True` is event-sourced: a new process sees it."""
        svc.open_session(CHILD, sandboxed=True)
        svc.open_session(MANAGER)
        assert svc.is_sandboxed(CHILD) and not svc.is_sandboxed(MANAGER)
        again = open_svc()
        assert again.is_sandboxed(CHILD)
        again.open_session(CHILD, sandboxed=False)
        assert not again.is_sandboxed(CHILD)


class TestBareKeys:
    def test_a_spawn_onto_another_agents_bare_key_seeds_no_cursor(
        self, svc: SessionAwareness
    ) -> None:
        """R-W3, R-W4: the spawn edge is recorded; neither the spawn nor a later change gives
        the parent of another agent a cursor on the bare key."""
        svc.open_session(MANAGER)
        assert svc.record_child_spawned("global", parent=MANAGER, run_id="r", agent_id="ops") == 1
        assert cursor(svc, MANAGER, "global") is None
        svc.record_goal_changed("global", summary="goal created", agent_id="ops")
        assert cursor(svc, MANAGER, "global") is None
        assert svc.pending_notices(MANAGER) == []

    def test_a_spawn_onto_a_bare_key_of_the_same_agent_seeds_the_cursor(
        self, svc: SessionAwareness
    ) -> None:
        """R-W1, R-W3: within one agent a bare child is watched as any other."""
        svc.open_session(MANAGER)
        assert svc.record_child_spawned("global", parent=MANAGER, run_id="r", agent_id="main") == 1
        assert cursor(svc, MANAGER, "global") == (1, 1, 1)

    def test_two_agents_bare_keys_give_one_watcher_one_notice_it_can_follow(
        self, svc: SessionAwareness
    ) -> None:
        """R-W3, R-N1: a watcher watches only its own agent's `global`, so no two notices of
        one watcher read the same."""
        svc.open_session("global", agent_id="main")
        svc.open_session("global", agent_id="ops")
        svc.open_session(MANAGER)
        assert svc.watch(MANAGER, "global", target_agent_id="main")
        assert not svc.watch(MANAGER, "global", target_agent_id="ops")
        svc.record_goal_changed("global", summary="goal created", agent_id="main")
        svc.record_goal_changed("global", summary="goal created", agent_id="ops")
        assert len(svc.pending_notices(MANAGER)) == 1
