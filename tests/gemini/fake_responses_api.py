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
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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


class FakeResponsesApi:
    """Serve in a thread while used as a context manager; `url` is the base URL (`…/v1`)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: deque[Item] = deque()
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                data = api.answer(body)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> FakeResponsesApi:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def answer(self, body: bytes) -> bytes:
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            request = {}
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
        return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
