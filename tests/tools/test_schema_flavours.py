"""`tool_schemas(flavor=...)`: one schema per function-calling API, each what that API takes,
and every one of them enforced by the same validation (R-T1)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from session_awareness.application import InvalidArgumentError, SessionAwareness
from session_awareness.application.tools import tool_schemas
from session_awareness.application.tools.flavours import STRUCTURE
from session_awareness.application.tools.tool_schemas import FLAVORS
from session_awareness.infrastructure.cli import main
from tests.tools.helpers import MAIN, WORKER
from tests.tools.test_schema import EXAMPLES

NAMES = [
    "session_status",
    "sessions_list",
    "sessions_send",
    "sessions_spawn",
    "subagents",
    "sessions_history",
]
#: Keywords the full JSON Schema uses that the strict flavours must say in words instead.
BOUNDS = {"minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "maxItems",
          "pattern", "default"}  # fmt: skip


def parameters(flavor: str) -> dict[str, dict[str, Any]]:
    """Each tool's parameter schema, wherever the flavour keeps it."""
    found = {}
    for entry in tool_schemas(flavor):  # type: ignore[arg-type]
        tool = entry.get("function", entry)
        found[tool["name"]] = (
            tool.get("parameters") or tool.get("input_schema") or tool.get("inputSchema")
        )
    return found


def nodes(schema: Any) -> list[dict[str, Any]]:
    """Every schema node under (and including) `schema`."""
    if not isinstance(schema, dict):
        return []
    found = [schema]
    for name in ("items", "additionalProperties"):
        found += nodes(schema.get(name))
    for branch in schema.get("anyOf", []):
        found += nodes(branch)
    for sub in schema.get("properties", {}).values():
        found += nodes(sub)
    return found


