"""The MCP server's answer to `initialize`, given while the rest of the server starts (R-M4).

Importing the official SDK takes most of a second (the `mcp` package imports its client and
both protocol eras' models), and an agent CLI probes a new server with `initialize` and may
give up on one that is slow to answer. So `session-awareness mcp` reads the wire's first line
on a thread while it imports the SDK and opens the store: when that line is an `initialize`
request the SDK would accept, the thread answers it at once, with what the SDK's server would
answer (the same capabilities, instructions, server info and protocol version; a test holds
them equal). The SDK is then handed the same line first, so its session is initialized as
before, and its own answer to it is dropped (`WithoutAnswerTo` in `mcp_server`). Any other
first line is left to the SDK, as is everything after the first line.

This module imports no part of the SDK: it is what runs before the SDK is loaded.
"""

from __future__ import annotations

import json
import os
import select
import threading

#: The protocol revisions the SDK negotiates through `initialize` (mcp_types'
#: `HANDSHAKE_PROTOCOL_VERSIONS`; a test holds them equal): a client's offer among them is
#: answered with itself, any other offer with the newest.
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
SERVER_NAME = "session-awareness"
INSTRUCTIONS = (
    "Session awareness: when another actor (a human, another agent) changes a session you "
    "watch, you get one notice naming the session_status call (with changesSince) that tells "
    "you exactly what changed. Reconcile before acting on what you assumed about it."
)
#: What the server offers, as the SDK derives it from the handlers `build_server` registers.
CAPABILITIES = {
    "resources": {"listChanged": False, "subscribe": True},
    "tools": {"listChanged": False},
}
#: A first line longer than this is left to the SDK (an `initialize` request is small).
FIRST_LINE_LIMIT = 1 << 16
#: How often the reading thread looks whether the server is ready to read the wire itself.
POLL_SECONDS = 0.02


def initialize_result(offered: str, version: str) -> dict[str, object]:
    """The `initialize` result for a client that offered protocol revision `offered`."""
    return {
        "capabilities": CAPABILITIES,
        "instructions": INSTRUCTIONS,
        "protocolVersion": offered if offered in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1],
        "serverInfo": {"name": SERVER_NAME, "version": version},
    }


def initialize_request(line: bytes) -> tuple[int | str, str] | None:
    """(id, offered revision) of an `initialize` request in the shape the SDK accepts; None
    for any other line, which is then the SDK's to answer or refuse."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or set(message) != {"jsonrpc", "id", "method", "params"}:
        return None
    request_id, params = message["id"], message["params"]
    if (
        message["jsonrpc"] != "2.0"
        or message["method"] != "initialize"
        or isinstance(request_id, bool)
        or not isinstance(request_id, int | str)
        or not isinstance(params, dict)
        or not isinstance(params.get("protocolVersion"), str)
        or not isinstance(params.get("capabilities"), dict)
        or not _client_info(params.get("clientInfo"))
    ):
        return None
    return request_id, params["protocolVersion"]


def _client_info(info: object) -> bool:
    return (
        isinstance(info, dict)
        and isinstance(info.get("name"), str)
        and isinstance(info.get("version"), str)
    )


class EarlyAnswer:
    """The thread that reads the wire's first line and answers `initialize`, until `finish`.

    `finish` stops it and returns what it read (for the server to read again, first) and the
    id it answered, if any. Nothing is read past the first line's end in a way that is lost:
    every byte read is handed back."""

    def __init__(self, version: str, *, wire_in: int = 0, wire_out: int = 1) -> None:
        self.version, self.wire_in, self.wire_out = version, wire_in, wire_out
        self.read = bytearray()
        self.answered: int | str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mcp-initialize", daemon=True)

    def __enter__(self) -> EarlyAnswer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.finish()

    def finish(self) -> tuple[bytes, int | str | None]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        return bytes(self.read), self.answered

    def _run(self) -> None:
        while not self._stop.is_set() and len(self.read) <= FIRST_LINE_LIMIT:
            end = self.read.find(b"\n")
            if end >= 0:
                self._answer(bytes(self.read[:end]))
                return
            try:
                ready, _, _ = select.select([self.wire_in], [], [], POLL_SECONDS)
                chunk = os.read(self.wire_in, FIRST_LINE_LIMIT) if ready else None
            except (OSError, ValueError):  # no readable stdin: the server finds out itself
                return
            if chunk == b"":
                return  # the client closed the wire: the server ends on its own read
            self.read += chunk or b""

    def _answer(self, line: bytes) -> None:
        request = initialize_request(line.removesuffix(b"\r"))
        if request is None:
            return
        request_id, offered = request
        answer = {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": initialize_result(offered, self.version),
        }
        data = (json.dumps(answer, separators=(",", ":")) + "\n").encode()
        try:
            while data:
                data = data[os.write(self.wire_out, data) :]
        except OSError:  # the client has gone: the server finds out itself
            return
        self.answered = request_id
