"""`subagents` as a tool: the caller's tree with its runs, and cancelling a run inside it
through the host's canceller (R-T1, R-T2)."""

from __future__ import annotations

from typing import Any

import pytest

from session_awareness.application import SessionAwareness
from tests.conftest import FakeClock, ServiceFactory
from tests.tools.helpers import HELPER, MAIN, OPS, PEER, WORKER, build_world, error, ms, note


class RecordingCanceller:
    """A host's run cancel: remembers each (caller, child, runId), or refuses when told."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str]] = []
        self.failure: Exception | None = None

    def __call__(self, caller: str, child: str, run_id: str) -> None:
        if self.failure is not None:
            raise self.failure
        self.asked.append((caller, child, run_id))


@pytest.fixture
def canceller() -> RecordingCanceller:
    return RecordingCanceller()


@pytest.fixture
def tree(
    open_svc: ServiceFactory, clock: FakeClock, canceller: RecordingCanceller
) -> SessionAwareness:
    svc = open_svc(canceller=canceller)
    build_world(svc, clock)
    return svc


def entry(key: str, parent: str, run: str, status: str, spawned: int, **more: Any) -> dict:
    return {
        "sessionKey": key,
        "agentId": "main",
        "label": key.rsplit(":", 1)[1],
        "parentSessionKey": parent,
        "runId": run,
        "runStatus": status,
        "lastRunAborted": status in ("cancelled", "timeout"),
        "spawnedAt": ms(spawned),
        **more,
    }


WORKER_RUN = entry(WORKER, MAIN, "run-w", "running", 1)
HELPER_RUN = entry(HELPER, WORKER, "run-h", "running", 2)


class TestList:
    def test_the_caller_sees_its_whole_tree_latest_spawn_first(
        self, tree: SessionAwareness
    ) -> None:
        """R-T1: the sessions the caller spawned, transitively, each with its run."""
        answer = tree.tools.call("subagents", {}, caller=MAIN)
        assert answer == {"subagents": [HELPER_RUN, WORKER_RUN], "visibility": note("tree")}

    def test_a_child_sees_only_its_own_subtree(self, tree: SessionAwareness) -> None:
        """R-T1: WORKER's tree is HELPER; HELPER, a leaf, has none; PEER spawned nothing."""
        assert tree.tools.call("subagents", {"action": "list"}, caller=WORKER)["subagents"] == [
            HELPER_RUN
        ]
        for caller in (HELPER, PEER, OPS):
            assert tree.tools.call("subagents", {}, caller=caller)["subagents"] == []

    def test_ended_runs_follow_the_active_ones_within_the_recent_minutes(
        self, tree: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-T1: running first; an ended run stays listed for `recentMinutes` (30 by
        default), with its end time."""
        tree.record_run_terminal(HELPER, run_id="run-h", outcome="cancelled")  # at ms(5)
        ended = entry(HELPER, WORKER, "run-h", "cancelled", 2, endedAt=ms(5))
        assert tree.tools.call("subagents", {}, caller=MAIN)["subagents"] == [WORKER_RUN, ended]
        clock.advance(minutes=31)
        assert tree.tools.call("subagents", {}, caller=MAIN)["subagents"] == [WORKER_RUN]
        wide = tree.tools.call("subagents", {"recentMinutes": 60}, caller=MAIN)
        assert wide["subagents"] == [WORKER_RUN, ended]

    def test_under_visibility_self_the_tree_is_not_visible(
        self, open_svc: ServiceFactory, clock: FakeClock
    ) -> None:
        """R-T2: visibility applies as for every tool: `self` sees no child."""
        svc = open_svc(visibility="self")
        build_world(svc, clock)
        assert svc.tools.call("subagents", {}, caller=MAIN) == {
            "subagents": [],
            "visibility": note("self"),
        }


class TestCancel:
    def test_a_run_in_the_callers_tree_is_handed_to_the_host(
        self, tree: SessionAwareness, canceller: RecordingCanceller
    ) -> None:
        """R-T1: the canceller gets (caller, child, runId); the result is `requested` and
        nothing is recorded until the host reports the end."""
        answer = tree.tools.call("subagents", {"action": "cancel", "runId": "run-h"}, caller=MAIN)
        assert answer == {"status": "requested", "runId": "run-h"}
        assert canceller.asked == [(MAIN, HELPER, "run-h")]
        assert tree.tools.call("subagents", {}, caller=MAIN)["subagents"][0] == HELPER_RUN
        tree.record_run_terminal(HELPER, run_id="run-h", outcome="cancelled")
        [row] = [r for r in tree.sessions_list() if r["sessionKey"] == HELPER]
        assert (row["runStatus"], row["lastRunAborted"]) == ("cancelled", True)

    def test_a_leaf_cannot_cancel_another_sessions_run(
        self, tree: SessionAwareness, canceller: RecordingCanceller
    ) -> None:
        """R-T1, R-T2: a run outside the caller's tree reads like a run id naming nothing."""
        for caller, run in (
            (HELPER, "run-w"),
            (HELPER, "run-h"),
            (WORKER, "run-w"),
            (OPS, "run-h"),
        ):
            seen = tree.tools.call("subagents", {"action": "cancel", "runId": run}, caller=caller)
            assert seen == error("unknown_run", f"Unknown runId: {run}", "runId")
        assert canceller.asked == []

    def test_an_ended_run_is_not_cancelled(
        self, tree: SessionAwareness, canceller: RecordingCanceller
    ) -> None:
        tree.record_run_terminal(HELPER, run_id="run-h", outcome="ok")
        answer = tree.tools.call("subagents", {"action": "cancel", "runId": "run-h"}, caller=MAIN)
        assert answer == error("invalid_input", "runId run-h is not running (completed)", "runId")
        assert canceller.asked == []

    def test_a_refusing_host_gives_a_typed_error_without_its_text(
        self, tree: SessionAwareness, canceller: RecordingCanceller
    ) -> None:
        canceller.failure = RuntimeError("secret detail")
        answer = tree.tools.call("subagents", {"action": "cancel", "runId": "run-w"}, caller=MAIN)
        assert answer == error("cancel_failed", "the run could not be cancelled", "runId")

    def test_without_a_canceller_cancel_is_not_configured_and_list_still_works(
        self, open_svc: ServiceFactory, clock: FakeClock
    ) -> None:
        svc = open_svc()
        build_world(svc, clock)
        answer = svc.tools.call("subagents", {"action": "cancel", "runId": "run-w"}, caller=MAIN)
        assert answer["error"]["code"] == "not_configured"
        assert len(svc.tools.call("subagents", {}, caller=MAIN)["subagents"]) == 2

    @pytest.mark.parametrize(
        ("arguments", "expected"),
        [
            (
                {"action": "cancel"},
                error("invalid_input", 'runId is required for action "cancel"', "runId"),
            ),
            (
                {"runId": "run-w"},
                error("invalid_input", 'runId is only for action "cancel"', "runId"),
            ),
            (
                {"action": "kill"},
                error("invalid_input", 'action must be "list" or "cancel"', "action"),
            ),
            ({"recentMinutes": 0}, "recentMinutes"),
            ({"recentMinutes": "5"}, "recentMinutes"),
            ({"action": "cancel", "runId": "a\nb"}, "runId"),
            ({"sessionKey": MAIN}, "sessionKey"),
        ],
    )
    def test_bad_input_is_a_typed_error_naming_the_field(
        self, tree: SessionAwareness, arguments: dict[str, Any], expected: Any
    ) -> None:
        answer = tree.tools.call("subagents", arguments, caller=MAIN)
        if isinstance(expected, str):
            assert (answer["error"]["code"], answer["error"]["field"]) == (
                "invalid_input",
                expected,
            )
        else:
            assert answer == expected
