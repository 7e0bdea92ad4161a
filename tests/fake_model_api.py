"""What the scripted stand-ins for the model APIs share (`tests/gemini/fake_api.py`,
`tests/gemini/fake_responses_api.py`, `tests/claude/fake_api.py`): an HTTP server on
127.0.0.1, served in a thread while the API is used as a context manager, every request of
the methods it serves answered by its `answer`, the script of replies and the requests kept
under one lock."""

from __future__ import annotations

import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class ScriptedApi:
    """The server and the bookkeeping; a subclass answers (`answer`) and says what it kept."""

    #: The methods served; any other is refused (501), as a server refuses what it lacks.
    #: `CONNECT` (a request for another host, sent here as its proxy) is kept and refused.
    methods: tuple[str, ...] = ("POST",)
    #: Appended to the server's address to make `url`.
    base_path = ""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: deque[Any] = deque()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{self.base_path}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def answer(self, method: str, path: str, body: bytes) -> tuple[str, bytes]:
        """The content type and the bytes of the answer to one request."""
        raise NotImplementedError

    def proxied(self, target: str) -> None:
        with self._lock:
            self.requests.append({"method": "CONNECT", "path": target, "body": {}})


def body_json(body: bytes) -> dict[str, Any]:
    """A request's JSON body; `{}` when it has none or it is not JSON."""
    try:
        found = json.loads(body or b"{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _handler(api: ScriptedApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self._serve("POST")

        def do_GET(self) -> None:
            self._serve("GET")

        def do_CONNECT(self) -> None:
            if "CONNECT" not in api.methods:
                self.send_error(501)
                return
            api.proxied(self.path)
            self.send_response(403)
            self.send_header("content-length", "0")
            self.end_headers()
            self.close_connection = True

        def _serve(self, method: str) -> None:
            if method not in api.methods:
                self.send_error(501)
                return
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            kind, data = api.answer(method, self.path, body)
            self.send_response(200)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return Handler
