"""`tools-schema`: the tools' JSON Schemas for function-calling APIs (R-T1)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from session_awareness.application.tools import TOOLS, tool_schemas
from session_awareness.infrastructure.cli import main

W = "agent:main:subagent:worker"

#: The documents' examples of each tool's arguments (session-tool.en.md, R-S1–R-S5, R-T1–R-T3).
EXAMPLES: list[tuple[str, dict[str, Any]]] = [
    ("session_status", {}),
    ("session_status", {"sessionKey": "current"}),
    ("session_status", {"sessionKey": W, "changesSince": 12}),
    ("session_status", {"sessionKey": W, "changesSince": "12"}),
    ("sessions_list", {}),
    ("sessions_list", {"kinds": ["main", "group", "subagent"], "activeMinutes": 60, "limit": 20}),
    ("sessions_list", {"label": "worker", "agentId": "main", "search": "work"}),
    ("sessions_list", {"activeMinutes": 7.5}),
    ("sessions_send", {"sessionKey": "agent:main:main", "message": "status?", "timeoutSeconds": 0}),
    ("sessions_send", {"label": "worker", "message": "summarise", "watch": True}),
    ("sessions_send", {"agentId": "ops", "message": "deploy done", "timeoutSeconds": 30}),
    ("session_status", {"sessionKey": "global", "agentId": "ops"}),
    ("sessions_spawn", {"task": "Summarise the logs"}),
    (
        "sessions_spawn",
        {
            "task": "Summarise the logs",
            "label": "researcher",
            "runtime": "acp",
            "model": "m",
            "thinking": "high",
            "sandbox": "require",
            "thread": True,
        },
    ),
    ("sessions_spawn", {"task": "Go on from here", "context": "fork"}),
    ("sessions_list", {"archived": True}),
    ("subagents", {}),
    ("subagents", {"action": "list", "recentMinutes": 120}),
    ("subagents", {"action": "cancel", "runId": "run-1"}),
    ("sessions_history", {"sessionKey": W}),
    ("sessions_history", {"sessionKey": W, "limit": 5, "offset": 0, "includeTools": True}),
]

#: Wrong types, out-of-range values, unknown and missing fields.
WRONG: list[tuple[str, dict[str, Any]]] = [
    ("session_status", {"sessionKey": 7}),
    ("session_status", {"changesSince": True}),
    ("session_status", {"changesSince": -1}),
    ("session_status", {"changesSince": 1.5}),
    ("session_status", {"changesSince": "abc"}),
    ("session_status", {"changesSince": 2**53}),
    ("session_status", {"model": "default"}),
    ("sessions_list", {"kinds": "main"}),
    ("sessions_list", {"kinds": ["robot"]}),
    ("sessions_list", {"limit": "5"}),
    ("sessions_list", {"limit": 0}),
    ("sessions_list", {"limit": True}),
    ("sessions_list", {"activeMinutes": True}),
    ("sessions_list", {"activeMinutes": 0}),
    ("sessions_list", {"label": 3}),
    ("sessions_list", {"agentId": "a:b"}),
    ("sessions_list", {"archived": "true"}),
    ("sessions_list", {"pinned": True}),
    ("sessions_send", {"sessionKey": W}),
    ("sessions_send", {"sessionKey": W, "message": 5}),
    ("sessions_send", {"sessionKey": W, "message": "hi", "watch": "true"}),
    ("sessions_send", {"sessionKey": W, "message": "hi", "timeoutSeconds": -1}),
    ("sessions_spawn", {}),
    ("sessions_spawn", {"task": 1}),
    ("sessions_spawn", {"task": "t", "childSessionKey": W}),
    ("sessions_spawn", {"task": "t", "runId": "run-1"}),
    ("sessions_spawn", {"task": "t", "runtime": "robot"}),
    ("sessions_spawn", {"task": "t", "thread": "yes"}),
    ("subagents", {"action": "kill"}),
    ("subagents", {"recentMinutes": 0}),
    ("subagents", {"runId": 7}),
    ("subagents", {"sessionKey": W}),
]


def schema_of(name: str) -> dict[str, Any]:
    return next(tool["parameters"] for tool in tool_schemas() if tool["name"] == name)


def schema_accepts(name: str, arguments: dict[str, Any]) -> bool:
    """Whether the exported schema accepts the arguments, by a JSON Schema 2020-12 validator
    (the schema itself is first checked against the meta-schema)."""
    schema = schema_of(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema).is_valid(arguments)


def model_accepts(name: str, arguments: dict[str, Any]) -> bool:
    try:
        TOOLS[name].input.model_validate(arguments)
    except ValidationError:
        return False
    return True


class TestToolSchemas:
    def test_every_tool_has_a_name_a_description_and_an_object_schema(self) -> None:
        """R-T1: the list function-calling APIs expect, one entry per tool, all JSON."""
        schemas = json.loads(json.dumps(tool_schemas()))
        assert [tool["name"] for tool in schemas] == [
            "session_status",
            "sessions_list",
            "sessions_send",
            "sessions_spawn",
            "subagents",
            "sessions_history",
        ]
        for tool in schemas:
            assert set(tool) == {"name", "description", "parameters"}
            assert tool["description"]
            parameters = tool["parameters"]
            assert parameters["type"] == "object"
            assert parameters["additionalProperties"] is False
            assert set(parameters["required"]) <= set(parameters["properties"])
            assert all(prop.get("description") for prop in parameters["properties"].values())

    def test_the_schemas_are_self_contained(self) -> None:
        """R-T1: no $ref or $defs is left for the caller to resolve, and no null type."""
        text = json.dumps(tool_schemas())
        assert "$ref" not in text
        assert "$defs" not in text
        assert '"null"' not in text

    def test_the_properties_are_the_camel_case_names_of_the_models(self) -> None:
        """R-T1: the schema names the fields exactly as the input models accept them."""
        for tool in tool_schemas():
            model = TOOLS[tool["name"]].input
            aliases = {field.alias for field in model.model_fields.values()}
            assert set(tool["parameters"]["properties"]) == aliases

    @pytest.mark.parametrize(("name", "arguments"), EXAMPLES)
    def test_the_schema_and_the_model_accept_the_documents_examples(
        self, name: str, arguments: dict[str, Any]
    ) -> None:
        """R-T1: what the documents show is valid for the schema and for the model."""
        assert schema_accepts(name, arguments)
        assert model_accepts(name, arguments)

    @pytest.mark.parametrize(("name", "arguments"), WRONG)
    def test_the_schema_and_the_model_refuse_wrong_types(
        self, name: str, arguments: dict[str, Any]
    ) -> None:
        """R-T1, R-S4: wrong types, bounds, unknown and missing fields are refused by both."""
        assert not schema_accepts(name, arguments)
        assert not model_accepts(name, arguments)


class TestToolsSchemaCommand:
    def test_the_command_prints_the_schemas_as_json(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """R-T1: `session-awareness tools-schema` prints the list, exit code 0."""
        assert main(["tools-schema"]) == 0
        assert json.loads(capsys.readouterr().out) == tool_schemas()
