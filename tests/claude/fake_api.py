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
from collections.abc import Callable
from typing import Any

from tests.fake_model_api import ScriptedApi, body_json

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


class FakeAnthropicApi(ScriptedApi):
    """Serve in a thread while used as a context manager; `url` is the base URL."""

    methods = ("POST", "GET", "CONNECT")

    def __init__(self, model: str = "claude-sonnet-4-5") -> None:
        super().__init__()
        self.model = model
        self._ids = itertools.count(1)

    def answer(self, method: str, path: str, body: bytes) -> tuple[str, bytes]:
        request = body_json(body)
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
