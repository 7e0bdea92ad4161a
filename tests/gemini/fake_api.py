"""A scripted stand-in for the Gemini API on 127.0.0.1, for driving the real Gemini CLI with
no network and no key (`GOOGLE_GEMINI_BASE_URL`, `GEMINI_API_KEY=fake`).

It answers `models/<m>:streamGenerateContent?alt=sse` (one server-sent event) and
`:generateContent` with the next scripted reply (a text, or a function call), `ok.` when the
script is spent, and `:countTokens` with a small count; it keeps every request's JSON body so
a test can read what the model was sent.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: A scripted reply: the model's content, or a function of the request body that gives it.
Reply = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]


def text_reply(text: str) -> dict[str, Any]:
    return {"role": "model", "parts": [{"text": text}]}


def call_reply(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"role": "model", "parts": [{"functionCall": {"name": name, "args": args}}]}


class FakeGeminiApi:
    """Serve in a thread while used as a context manager; `url` is the base URL."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: deque[Reply] = deque()
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                self._answer(api.answer(self.path, body))

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
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeGeminiApi:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def answer(self, path: str, body: bytes) -> tuple[str, bytes]:
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            request = {}
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
