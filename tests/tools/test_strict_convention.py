"""Calls as strict function-calling APIs make them: every key present, `null` meaning not
given, and the arguments as the JSON text the model wrote (R-T1)."""

from __future__ import annotations

import json

import pytest
from structlog.testing import capture_logs

from session_awareness.application import SessionAwareness
from session_awareness.application.tools import SessionStatusInput
from tests.tools.conftest import RecordingDispatcher
from tests.tools.helpers import MAIN, WORKER, error, invalid

ALL_NULL_STATUS = {"sessionKey": None, "changesSince": None}
SEND_FIELDS = ("sessionKey", "label", "agentId", "message", "watch", "timeoutSeconds")


def send_arguments(**given: object) -> dict[str, object]:
    """`sessions_send` arguments with every key present, as strict mode sends them."""
    return {name: given.get(name) for name in SEND_FIELDS}


class TestNullMeansNotGiven:
    def test_session_status_with_a_null_session_key_reports_the_caller(
        self, world: SessionAwareness
    ) -> None:
        """R-T1: `{"sessionKey": null}` is the default, "current": the caller."""
        result = world.tools.call("session_status", {"sessionKey": None}, caller=WORKER)
        assert result == {"sessionKey": WORKER, "stateVersion": 1}

    def test_every_key_null_is_the_same_as_no_keys(self, world: SessionAwareness) -> None:
        """R-T1: an all-null object gives what `{}` gives, for every tool that has no
        required field."""
        for tool, nulls in (
            ("session_status", ALL_NULL_STATUS),
            ("sessions_list", dict.fromkeys(("kinds", "label", "agentId", "search"))),
        ):
            assert world.tools.call(tool, nulls, caller=MAIN) == world.tools.call(
                tool, {}, caller=MAIN
            )

    @pytest.mark.parametrize(
        "target", [{"sessionKey": WORKER}, {"label": "worker"}, {"agentId": "main"}]
    )
    def test_sessions_send_with_two_of_its_three_targets_null_delivers(
        self,
        world: SessionAwareness,
        dispatcher: RecordingDispatcher,
        target: dict[str, str],
    ) -> None:
        """R-T1, R-W2: the one non-null target is used; `watch: null` is no watch, so the
        result has no `watched`."""
        result = world.tools.call(
            "sessions_send", send_arguments(message="hi", **target), caller=MAIN
        )
        receiver = MAIN if "agentId" in target else WORKER
        assert result == {"status": "accepted", "sessionKey": receiver}
        assert dispatcher.sent == [(MAIN, receiver, "hi")]

    def test_sessions_send_with_every_target_null_is_refused(
        self, world: SessionAwareness, dispatcher: RecordingDispatcher
    ) -> None:
        """R-T1: null targets are no targets; exactly one is still needed."""
        result = world.tools.call("sessions_send", send_arguments(message="hi"), caller=MAIN)
        assert result == invalid(
            "sessionKey", "sessions_send takes exactly one of sessionKey, label or agentId"
        )
        assert dispatcher.sent == []

    def test_a_required_field_sent_as_null_is_reported_missing(
        self, world: SessionAwareness
    ) -> None:
        """R-T1: `null` for a required field reads as the field left out."""
        result = world.tools.call(
            "sessions_spawn", {"task": None, "label": None, "model": None}, caller=MAIN
        )
        assert result == invalid("task", "task is required")

    def test_a_null_inside_an_array_is_still_refused(self, world: SessionAwareness) -> None:
        """R-T1: only a whole field may be null; `kinds: [null]` names a bad item."""
        result = world.tools.call("sessions_list", {"kinds": [None]}, caller=MAIN)
        assert result["error"]["field"] == "kinds.0"

    @pytest.mark.parametrize(
        ("tool", "arguments", "field"),
        [
            ("session_status", {"sesionKey": None}, "sesionKey"),
            ("session_status", {"session_key": None}, "session_key"),  # the Python name
            ("sessions_list", {"kinds": None, "pinned": None}, "pinned"),
            ("sessions_send", {"sessionKey": WORKER, "message": "hi", "wach": None}, "wach"),
            ("sessions_spawn", {"task": "t", "runId": None}, "runId"),
            ("subagents", {"action": None, "runid": None}, "runid"),
            ("sessions_history", {"sessionKey": "current", "includeTool": None}, "includeTool"),
        ],
    )
    def test_an_unknown_field_sent_as_null_is_refused(
        self,
        world: SessionAwareness,
        dispatcher: RecordingDispatcher,
        tool: str,
        arguments: dict[str, object],
        field: str,
    ) -> None:
        """R-T1: only a field the tool has may be null; an unknown one is refused as it is
        with any other value (a misspelt name must not pass unnoticed)."""
        result = world.tools.call(tool, arguments, caller=MAIN)
        assert result == invalid(field, f"{field} is not a parameter of {tool}")
        assert dispatcher.sent == []

    def test_an_unknown_null_fields_name_is_echoed_bounded_and_escaped(
        self, world: SessionAwareness
    ) -> None:
        """R-T1: a made-up name sent with `null` is shown like any made-up name: at most 64
        characters, control and format characters escaped."""
        name = "x\u2028" + "y" * 100
        shown = "x\\u2028" + "y" * 62 + "…"
        result = world.tools.call("session_status", {name: None}, caller=MAIN)
        assert result == invalid(shown, f"{shown} is not a parameter of session_status")

    def test_the_typed_input_reads_null_as_not_given_too(self) -> None:
        """R-T1: Python hosts building inputs get the same reading."""
        assert SessionStatusInput.model_validate(ALL_NULL_STATUS) == SessionStatusInput()