def strict_form(arguments: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """`arguments` as strict mode sends them: every property present, null when absent."""
    return {name: arguments.get(name) for name in schema["properties"]}


class TestEveryFlavour:
    @pytest.mark.parametrize("flavor", FLAVORS)
    def test_each_flavour_lists_every_tool_with_its_description(self, flavor: str) -> None:
        """R-T1: the same tools, in catalog order, as JSON, whatever the shape."""
        entries = json.loads(json.dumps(tool_schemas(flavor)))  # type: ignore[arg-type]
        plain = {tool["name"]: tool["description"] for tool in tool_schemas()}
        tools = [entry.get("function", entry) for entry in entries]
        assert [tool["name"] for tool in tools] == NAMES
        assert all(tool["description"] == plain[tool["name"]] for tool in tools)

    @pytest.mark.parametrize("flavor", FLAVORS)
    def test_each_flavours_parameters_are_a_valid_json_schema_object(self, flavor: str) -> None:
        """R-T1: a self-contained object schema that refuses unknown fields."""
        for schema in parameters(flavor).values():
            jsonschema.Draft202012Validator.check_schema(schema)
            assert schema["type"] == "object"
            assert schema["additionalProperties"] is False
            assert "$ref" not in json.dumps(schema)

    @pytest.mark.parametrize("flavor", FLAVORS)
    def test_each_flavour_accepts_the_documents_examples(self, flavor: str) -> None:
        """R-T1: what the documents show is valid under every flavour's schema (in strict
        form, every key present, where the flavour wants that)."""
        schemas = parameters(flavor)
        for name, example in EXAMPLES:
            schema = schemas[name]
            arguments = strict_form(example, schema) if flavor == "openai-strict" else example
            jsonschema.validate(arguments, schema)

    def test_an_unknown_flavour_is_a_typed_error_naming_the_argument(self) -> None:
        """R-T1: a host's typo is refused, not answered with some default shape."""
        with pytest.raises(
            InvalidArgumentError, match=r"^flavor: must be one of json-schema, openai, "
        ):
            tool_schemas("gemini")  # type: ignore[arg-type]

    @pytest.mark.parametrize("flavor", FLAVORS)
    def test_the_command_prints_each_flavour(
        self, flavor: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """R-T1: `session-awareness tools-schema --format F` prints `tool_schemas(F)`."""
        assert main(["tools-schema", "--format", flavor]) == 0
        assert json.loads(capsys.readouterr().out) == tool_schemas(flavor)  # type: ignore[arg-type]


class TestWrappers:
    def test_openai_wraps_the_full_schema_as_a_non_strict_function(self) -> None:
        """R-T1: the Chat Completions tool, strict off (the Responses API would otherwise
        default to strict and refuse the bounds)."""
        plain = {tool["name"]: tool["parameters"] for tool in tool_schemas()}
        for entry in tool_schemas("openai"):
            assert set(entry) == {"type", "function"}
            assert entry["type"] == "function"
            function = entry["function"]
            assert set(function) == {"name", "description", "parameters", "strict"}
            assert function["strict"] is False
            assert function["parameters"] == plain[function["name"]]

    def test_mcp_names_the_schema_input_schema(self) -> None:
        """R-T1: an MCP `Tool` as `tools/list` returns it."""
        plain = {tool["name"]: tool["parameters"] for tool in tool_schemas()}
        for entry in tool_schemas("mcp"):
            assert set(entry) == {"name", "description", "inputSchema"}
            assert entry["inputSchema"] == plain[entry["name"]]


class TestStrictFlavours:
    def test_openai_strict_requires_every_property_and_lets_optional_ones_be_null(self) -> None:
        """R-T1: `required` lists every property, in order; exactly the optional ones take
        null; the function says `strict: true`."""
        plain = parameters("json-schema")
        for entry in tool_schemas("openai-strict"):
            function = entry["function"]
            assert function["strict"] is True
            schema = function["parameters"]
            assert schema["required"] == list(schema["properties"])
            for name, sub in schema["properties"].items():
                optional = name not in plain[function["name"]]["required"]
                assert jsonschema.Draft202012Validator(sub).is_valid(None) is optional, name

    @pytest.mark.parametrize("flavor", ["openai-strict", "anthropic"])
    def test_strict_flavours_use_only_keywords_strict_decoders_compile(self, flavor: str) -> None:
        """R-T1: types, properties, required, additionalProperties false, items, enum,
        anyOf and descriptions; nothing else, at any depth."""
        for schema in parameters(flavor).values():
            for node in nodes(schema):
                assert set(node) <= STRUCTURE | {"description"}, node
                if node.get("type") == "object":
                    assert node["additionalProperties"] is False

    @pytest.mark.parametrize("flavor", ["openai-strict", "anthropic"])
    def test_strict_flavours_say_each_bound_in_the_description(self, flavor: str) -> None:
        """R-T1: a bound left out of the schema is in the property's description, in words
        (lengths, ranges, patterns, item counts, defaults)."""
        strict = parameters(flavor)
        for tool, schema in parameters("json-schema").items():
            for name, sub in schema["properties"].items():
                described = strict[tool]["properties"][name].get("description", "")
                for node in nodes(sub):
                    for keyword in BOUNDS & set(node):
                        value = node[keyword]
                        said = json.dumps(value) if keyword == "default" else str(value)
                        assert said in described, (tool, name, keyword, described)

    def test_anthropic_keeps_optional_fields_optional_and_never_null(self) -> None:
        """R-T1: within Anthropic's strict subset optional properties are allowed, so
        `required` is the models' own and no type takes null."""
        plain = parameters("json-schema")
        for tool, schema in parameters("anthropic").items():
            assert schema["required"] == plain[tool]["required"]
            assert '"null"' not in json.dumps(schema)

    @pytest.mark.parametrize("flavor", ["openai-strict", "anthropic"])
    def test_bounds_moved_into_words_are_still_enforced(
        self, world: SessionAwareness, flavor: str
    ) -> None:
        """R-T1: what a strict schema no longer says, validation still refuses, with the
        field's rule; the strict schema itself accepts the value."""
        schema = parameters(flavor)["sessions_list"]
        for field, value in (("limit", 0), ("label", "x" * 121), ("agentId", "a:b")):
            arguments: dict[str, Any] = {field: value}
            if flavor == "openai-strict":
                arguments = strict_form(arguments, schema)
            jsonschema.validate(arguments, schema)
            result = world.tools.call("sessions_list", arguments, caller=MAIN)
            assert result["error"]["code"] == "invalid_input"
            assert result["error"]["field"] == field

    def test_a_strict_call_on_every_tool_runs(self, world: SessionAwareness) -> None:
        """R-T1: each tool answers a call in strict form, every key present."""
        strict = parameters("openai-strict")
        calls = {
            "session_status": {"sessionKey": WORKER, "changesSince": 0},
            "sessions_list": {"kinds": ["subagent"]},
            "sessions_send": {"label": "worker", "message": "hi", "watch": True},
            "sessions_spawn": {"task": "Summarise the findings."},
            "subagents": {"action": "list", "recentMinutes": 5},
        }
        for tool, arguments in calls.items():
            given = strict_form(arguments, strict[tool])
            jsonschema.validate(given, strict[tool])
            result = world.tools.call(tool, json.dumps(given), caller=MAIN)
            assert "error" not in result, (tool, result)
