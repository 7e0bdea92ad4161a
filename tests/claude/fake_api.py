"""A scripted stand-in for the Anthropic Messages API on 127.0.0.1, for driving the real Claude
Code CLI with no network and no key (`ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY=fake`).

`POST /v1/messages` is answered with the next scripted reply (a text, or a `tool_use` block),
`ok.` when the script is spent: as server-sent events (`message_start`, one block's
`content_block_start`/`_delta`/`_stop`, `message_delta`, `message_stop`) when the request
asks for a stream, else as one JSON message. `POST /v1/messages/count_tokens` gets a small
count; any other request a minimal answer (an empty list for a GET, `{}` for anything else).
Every request is kept, path and JSON body, so a test can read what the model was sent.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: A content block of the model's answer: `{"type": "text", …}` or `{"type": "tool_use", …}`.
Block = dict[str, Any]
#: A scripted reply: the block, or a function of the request body that gives it.
Reply = Block | Callable[[dict[str, Any]], Block]

MESSAGES = "/v1/messages"


def text_reply(text: str) -> Block:
    return {"type": "text", "text": text}


def tool_reply(name: str, arguments: dict[str, Any]) -> Block:
    """A `tool_use` block (its id filled in when it is sent)."""
    return {"type": "tool_use", "name": name, "input": arguments}


class FakeAnthropicApi:
    """Serve in a thread while used as a context manager; `url` is the base URL."""

    def __init__(self, model: str = "claude-sonnet-4-5") -> None:
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                self._answer(api.answer("POST", self.path, body))

            def do_GET(self) -> None:
                self._answer(api.answer("GET", self.path, b""))

            def do_CONNECT(self) -> None:
                # A request for another host, sent here as its proxy: kept, and refused.
                with api._lock:
                    api.requests.append({"method": "CONNECT", "path": self.path, "body": {}})
                self.send_response(403)
                self.send_header("content-length", "0")
                self.end_headers()
                self.close_connection = True

            def _answer(self, reply: tuple[str, bytes]) -> None:
                kind, data = reply
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeAnthropicApi:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def answer(self, method: str, path: str, body: bytes) -> tuple[str, bytes]:
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            request = {}
        route = path.split("?", 1)[0]
        with self._lock:
            self.requests.append({"method": method, "path": path, "body": request})
            if route != MESSAGES or method != "POST":
                reply: Reply | None = None
            else:
                reply = self.script.popleft() if self.script else text_reply("ok.")
        if reply is None:
            if route == f"{MESSAGES}/count_tokens":
                return _json({"input_tokens": 5})
            return _json({"data": [], "has_more": False} if method == "GET" else {})
        block = dict(reply(request) if callable(reply) else reply)
        if block["type"] == "tool_use":
            block.setdefault("id", f"toolu_{next(self._ids):04d}")
        message = {
            "id": f"msg_{next(self._ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", self.model),
            "content": [block],
            "stop_reason": "tool_use" if block["type"] == "tool_use" else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 5, "output_tokens": 1},
        }
        if request.get("stream"):
            return "text/event-stream", _events(message)
        return _json(message)

    def model_requests(self) -> list[dict[str, Any]]:
        """The bodies of the `POST /v1/messages` requests, oldest first."""
        with self._lock:
            return [
                r["body"]
                for r in self.requests
                if r["method"] == "POST" and r["path"].split("?", 1)[0] == MESSAGES
            ]

    def other_requests(self) -> list[tuple[str, str]]:
        """Method and path of every request that was not a model request."""
        with self._lock:
            return [
                (r["method"], r["path"])
                for r in self.requests
                if not (r["method"] == "POST" and r["path"].split("?", 1)[0] == MESSAGES)
            ]


def _json(value: object) -> tuple[str, bytes]:
    return "application/json", json.dumps(value).encode()


def _events(message: dict[str, Any]) -> bytes:
    """The message as the stream of server-sent events the Messages API sends."""
    [block] = message["content"]
    if block["type"] == "tool_use":
        start = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    else:
        start = {**block, "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"message": {**message, "content": [], "stop_reason": None}}),
        ("content_block_start", {"index": 0, "content_block": start}),
        ("content_block_delta", {"index": 0, "delta": delta}),
        ("content_block_stop", {"index": 0}),
        (
            "message_delta",
            {
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": 1},
            },
        ),
        ("message_stop", {}),
    ]
    return "".join(
        f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n" for name, data in events
    ).encode()
