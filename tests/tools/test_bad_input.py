"""Every invalid input is a typed error naming the field and the rule, never a traceback
(R-T1, R-S4, R-K2, R-T2)."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from session_awareness.application import SessionAwareness
from session_awareness.application.tools import TOOLS
from tests.tools.conftest import RecordingDispatcher
from tests.tools.helpers import MAIN, PEER, THREAD, WORKER, error, invalid, unknown

CHANGES_SINCE = invalid("changesSince", "changesSince must be a non-negative integer")
KEY_RULE = "must be a session key (1 to 512 characters, no surrounding whitespace, no line breaks)"
LINE_RULE = "must be one line of 1 to 120 characters, without surrounding or repeated whitespace"
KINDS = "kinds must be an array of: main, group, cron, hook, node, other, subagent"
LIMIT = "limit must be a positive integer, at most 9007199254740991"
ACTIVE = "activeMinutes must be a positive number of minutes, at most 52560000"
ONE_TARGET = "sessions_send takes exactly one of sessionKey, label or agentId"
THREAD_RULE = (
    "sessionKey must not be thread-scoped (…:thread:<id>): send to the parent channel session"
)
TIMEOUT = "timeoutSeconds must be a non-negative number, at most 9007199254740991"
HI = {"message": "hi"}
TASK = (
    "task must be a non-blank string of at most 65536 characters, without control characters "
    "other than line breaks and tabs"
)
RUNTIME = 'runtime must be "subagent" or "acp"'
CONTEXT = 'context must be "isolated" or "fork" (fork only with runtime "subagent")'
SANDBOX = 'sandbox must be "inherit" or "require"'
THREAD_FLAG = "thread must be a boolean (true or false)"
OPTION = "must be one line of 1 to 200 characters"

BAD: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    # session_status: changesSince per R-S4
    ("session_status", {"changesSince": -1}, CHANGES_SINCE),
    ("session_status", {"changesSince": 1.5}, CHANGES_SINCE),
    ("session_status", {"changesSince": True}, CHANGES_SINCE),
    ("session_status", {"changesSince": "abc"}, CHANGES_SINCE),
    ("session_status", {"changesSince": "-1"}, CHANGES_SINCE),
    ("session_status", {"changesSince": " 1"}, CHANGES_SINCE),
    ("session_status", {"changesSince": float("nan")}, CHANGES_SINCE),
    ("session_status", {"changesSince": float("inf")}, CHANGES_SINCE),
    ("session_status", {"changesSince": 2**53}, CHANGES_SINCE),
    ("session_status", {"changesSince": "9007199254740992"}, CHANGES_SINCE),
    ("session_status", {"changesSince": "9" * 5000}, CHANGES_SINCE),
    ("session_status", {"changesSince": [1]}, CHANGES_SINCE),
    # session_status: the key, extra fields, unknown and invisible sessions
    ("session_status", {"sessionKey": 7}, invalid("sessionKey", f"sessionKey {KEY_RULE}")),
    ("session_status", {"sessionKey": ""}, invalid("sessionKey", f"sessionKey {KEY_RULE}")),
    ("session_status", {"sessionKey": " x"}, invalid("sessionKey", f"sessionKey {KEY_RULE}")),
    ("session_status", {"sessionKey": "a\nb"}, invalid("sessionKey", f"sessionKey {KEY_RULE}")),
    (
        "session_status",
        {"session_key": MAIN},
        invalid("session_key", "session_key is not a parameter of session_status"),
    ),
    (
        "session_status",
        {"sessionKey": MAIN, "model": "default"},
        invalid("model", "model is not a parameter of session_status"),
    ),
    (  # a lone surrogate in a name: unknown like any made-up name, echoed escaped
        "session_status",
        {"\ud800": 1},
        invalid("\\ud800", "\\ud800 is not a parameter of session_status"),
    ),
    (
        "sessions_list",
        {"kinds": ["main"], "x\udfff": None},
        invalid("x\\udfff", "x\\udfff is not a parameter of sessions_list"),
    ),
    ("session_status", {"sessionKey": "agent:main:nobody"}, unknown("agent:main:nobody")),
    ("session_status", {"sessionKey": PEER}, unknown(PEER)),
    # sessions_list
    ("sessions_list", {"kinds": "main"}, invalid("kinds", KINDS)),
    ("sessions_list", {"kinds": ["main", "robot"]}, invalid("kinds.1", KINDS)),
    ("sessions_list", {"limit": 0}, invalid("limit", LIMIT)),
    ("sessions_list", {"limit": -1}, invalid("limit", LIMIT)),
    ("sessions_list", {"limit": 1.0}, invalid("limit", LIMIT)),
    ("sessions_list", {"limit": 2.5}, invalid("limit", LIMIT)),
    ("sessions_list", {"limit": True}, invalid("limit", LIMIT)),
    ("sessions_list", {"limit": "5"}, invalid("limit", LIMIT)),
    ("sessions_list", {"limit": 2**53}, invalid("limit", LIMIT)),
    ("sessions_list", {"activeMinutes": 0}, invalid("activeMinutes", ACTIVE)),
    ("sessions_list", {"activeMinutes": -5}, invalid("activeMinutes", ACTIVE)),
    ("sessions_list", {"activeMinutes": "5"}, invalid("activeMinutes", ACTIVE)),
    ("sessions_list", {"activeMinutes": True}, invalid("activeMinutes", ACTIVE)),
    ("sessions_list", {"activeMinutes": float("nan")}, invalid("activeMinutes", ACTIVE)),
    ("sessions_list", {"activeMinutes": 1e12}, invalid("activeMinutes", ACTIVE)),
    ("sessions_list", {"label": ""}, invalid("label", f"label {LINE_RULE}")),
    ("sessions_list", {"label": "a\nb"}, invalid("label", f"label {LINE_RULE}")),
    (
        "sessions_list",
        {"agentId": "a:b"},
        invalid(
            "agentId", "agentId must be an agent id (1 to 512 characters, no ':' and no whitespace)"
        ),
    ),
    (  # a zero-width character: an agent id is shown to agents as is (R-N1)
        "sessions_list",
        {"agentId": "ma\u200bin"},
        invalid(
            "agentId", "agentId must be an agent id (1 to 512 characters, no ':' and no whitespace)"
        ),
    ),
    (
        "sessions_list",
        {"search": ""},
        invalid(
            "search", "search must be a string of 1 to 512 characters, without control characters"
        ),
    ),
    (  # a lone surrogate is not text (UTF-8 cannot hold it): found by the schema fuzzer
        "sessions_list",
        {"search": "\ud800"},
        invalid(
            "search", "search must be a string of 1 to 512 characters, without control characters"
        ),
    ),
    ("sessions_list", {"label": "x\udfff"}, invalid("label", f"label {LINE_RULE}")),
    (
        "sessions_list",
        {"pinned": True},
        invalid("pinned", "pinned is not a parameter of sessions_list"),
    ),
    (
        "sessions_list",
        {"archived": "yes"},
        invalid("archived", "archived must be a boolean (true or false)"),
    ),
    # sessions_send: the target
    ("sessions_send", HI, invalid("sessionKey", ONE_TARGET)),
    (
        "sessions_send",
        {"sessionKey": WORKER, "label": "worker", **HI},
        invalid("label", ONE_TARGET),
    ),
    ("sessions_send", {"label": "worker", "agentId": "main", **HI}, invalid("agentId", ONE_TARGET)),
    ("sessions_send", {"sessionKey": THREAD, **HI}, invalid("sessionKey", THREAD_RULE)),
    ("sessions_send", {"sessionKey": "agent:main:nobody", **HI}, unknown("agent:main:nobody")),
    ("sessions_send", {"sessionKey": PEER, **HI}, unknown(PEER)),
    (
        "sessions_send",
        {"label": "nobody", **HI},
        error("unknown_session", "Unknown label: nobody", "label"),
    ),
    ("sessions_send", {"agentId": "ops", **HI}, unknown("agent:ops:main", "agentId")),
    # sessions_send: the other fields
    ("sessions_send", {"sessionKey": WORKER}, invalid("message", "message is required")),
    (
        "sessions_send",
        {"sessionKey": WORKER, "message": ""},
        invalid("message", "message must be a non-empty string"),
    ),
    (
        "sessions_send",
        {"sessionKey": WORKER, "message": 5},
        invalid("message", "message must be a non-empty string"),
    ),
    (
        "sessions_send",
        {"sessionKey": WORKER, "watch": "true", **HI},
        invalid("watch", "watch must be a boolean (true or false)"),
    ),
    (
        "sessions_send",
        {"sessionKey": WORKER, "watch": 1, **HI},
        invalid("watch", "watch must be a boolean (true or false)"),
    ),
    (
        "sessions_send",
        {"sessionKey": WORKER, "timeoutSeconds": -1, **HI},
        invalid("timeoutSeconds", TIMEOUT),
    ),
    (
        "sessions_send",
        {"sessionKey": WORKER, "timeoutSeconds": "10", **HI},
        invalid("timeoutSeconds", TIMEOUT),
    ),
    (
        "sessions_send",
        {"sessionKey": WORKER, "timeoutSeconds": True, **HI},
        invalid("timeoutSeconds", TIMEOUT),
    ),
    (
        "sessions_send",
        {"sessionkey": WORKER, **HI},
        invalid("sessionkey", "sessionkey is not a parameter of sessions_send"),
    ),
    # sessions_spawn: the agent gives the task and options, never the child or its run
    ("sessions_spawn", {}, invalid("task", "task is required")),
    ("sessions_spawn", {"task": 5}, invalid("task", TASK)),
    ("sessions_spawn", {"task": "  \n "}, invalid("task", TASK)),
    ("sessions_spawn", {"task": "x" * 65_537}, invalid("task", TASK)),
    ("sessions_spawn", {"task": "a\x00b"}, invalid("task", TASK)),
    ("sessions_spawn", {"task": "a\u2028b"}, invalid("task", TASK)),
    ("sessions_spawn", {"task": "t", "runtime": "robot"}, invalid("runtime", RUNTIME)),
    (
        "sessions_spawn",
        {"task": "t", "runtime": "acp", "context": "fork"},
        invalid("context", CONTEXT),
    ),
    ("sessions_spawn", {"task": "t", "context": "shared"}, invalid("context", CONTEXT)),
    ("sessions_spawn", {"task": "t", "sandbox": "off"}, invalid("sandbox", SANDBOX)),
    ("sessions_spawn", {"task": "t", "thread": "yes"}, invalid("thread", THREAD_FLAG)),
    ("sessions_spawn", {"task": "t", "model": "a\nb"}, invalid("model", f"model {OPTION}")),
    ("sessions_spawn", {"task": "t", "thinking": ""}, invalid("thinking", f"thinking {OPTION}")),
    ("sessions_spawn", {"task": "t", "label": "a\u2028b"}, invalid("label", f"label {LINE_RULE}")),
    ("sessions_spawn", {"task": "t", "label": "a\u202eb"}, invalid("label", f"label {LINE_RULE}")),
    (
        "sessions_spawn",
        {"task": "t", "childSessionKey": "agent:main:subagent:c"},
        invalid("childSessionKey", "childSessionKey is not a parameter of sessions_spawn"),
    ),
    (
        "sessions_spawn",
        {"task": "t", "runId": "grab"},
        invalid("runId", "runId is not a parameter of sessions_spawn"),
    ),
    # the call itself
    (  # sessions_yield stays the host's: never a tool of this service
        "sessions_yield",
        {},
        error("unknown_tool", f"Unknown tool: sessions_yield (known: {', '.join(TOOLS)})"),
    ),
    (  # sessions_search stays the host's too
        "sessions_search",
        {},
        error(
            "unknown_tool",
            "Unknown tool: sessions_search (known: session_status, sessions_list, "
            "sessions_send, sessions_spawn, subagents, sessions_history)",
        ),
    ),
    ("sessions_history", {}, invalid("sessionKey", "sessionKey is required")),
    (
        "sessions_history",
        {"sessionKey": "agent:main:main", "offset": -1},
        invalid("offset", "offset must be a non-negative integer, at most 9007199254740991"),
    ),
    (
        "sessions_history",
        {"sessionKey": "agent:main:main", "limit": 0},
        invalid("limit", "limit must be a positive integer, at most 9007199254740991"),
    ),
    (
        "sessions_history",
        {"sessionKey": "agent:main:main", "includeTools": "yes"},
        invalid("includeTools", "includeTools must be a boolean (true or false)"),
    ),
]


class TestBadInput:
    @pytest.mark.parametrize(("tool", "arguments", "expected"), BAD)
    def test_a_bad_input_returns_the_exact_typed_error(
        self,
        world: SessionAwareness,
        dispatcher: RecordingDispatcher,
        tool: str,
        arguments: dict[str, Any],
        expected: dict[str, Any],
    ) -> None:
        """R-T1, R-S4: the error names the field and the rule; nothing is delivered."""
        assert world.tools.call(tool, arguments, caller=MAIN) == expected
        assert dispatcher.sent == []

    @pytest.mark.parametrize("arguments", [None, [], '"{}"', 7])
    def test_arguments_that_are_not_an_object_are_refused(
        self, world: SessionAwareness, arguments: Any
    ) -> None:
        """R-T1: the arguments are a JSON object (JSON text is decoded first: '"{}"', an
        object encoded twice, is a string)."""
        assert world.tools.call("sessions_list", arguments, caller=MAIN) == invalid(
            "arguments", "the arguments must be a JSON object"
        )

    def test_a_malformed_caller_is_refused(self, world: SessionAwareness) -> None:
        """R-T1: the host's caller key is checked like any session key."""
        assert world.tools.call("session_status", {}, caller=" agent:main:main") == error(
            "invalid_caller", "the caller must be a session key"
        )

    def test_a_refusal_is_logged_with_its_code_and_field(self, world: SessionAwareness) -> None:
        """R-T1: refusals are structured log events, with stable names."""
        with capture_logs() as logs:
            world.tools.call("session_status", {"changesSince": -1}, caller=MAIN)
        assert [(e["event"], e.get("code"), e.get("field")) for e in logs] == [
            ("tool_called", None, None),
            ("tool_failed", "invalid_input", "changesSince"),
        ]

    def test_a_failure_inside_the_service_is_a_typed_error_not_a_traceback(
        self, world: SessionAwareness
    ) -> None:
        """R-S4: errors are typed and never a stack trace, even when the store is gone."""
        world.close()
        answer = world.tools.call("sessions_list", {}, caller=MAIN)
        assert set(answer) == {"error"}
        assert answer["error"]["code"] in {"internal_error", "service_error"}
        assert "Traceback" not in answer["error"]["message"]
