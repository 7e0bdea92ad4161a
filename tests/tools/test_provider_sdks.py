"""The providers' own SDKs take our tool schemas as they are (R-T1). No network: only the
SDKs' schema transforms, request types and the Agents SDK's local tool invocation run."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from pydantic import ConfigDict, TypeAdapter

from session_awareness.application import SessionAwareness
from session_awareness.application.tools import tool_schemas
from session_awareness.infrastructure.cli import main
from tests.tools.conftest import RecordingDispatcher
from tests.tools.helpers import MAIN, WORKER

# Dev dependencies; `make test-dist`'s clean venv lacks them, and then skips this module.
openai_pydantic = pytest.importorskip("openai.lib._pydantic")
agents = pytest.importorskip("agents")
anthropic_transform = pytest.importorskip("anthropic.lib._parse._transform")
mcp_types = pytest.importorskip("mcp.types")

from agents.models.chatcmpl_converter import Converter  # noqa: E402
from agents.strict_schema import ensure_strict_json_schema  # noqa: E402
from agents.tool_context import ToolContext  # noqa: E402
from anthropic.types import ToolParam  # noqa: E402
from openai.types.chat import ChatCompletionFunctionToolParam  # noqa: E402
from openai.types.responses import FunctionToolParam  # noqa: E402


def accepts(typed_dict: Any, value: dict[str, Any]) -> bool:
    """The SDK's request type takes `value` whole: it validates, and no key is left over."""
    strict: Any = type(typed_dict.__name__, (typed_dict,), {})
    strict.__pydantic_config__ = ConfigDict(extra="forbid")
    TypeAdapter(strict).validate_python(value)
    return True


def function_tool(entry: dict[str, Any], svc: SessionAwareness, caller: str) -> agents.FunctionTool:
    """An Agents SDK tool built from our `openai-strict` entry, run through `tools.call` with
    the raw arguments string the model produced."""
    function = entry["function"]

    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        return json.dumps(svc.tools.call(function["name"], arguments, caller=caller))

    return agents.FunctionTool(
        name=function["name"],
        description=function["description"],
        params_json_schema=function["parameters"],
        on_invoke_tool=invoke,
        strict_json_schema=True,
    )


def invoked(tool: agents.FunctionTool, arguments: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(arguments)
    context = ToolContext(
        context=None, tool_name=tool.name, tool_call_id="call_1", tool_arguments=text
    )
    result: dict[str, Any] = json.loads(asyncio.run(tool.on_invoke_tool(context, text)))
    return result


class TestOpenAI:
    def test_the_sdks_strict_transform_leaves_our_strict_schemas_unchanged(self) -> None:
        """R-T1: `openai`'s strict transform has nothing left to do to our parameters."""
        for entry in tool_schemas("openai-strict"):
            ours = entry["function"]["parameters"]
            given = copy.deepcopy(ours)
            assert openai_pydantic._ensure_strict_json_schema(given, path=(), root=given) == ours

    def test_the_commands_strict_output_passes_the_sdks_transform_unchanged(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """R-T1: what `session-awareness tools-schema --format openai-strict` prints is what
        the SDK's strict transform would send."""
        assert main(["tools-schema", "--format", "openai-strict"]) == 0
        for entry in json.loads(capsys.readouterr().out):
            printed = entry["function"]["parameters"]
            given = copy.deepcopy(printed)
            assert openai_pydantic._ensure_strict_json_schema(given, path=(), root=given) == printed
            assert ensure_strict_json_schema(copy.deepcopy(printed)) == printed

    def test_the_agents_sdk_strict_check_leaves_our_strict_schemas_unchanged(self) -> None:
        """R-T1: the Agents SDK (strict by default) neither refuses nor rewrites them."""
        for entry in tool_schemas("openai-strict"):
            ours = entry["function"]["parameters"]
            assert ensure_strict_json_schema(copy.deepcopy(ours)) == ours

    def test_a_function_tool_from_our_schema_is_sent_exactly_as_we_export_it(
        self, world: SessionAwareness
    ) -> None:
        """R-T1: the Agents SDK's Chat Completions form of the tool is our entry."""
        for entry in tool_schemas("openai-strict"):
            assert Converter.tool_to_openai(function_tool(entry, world, MAIN)) == entry

    @pytest.mark.parametrize("flavor", ["openai", "openai-strict"])
    def test_the_sdks_request_types_take_our_entries(self, flavor: str) -> None:
        """R-T1: a Chat Completions tool, and flattened, a Responses API function tool."""
        for entry in tool_schemas(flavor):  # type: ignore[arg-type]
            assert accepts(ChatCompletionFunctionToolParam, entry)
            assert accepts(FunctionToolParam, {"type": "function", **entry["function"]})

    def test_a_function_tool_call_round_trips_through_the_tools(
        self, world: SessionAwareness, dispatcher: RecordingDispatcher
    ) -> None:
        """R-T1: the strict calls a model makes (every key, nulls for the absent), invoked
        by the Agents SDK, are answered: the caller's own status, and a send by label."""
        tools = {
            entry["function"]["name"]: function_tool(entry, world, WORKER)
            for entry in tool_schemas("openai-strict")
        }
        status = invoked(tools["session_status"], {"sessionKey": None, "changesSince": None})
        assert status == {"sessionKey": WORKER, "stateVersion": 1}
        sent = invoked(
            tools["sessions_send"],
            {
                "sessionKey": None,
                "label": "helper",
                "agentId": None,
                "message": "status?",
                "watch": None,
                "timeoutSeconds": None,
            },
        )
        assert sent == {"status": "accepted", "sessionKey": "agent:main:subagent:helper"}
        assert dispatcher.sent == [(WORKER, "agent:main:subagent:helper", "status?")]
        every_key = dict.fromkeys(tools["sessions_list"].params_json_schema["properties"])
        refused = invoked(tools["sessions_list"], {**every_key, "limit": 0})
        assert refused["error"]["field"] == "limit"


class TestAnthropic:
    def test_the_sdks_strict_transform_leaves_our_schemas_unchanged(self) -> None:
        """R-T1: `transform_schema` (what the SDK does to reach the strict subset) has
        nothing to move or drop."""
        for entry in tool_schemas("anthropic"):
            ours = entry["input_schema"]
            assert anthropic_transform.transform_schema(copy.deepcopy(ours)) == ours

    def test_the_sdks_tool_param_takes_our_entries(self) -> None:
        """R-T1: `anthropic.types.ToolParam`, whole, and with strict tool use turned on."""
        for entry in tool_schemas("anthropic"):
            assert accepts(ToolParam, entry)
            assert accepts(ToolParam, {**entry, "strict": True})


class TestMcp:
    def test_the_sdks_tool_type_round_trips_our_entries(self) -> None:
        """R-T1: `mcp.types.Tool` reads each entry and writes it back unchanged."""
        for entry in tool_schemas("mcp"):
            tool = mcp_types.Tool.model_validate(entry)
            assert tool.model_dump(by_alias=True, exclude_none=True, mode="json") == entry
