"""A scripted stand-in for the OpenAI Responses API on 127.0.0.1, for driving the real Codex
CLI with no network and no key: a `model_providers` entry in `~/.codex/config.toml` names
its `url` (`wire_api = "responses"`, no WebSocket).

It answers `POST …/responses` with one streamed output item, the next scripted one (a
message, or a function call into an MCP server's namespace), `ok.` when the script is spent;
it keeps every request's JSON body so a test can read what the model was sent (the tools,
the calls' outputs).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.fake_model_api import ScriptedApi, body_json

#: A scripted output item, or a function of the request body that gives it.
Item = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]


def message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "id": "msg-fake",
            "content": [{"type": "output_text", "text": text}]}  # fmt: skip


def mcp_call(server: str, tool: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    """A call of `tool` of the MCP server `server` (Codex offers each server's tools as a
    namespace `mcp__<server, '-' as '_'>`)."""
    return {"type": "function_call", "id": f"fc-{call_id}", "call_id": call_id, "name": tool,
            "namespace": f"mcp__{server.replace('-', '_')}",
            "arguments": json.dumps(arguments)}  # fmt: skip


def outputs(request: dict[str, Any]) -> dict[str, str]:
    """The text of each function call's output in a request, by call id."""
    found = {}
    for item in request.get("input", []):
        if item.get("type") == "function_call_output":
            output = item["output"]
            if not isinstance(output, str):
                output = "".join(part.get("text", "") for part in output)
            found[item["call_id"]] = output
    return found


class FakeResponsesApi(ScriptedApi):
    """Serve in a thread while used as a context manager; `url` is the base URL (`…/v1`)."""

    base_path = "/v1"

    def answer(self, method: str, path: str, body: bytes) -> tuple[str, bytes]:
        request = body_json(body)
        with self._lock:
            self.requests.append(request)
            scripted = self.script.popleft() if self.script else message("ok.")
        item = scripted(request) if callable(scripted) else scripted
        usage = {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}
        events = [
            {"type": "response.created", "response": {"id": "resp-fake"}},
            {"type": "response.output_item.done", "item": item},
            {"type": "response.completed", "response": {"id": "resp-fake", "usage": usage}},
        ]
        stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        return "text/event-stream", stream.encode()