class TestArgumentsAsJsonText:
    def test_the_json_text_a_model_wrote_is_run_like_its_object(
        self, world: SessionAwareness
    ) -> None:
        """R-T1: `tools.call` takes the raw arguments string; the answer is the same."""
        arguments = {"sessionKey": WORKER, "changesSince": 0}
        text = world.tools.call("session_status", json.dumps(arguments), caller=MAIN)
        assert text == world.tools.call("session_status", arguments, caller=MAIN)
        assert text["stateVersion"] == 1

    def test_strict_mode_text_with_nulls_works(self, world: SessionAwareness) -> None:
        """R-T1: the whole strict convention as text: every key, nulls for the absent."""
        result = world.tools.call("session_status", json.dumps(ALL_NULL_STATUS), caller=WORKER)
        assert result == {"sessionKey": WORKER, "stateVersion": 1}

    def test_an_empty_text_is_an_empty_object(self, world: SessionAwareness) -> None:
        """R-T1: a model calling a tool without arguments may write nothing."""
        assert world.tools.call("session_status", "  ", caller=MAIN) == world.tools.call(
            "session_status", {}, caller=MAIN
        )

    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            ('{"sessionKey": "agent:main:main"', "Expecting ',' delimiter at line 1 column 33"),
            ("{'sessionKey': 'current'}", "Expecting property name enclosed in double quotes"),
            ('{"changesSince": NaN}', "NaN is not JSON"),
            ('{"limit": Infinity}', "Infinity is not JSON"),
            ('{"sessionKey": "a", "sessionKey": "b"}', "a repeated key"),
            ("[" * 100_000, "nested too deeply"),
            (b"\xff\xfe", "not UTF-8"),
        ],
    )
    def test_malformed_json_is_a_typed_error_naming_arguments(
        self, world: SessionAwareness, text: str | bytes, reason: str
    ) -> None:
        """R-T1: malformed JSON is `invalid_input` for `arguments`, with the parser's reason,
        logged as a failed call."""
        with capture_logs() as logs:
            result = world.tools.call("session_status", text, caller=MAIN)  # type: ignore[arg-type]
        assert result["error"]["code"] == "invalid_input"
        assert result["error"]["field"] == "arguments"
        assert result["error"]["message"].startswith(
            "the arguments must be a JSON object; got malformed JSON ("
        )
        assert reason in result["error"]["message"]
        failed = [e for e in logs if e["event"] == "tool_failed"]
        assert [(e["code"], e["field"]) for e in failed] == [("invalid_input", "arguments")]

    def test_a_lone_surrogate_escaped_in_a_name_is_an_unknown_field(
        self, world: SessionAwareness
    ) -> None:
        """R-T1: JSON may write a lone surrogate as `\\ud800`; a name holding one is refused as
        an unknown field, shown escaped, not as arguments that are not an object."""
        result = world.tools.call("session_status", '{"\\ud800": null}', caller=MAIN)
        assert result == invalid("\\ud800", "\\ud800 is not a parameter of session_status")

    def test_json_text_that_is_not_an_object_is_refused_like_any_non_object(
        self, world: SessionAwareness
    ) -> None:
        """R-T1: `[1]` or `"x"` as text reads as the same non-object as in decoded form."""
        expected = error("invalid_input", "the arguments must be a JSON object", "arguments")
        for text in ("[1]", '"current"', "7", "null"):
            assert world.tools.call("session_status", text, caller=MAIN) == expected
