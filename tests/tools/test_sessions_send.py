"""`sessions_send`: one visible target, the host's dispatcher, and `watch` (R-T1, R-W2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from session_awareness.application import SessionAwareness
from session_awareness.application.tools import SessionsSendInput, ToolError
from tests.conftest import FakeClock
from tests.contract.helpers import cursor
from tests.tools.conftest import RecordingDispatcher, WorldFactory
from tests.tools.helpers import HELPER, MAIN, OPS, PEER, THREAD, WORKER, error, read_only_world

GOOD = [
    (
        {"sessionKey": WORKER, "message": "hi"},
        WORKER,
        {"status": "accepted", "sessionKey": WORKER},
    ),
    ({"label": "worker", "message": "hi"}, WORKER, {"status": "accepted", "sessionKey": WORKER}),
    ({"label": "helper", "message": "hi"}, HELPER, {"status": "accepted", "sessionKey": HELPER}),
    (
        {"sessionKey": WORKER, "message": "hi", "watch": False},
        WORKER,
        {"status": "accepted", "sessionKey": WORKER, "watched": False},
    ),
    (
        {"sessionKey": WORKER, "message": "hi", "watch": True, "timeoutSeconds": 0},
        WORKER,
        {"status": "accepted", "sessionKey": WORKER, "watched": True},
    ),
    (
        {"label": "helper", "message": "hi", "timeoutSeconds": 30.5},
        HELPER,
        {"status": "accepted", "sessionKey": HELPER},
    ),
]


class TestSessionsSend:
    @pytest.mark.parametrize(("arguments", "target", "expected"), GOOD)
    def test_a_good_input_is_delivered_to_the_one_target(
        self,
        world: SessionAwareness,
        dispatcher: RecordingDispatcher,
        arguments: dict[str, Any],
        target: str,
        expected: dict[str, Any],
    ) -> None:
        """R-T1: the target is named by sessionKey or label; `watched` only when `watch` given."""
        assert world.tools.call("sessions_send", arguments, caller=MAIN) == expected
        assert dispatcher.sent == [(MAIN, target, "hi")]

    def test_an_agent_id_targets_that_agents_main_session(
        self, open_world: WorldFactory, dispatcher: RecordingDispatcher
    ) -> None:
        """R-T1: agentId sends to `agent:<id>:main`."""
        svc = open_world(visibility="all")
        answer = svc.tools.call("sessions_send", {"agentId": "ops", "message": "hi"}, caller=MAIN)
        assert answer == {"status": "accepted", "sessionKey": OPS}
        assert dispatcher.sent == [(MAIN, OPS, "hi")]

    def test_watch_registers_the_sender_at_the_targets_head(self, world: SessionAwareness) -> None:
        """R-W2: the sender watches from the current stateVersion; only later changes notify."""
        world.record_goal_changed(HELPER, summary="goal created")
        world.drain_notices(WORKER)
        world.tools.call(
            "sessions_send", {"sessionKey": HELPER, "message": "hi", "watch": True}, caller=MAIN
        )
        assert cursor(world, MAIN, HELPER) == (2, 2, 2)
        assert world.pending_notices(MAIN) == []

    def test_watch_follows_the_session_that_actually_received_the_message(
        self, world: SessionAwareness, dispatcher: RecordingDispatcher
    ) -> None:
        """R-W2: the watch is on the receiver the dispatcher reports, not the requested one."""
        dispatcher.redirect[WORKER] = HELPER
        answer = world.tools.call(
            "sessions_send", {"sessionKey": WORKER, "message": "hi", "watch": True}, caller=MAIN
        )
        assert answer == {"status": "accepted", "sessionKey": HELPER, "watched": True}
        assert cursor(world, MAIN, HELPER) == (1, 1, 1)

    def test_watch_false_registers_nothing(self, world: SessionAwareness) -> None:
        """R-W2: only `watch: true` registers a watcher."""
        world.tools.call(
            "sessions_send", {"sessionKey": HELPER, "message": "hi", "watch": False}, caller=MAIN
        )
        assert cursor(world, MAIN, HELPER) is None

    def test_a_refused_watch_is_reported_as_watched_false(self, open_world: WorldFactory) -> None:
        """R-W3: a caller that is not agent-qualified cannot watch; the send still succeeds."""
        svc = open_world(visibility="all")
        answer = svc.tools.call(
            "sessions_send", {"sessionKey": PEER, "message": "hi", "watch": True}, caller="global"
        )
        assert answer == {"status": "accepted", "sessionKey": PEER, "watched": False}

    def test_a_failed_dispatch_registers_nothing_and_is_a_typed_error(
        self, world: SessionAwareness, dispatcher: RecordingDispatcher
    ) -> None:
        """R-W2: registration happens only after a successful dispatch."""
        dispatcher.failure = ConnectionError("gateway down")
        with capture_logs() as logs:
            answer = world.tools.call(
                "sessions_send", {"sessionKey": HELPER, "message": "hi", "watch": True}, caller=MAIN
            )
        assert answer == error("dispatch_failed", f"the message could not be delivered to {HELPER}")
        assert cursor(world, MAIN, HELPER) is None
        assert [e["event"] for e in logs if e["log_level"] != "debug"][-2:] == [
            "tool_dispatch_failed",
            "tool_failed",
        ]

    def test_without_a_dispatcher_the_send_is_not_configured(
        self, open_world: WorldFactory
    ) -> None:
        """R-T1: the service never delivers messages itself; the host must provide delivery."""
        svc = open_world(dispatcher=None)
        answer = svc.tools.call(
            "sessions_send", {"sessionKey": WORKER, "message": "hi"}, caller=MAIN
        )
        assert answer == error(
            "not_configured", "sessions_send needs a dispatcher: open_service(..., dispatcher=...)"
        )

    def test_a_label_shared_by_two_visible_sessions_is_ambiguous(
        self, world: SessionAwareness
    ) -> None:
        """R-T1: a label names exactly one visible session, or the send is refused."""
        world.open_session("agent:main:subagent:twin", kind="subagent", label="worker", parent=MAIN)
        answer = world.tools.call(
            "sessions_send", {"label": "worker", "message": "hi"}, caller=MAIN
        )
        assert answer == error(
            "ambiguous_target",
            "Ambiguous label: worker (2 visible sessions have it; pass sessionKey)",
            "label",
        )

    def test_a_thread_scoped_session_found_by_label_is_refused(
        self, open_world: WorldFactory, dispatcher: RecordingDispatcher
    ) -> None:
        """R-K2: a thread-scoped key is never a send target, however it was named."""
        svc = open_world(visibility="agent")
        svc.open_session(THREAD, kind="group", label="thread")
        answer = svc.tools.call("sessions_send", {"label": "thread", "message": "hi"}, caller=MAIN)
        assert answer["error"]["code"] == "invalid_input"
        assert answer["error"]["field"] == "label"
        assert dispatcher.sent == []

    def test_the_message_text_never_reaches_the_logs(self, world: SessionAwareness) -> None:
        """R-L2: the service never stores or logs message content."""
        text = "please summarise the launch plan"
        with capture_logs() as logs:
            world.tools.call(
                "sessions_send",
                {"sessionKey": WORKER, "message": text, "watch": True},
                caller=MAIN,
            )
        assert logs
        assert all(text not in repr(entry) for entry in logs)

    def test_the_typed_function_raises_a_tool_error(self, world: SessionAwareness) -> None:
        """R-T1: Python hosts get the same typed error as an exception."""
        with pytest.raises(ToolError) as raised:
            world.tools.sessions_send(SessionsSendInput(sessionKey=PEER, message="hi"), caller=MAIN)
        assert raised.value.to_json() == error(
            "unknown_session", f"Unknown sessionKey: {PEER}", "sessionKey"
        )


class TestRoutedOutsideTheView:
    @pytest.mark.parametrize("routed", [PEER, OPS, "agent:main:nobody", "global"])
    def test_a_receiver_outside_the_view_is_never_named_nor_watched(
        self, world: SessionAwareness, dispatcher: RecordingDispatcher, routed: str
    ) -> None:
        """R-T2, R-W2: the result names the target as asked, creates no cursor and reports
        `watched: false`, whether the receiver exists or not."""
        dispatcher.redirect[WORKER] = routed
        before = world.read_model.cursors_of_watcher(MAIN, pending_only=False)
        answer = world.tools.call(
            "sessions_send", {"sessionKey": WORKER, "message": "hi", "watch": True}, caller=MAIN
        )
        assert answer == {"status": "accepted", "sessionKey": WORKER, "watched": False}
        assert world.read_model.cursors_of_watcher(MAIN, pending_only=False) == before

    def test_without_watch_the_hidden_receiver_is_not_named_either(
        self, world: SessionAwareness, dispatcher: RecordingDispatcher
    ) -> None:
        """R-T2: no `watched`, and still the target as asked."""
        dispatcher.redirect[WORKER] = PEER
        answer = world.tools.call(
            "sessions_send", {"label": "worker", "message": "hi"}, caller=MAIN
        )
        assert answer == {"status": "accepted", "sessionKey": WORKER}

    def test_a_visible_receiver_is_named_and_watched(
        self, world: SessionAwareness, dispatcher: RecordingDispatcher
    ) -> None:
        """R-W2: inside the view, the receiver the host reports is the one watched."""
        dispatcher.redirect[HELPER] = WORKER
        answer = world.tools.call(
            "sessions_send", {"sessionKey": HELPER, "message": "hi", "watch": True}, caller=MAIN
        )
        assert answer == {"status": "accepted", "sessionKey": WORKER, "watched": True}


class TestAStoreThatFailsAfterDelivery:
    def test_a_watch_the_store_cannot_save_is_watched_false_not_an_error(
        self, tmp_path: Path, clock: FakeClock
    ) -> None:
        """R-W2: the message was delivered, so the result says so; a watch the store refuses
        (a read-only store here) is `watched: false`, logged, never an error that would make
        the agent send the message twice."""
        dispatcher = RecordingDispatcher()
        with read_only_world(tmp_path, clock, dispatcher=dispatcher) as svc, capture_logs() as logs:
            arguments = {"sessionKey": HELPER, "message": "hi", "watch": True}
            answer = svc.tools.call("sessions_send", arguments, caller=MAIN)
        assert answer == {"status": "accepted", "sessionKey": HELPER, "watched": False}
        assert dispatcher.sent == [(MAIN, HELPER, "hi")]
        failed = [e for e in logs if e["event"] == "tool_watch_failed"]
        assert [(e["target"], e["error_type"]) for e in failed] == [
            (HELPER, "StoreUnavailableError")
        ]
