"""`session_status` as a tool: the JSON input and the exact JSON output (R-T1, R-S1, R-S2)."""

from __future__ import annotations

from typing import Any

import pytest

from session_awareness.application import SessionAwareness
from session_awareness.application.tools import SessionStatusInput, SessionStatusOutput
from tests.tools.helpers import HELPER, MAIN, WORKER, ms


def changes(events: list[dict[str, Any]], earliest: int) -> dict[str, Any]:
    return {
        "events": events,
        "truncated": False,
        "earliestAvailableSequence": earliest,
        "historyGap": False,
    }


HELPER_SPAWNED = {
    "sequence": 1,
    "kind": "child_spawned",
    "actorType": "agent",
    "occurredAt": ms(2),
    "summary": "child session spawned",
    "actorId": WORKER,
    "runId": "run-h",
}

GOOD = [
    ({}, {"sessionKey": MAIN, "stateVersion": 0}),
    ({"sessionKey": "current"}, {"sessionKey": MAIN, "stateVersion": 0}),
    ({"sessionKey": WORKER}, {"sessionKey": WORKER, "stateVersion": 1}),
    (
        {"sessionKey": MAIN, "changesSince": 0},
        {"sessionKey": MAIN, "stateVersion": 0, "stateChanges": changes([], 0)},
    ),
    (
        {"sessionKey": HELPER, "changesSince": 0},
        {"sessionKey": HELPER, "stateVersion": 1, "stateChanges": changes([HELPER_SPAWNED], 1)},
    ),
    (
        {"sessionKey": HELPER, "changesSince": "0"},
        {"sessionKey": HELPER, "stateVersion": 1, "stateChanges": changes([HELPER_SPAWNED], 1)},
    ),
    (
        {"sessionKey": WORKER, "changesSince": 1},
        {"sessionKey": WORKER, "stateVersion": 1, "stateChanges": changes([], 1)},
    ),
    (
        {"sessionKey": WORKER, "changesSince": 9007199254740991},
        {"sessionKey": WORKER, "stateVersion": 1, "stateChanges": changes([], 1)},
    ),
    # An integral float is read as the integer, as the embedding API reads it (R-S4).
    (
        {"sessionKey": WORKER, "changesSince": 1.0},
        {"sessionKey": WORKER, "stateVersion": 1, "stateChanges": changes([], 1)},
    ),
]


class TestSessionStatus:
    @pytest.mark.parametrize(("arguments", "expected"), GOOD)
    def test_a_good_input_returns_the_exact_status(
        self, world: SessionAwareness, arguments: dict[str, Any], expected: dict[str, Any]
    ) -> None:
        """R-T1, R-S1: the tool answers {sessionKey, stateVersion, stateChanges?} as JSON."""
        assert world.tools.call("session_status", arguments, caller=MAIN) == expected

    def test_the_delta_carries_a_human_message_with_its_channel(
        self, world: SessionAwareness
    ) -> None:
        """R-S2: each event has its documented fields, the payload only its channel."""
        world.record_human_direct_message(WORKER, channel="telegram")
        answer = world.tools.call(
            "session_status", {"sessionKey": WORKER, "changesSince": 1}, caller=MAIN
        )
        assert answer == {
            "sessionKey": WORKER,
            "stateVersion": 2,
            "stateChanges": changes(
                [
                    {
                        "sequence": 2,
                        "kind": "human_direct_message",
                        "actorType": "human",
                        "occurredAt": ms(5),
                        "summary": "human message via telegram",
                        "payload": {"channel": "telegram"},
                    }
                ],
                1,
            ),
        }

    def test_the_typed_function_returns_the_output_model(self, world: SessionAwareness) -> None:
        """R-T1: Python hosts get the same answer as a typed model."""
        output = world.tools.session_status(
            SessionStatusInput(sessionKey=HELPER, changesSince=1), caller=MAIN
        )
        assert isinstance(output, SessionStatusOutput)
        assert output.state_version == 1
        assert output.state_changes is not None
        assert output.state_changes.events == []

    def test_reading_the_status_moves_no_cursor(self, world: SessionAwareness) -> None:
        """R-S1: session_status never advances a cursor, so a pending notice stays pending."""
        world.record_goal_changed(WORKER, summary="goal created")
        before = world.pending_notices(MAIN)
        world.tools.call("session_status", {"sessionKey": WORKER, "changesSince": 0}, caller=MAIN)
        assert world.pending_notices(MAIN) == before != []
