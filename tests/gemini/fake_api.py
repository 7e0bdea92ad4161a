"""A scripted stand-in for the Gemini API on 127.0.0.1, for driving the real Gemini CLI with
no network and no key (`GOOGLE_GEMINI_BASE_URL`, `GEMINI_API_KEY=fake`).

It answers `models/<m>:streamGenerateContent?alt=sse` (one server-sent event) and
`:generateContent` with the next scripted reply (a text, or a function call), `ok.` when the
script is spent, and `:countTokens` with a small count; it keeps every request's JSON body so
a test can read what the model was sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.fake_model_api import ScriptedApi, body_json

#: A scripted reply: the model's content, or a function of the request body that gives it.
Reply = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]


def text_reply(text: str) -> dict[str, Any]:
    return {"role": "model", "parts": [{"text": text}]}


def call_reply(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"role": "model", "parts": [{"functionCall": {"name": name, "args": args}}]}


class FakeGeminiApi(ScriptedApi):
    """Serve in a thread while used as a context manager; `url` is the base URL."""

    def answer(self, method: str, path: str, body: bytes) -> tuple[str, bytes]:
        request = body_json(body)
        if ":countTokens" in path:
            return "application/json", json.dumps({"totalTokens": 5}).encode()
        with self._lock:
            self.requests.append({"path": path, "body": request})
            reply = self.script.popleft() if self.script else text_reply("ok.")
        content = reply(request) if callable(reply) else reply
        response = {
            "candidates": [{"content": content, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {
                "promptTokenCount": 5,
                "candidatesTokenCount": 1,
                "totalTokenCount": 6,
            },
        }
        if "alt=sse" in path:
            return "text/event-stream", f"data: {json.dumps(response)}\r\n\r\n".encode()
        return "application/json", json.dumps(response).encode()

    def model_requests(self) -> list[dict[str, Any]]:
        """The bodies of the model requests (not token counts), oldest first."""
        with self._lock:
            return [r["body"] for r in self.requests]
