"""`sessions_list` as a tool: filters and the exact rows (R-T1, R-S5)."""

from __future__ import annotations

from typing import Any

import pytest

from session_awareness.application import SessionAwareness
from tests.tools.helpers import HELPER, MAIN, WORKER, ms, note

ROWS = {
    HELPER: {
        "sessionKey": HELPER,
        "agentId": "main",
        "kind": "subagent",
        "label": "helper",
        "parentSessionKey": WORKER,
        "childSessionKeys": [],
        "updatedAt": ms(2),
        "stateVersion": 1,
        "pinned": False,
        "archived": False,
        "runStatus": "running",
        "lastRunAborted": False,
    },
    WORKER: {
        "sessionKey": WORKER,
        "agentId": "main",
        "kind": "subagent",
        "label": "worker",
        "parentSessionKey": MAIN,
        "childSessionKeys": [HELPER],
        "updatedAt": ms(1),
        "stateVersion": 1,
        "pinned": False,
        "archived": False,
        "runStatus": "running",
        "lastRunAborted": False,
    },
    MAIN: {
        "sessionKey": MAIN,
        "agentId": "main",
        "kind": "main",
        "label": None,
        "parentSessionKey": None,
        "childSessionKeys": [WORKER],
        "updatedAt": ms(0),
        "pinned": False,
        "archived": False,
    },
}

GOOD = [
    ({}, [HELPER, WORKER, MAIN]),
    ({"kinds": ["subagent"]}, [HELPER, WORKER]),
    ({"kinds": ["main", "group"]}, [MAIN]),
    ({"kinds": []}, []),
    ({"label": "worker"}, [WORKER]),
    ({"agentId": "main"}, [HELPER, WORKER, MAIN]),
    ({"agentId": "ops"}, []),
    ({"search": "HELP"}, [HELPER]),
    ({"search": "work"}, [WORKER]),
    ({"activeMinutes": 3.5}, [HELPER]),
    ({"activeMinutes": 4}, [HELPER, WORKER]),
    ({"limit": 2}, [HELPER, WORKER]),
    ({"kinds": ["subagent"], "search": "agent:main", "limit": 1}, [HELPER]),
]


class TestSessionsList:
    @pytest.mark.parametrize(("arguments", "keys"), GOOD)
    def test_a_good_input_returns_the_exact_rows(
        self, world: SessionAwareness, arguments: dict[str, Any], keys: list[str]
    ) -> None:
        """R-T1, R-S5: the filtered visible rows, newest first, stateVersion only when > 0."""
        answer = world.tools.call("sessions_list", arguments, caller=MAIN)
        assert answer == {"sessions": [ROWS[key] for key in keys], "visibility": note("tree")}

    def test_a_row_gains_its_state_version_once_it_has_an_event(
        self, world: SessionAwareness
    ) -> None:
        """R-S5: stateVersion appears on a row only when it is > 0."""
        world.record_goal_changed(MAIN, summary="goal created")
        answer = world.tools.call("sessions_list", {"kinds": ["main"]}, caller=MAIN)
        assert answer["sessions"] == [{**ROWS[MAIN], "updatedAt": ms(5), "stateVersion": 1}]
