"""`sessions_spawn` as a hook: the spawn edge for a child the host created (SPEC R-L5, R-W1)."""

from __future__ import annotations

from session_awareness.application import SessionAwareness
from tests.contract.helpers import cursor
from tests.tools.helpers import MAIN, ms

CHILD = "agent:main:subagent:analyst"


class TestSessionsSpawn:
    def test_the_spawn_returns_the_child_and_run_and_records_the_edge(
        self, world: SessionAwareness
    ) -> None:
        """R-L5: child_spawned is recorded on the child, by the caller as its parent."""
        answer = world.tools.call(
            "sessions_spawn", {"childSessionKey": CHILD, "runId": "run-a"}, caller=MAIN
        )
        assert answer == {"childSessionKey": CHILD, "runId": "run-a"}
        status = world.tools.call(
            "session_status", {"sessionKey": CHILD, "changesSince": 0}, caller=MAIN
        )
        assert status["stateChanges"]["events"] == [
            {
                "sequence": 1,
                "kind": "child_spawned",
                "actorType": "agent",
                "occurredAt": ms(5),
                "summary": "child session spawned",
                "actorId": MAIN,
                "runId": "run-a",
            }
        ]

    def test_the_spawn_seeds_the_callers_cursor_on_the_child(self, world: SessionAwareness) -> None:
        """R-W1: the parent's cursor starts at the spawn's sequence; a later change notifies."""
        world.tools.call(
            "sessions_spawn", {"childSessionKey": CHILD, "runId": "run-a"}, caller=MAIN
        )
        assert cursor(world, MAIN, CHILD) == (1, 1, 1)
        world.record_goal_changed(CHILD, summary="goal created")
        assert len(world.pending_notices(MAIN)) == 1

    def test_a_new_child_gets_the_label_and_joins_the_callers_tree(
        self, world: SessionAwareness
    ) -> None:
        """R-T2: the spawned child is the caller's descendant, listed with its label."""
        world.tools.call(
            "sessions_spawn",
            {"childSessionKey": CHILD, "runId": "run-a", "label": "analyst"},
            caller=MAIN,
        )
        rows = world.tools.call("sessions_list", {"label": "analyst"}, caller=MAIN)["sessions"]
        assert [(r["sessionKey"], r["kind"], r["parentSessionKey"]) for r in rows] == [
            (CHILD, "subagent", MAIN)
        ]

    def test_reporting_the_same_run_again_answers_the_same_and_records_nothing(
        self, world: SessionAwareness
    ) -> None:
        """R-L5: the spawn edge is idempotent per run id."""
        arguments = {"childSessionKey": CHILD, "runId": "run-a"}
        first = world.tools.call("sessions_spawn", arguments, caller=MAIN)
        assert world.tools.call("sessions_spawn", arguments, caller=MAIN) == first
        status = world.tools.call("session_status", {"sessionKey": CHILD}, caller=MAIN)
        assert status == {"sessionKey": CHILD, "stateVersion": 1}
