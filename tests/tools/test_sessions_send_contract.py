"""`sessions_send`'s contract with a dispatcher that takes `timeout_seconds`: statuses, replies,
fire-and-forget, and `watched` on every result after a successful dispatch (R-T1, R-W2)."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from session_awareness.application import SessionAwareness
from tests.conftest import FakeClock, ServiceFactory
from tests.tools.helpers import MAIN, PEER, WORKER, build_world


class WaitingDispatcher:
    """A host that waits for replies: remembers each call's timeout and answers as told."""

    def __init__(self) -> None:
        self.timeouts: list[float | None] = []
        self.answer: Any = None
        self.failure: Exception | None = None

    def __call__(
        self, sender: str, target: str, message: str, *, timeout_seconds: float | None = None
    ) -> Any:
        if self.failure is not None:
            raise self.failure
        self.timeouts.append(timeout_seconds)
        return target if self.answer is None else self.answer


@pytest.fixture
def waiting() -> WaitingDispatcher:
    return WaitingDispatcher()


@pytest.fixture
def host(
    open_svc: ServiceFactory, clock: FakeClock, waiting: WaitingDispatcher
) -> SessionAwareness:
    svc = open_svc(dispatcher=waiting)
    build_world(svc, clock)
    return svc


def send(svc: SessionAwareness, **arguments: Any) -> dict[str, Any]:
    return svc.tools.call("sessions_send", {"sessionKey": WORKER, "message": "hi", **arguments},
                          caller=MAIN)  # fmt: skip


class TestTimeouts:
    def test_the_timeout_reaches_a_dispatcher_that_declares_it(
        self, host: SessionAwareness, waiting: WaitingDispatcher
    ) -> None:
        """R-T1: `timeoutSeconds` is handed to the host; not given, it is None."""
        send(host, timeoutSeconds=30)
        send(host, timeoutSeconds=0)
        send(host)
        assert waiting.timeouts == [30, 0, None]

    def test_an_old_dispatcher_is_called_without_it_and_its_key_is_accepted(
        self, open_svc: ServiceFactory, clock: FakeClock
    ) -> None:
        """A `(sender, target, message) -> key` dispatcher keeps working: `accepted`."""
        calls: list[tuple[str, str, str]] = []

        def old(sender: str, target: str, message: str) -> str:
            calls.append((sender, target, message))
            return target

        svc = open_svc(dispatcher=old)
        build_world(svc, clock)
        assert send(svc, timeoutSeconds=30) == {"status": "accepted", "sessionKey": WORKER}
        assert calls == [(MAIN, WORKER, "hi")]


class TestStatuses:
    def test_a_reply_comes_back_with_status_ok(
        self, host: SessionAwareness, waiting: WaitingDispatcher
    ) -> None:
        waiting.answer = {"sessionKey": WORKER, "status": "ok", "reply": "done: 3 files"}
        answer = send(host, timeoutSeconds=30)
        assert answer == {"status": "ok", "sessionKey": WORKER, "reply": "done: 3 files"}

    @pytest.mark.parametrize("status", ["no_reply", "timeout", "error"])
    def test_a_wait_without_a_reply_says_why_and_carries_none(
        self, host: SessionAwareness, waiting: WaitingDispatcher, status: str
    ) -> None:
        waiting.answer = {"sessionKey": WORKER, "status": status, "reply": "ignored"}
        assert send(host, timeoutSeconds=5) == {"status": status, "sessionKey": WORKER}

    def test_fire_and_forget_is_accepted_whatever_the_host_says(
        self, host: SessionAwareness, waiting: WaitingDispatcher
    ) -> None:
        """R-T1: `timeoutSeconds: 0` is fire-and-forget: `accepted`, no reply."""
        waiting.answer = {"sessionKey": WORKER, "status": "ok", "reply": "too early"}
        assert send(host, timeoutSeconds=0) == {"status": "accepted", "sessionKey": WORKER}

    def test_an_unknown_status_from_the_host_reads_as_accepted(
        self, host: SessionAwareness, waiting: WaitingDispatcher
    ) -> None:
        waiting.answer = {"sessionKey": WORKER, "status": "queued!"}
        assert send(host, timeoutSeconds=5) == {"status": "accepted", "sessionKey": WORKER}

    def test_a_reply_from_a_hidden_receiver_names_the_target_as_asked(
        self, host: SessionAwareness, waiting: WaitingDispatcher
    ) -> None:
        """R-T2: the receiving key outside the view is never revealed."""
        waiting.answer = {"sessionKey": PEER, "status": "ok", "reply": "hello"}
        answer = send(host, timeoutSeconds=5, watch=True)
        assert answer == {"status": "ok", "sessionKey": WORKER, "reply": "hello", "watched": False}


class TestWatched:
    @pytest.mark.parametrize("status", ["accepted", "ok", "no_reply", "timeout", "error"])
    def test_watched_is_on_every_result_after_a_successful_dispatch(
        self, host: SessionAwareness, waiting: WaitingDispatcher, status: str
    ) -> None:
        """R-W2: the send happened, so the receiver is watched, whatever the wait gave."""
        waiting.answer = {"sessionKey": WORKER, "status": status}
        answer = send(host, timeoutSeconds=5, watch=True)
        assert (answer["status"], answer["watched"]) == (status, True)
        cursors = host.read_model.cursors_of_watcher(MAIN, pending_only=False)
        assert WORKER in {row.target_key for row in cursors}

    def test_a_failed_start_creates_no_watch(
        self, host: SessionAwareness, waiting: WaitingDispatcher
    ) -> None:
        """R-W2: a dispatcher that raises is `dispatch_failed`, and nothing is watched."""
        waiting.failure = RuntimeError("host down")
        before = host.read_model.cursors_of_watcher(MAIN, pending_only=False)
        answer = send(host, timeoutSeconds=5, watch=True)
        assert answer["error"]["code"] == "dispatch_failed"
        assert host.read_model.cursors_of_watcher(MAIN, pending_only=False) == before


class TestNeverLogged:
    def test_neither_the_message_nor_the_reply_is_logged(
        self, host: SessionAwareness, waiting: WaitingDispatcher
    ) -> None:
        waiting.answer = {"sessionKey": WORKER, "status": "ok", "reply": "SECRET-REPLY"}
        with capture_logs() as logs:
            host.tools.call("sessions_send", {"sessionKey": WORKER, "message": "SECRET-MESSAGE",
                                              "timeoutSeconds": 5}, caller=MAIN)  # fmt: skip
        assert "SECRET" not in repr(logs)
