"""The MCP server as a client sees it: spawned over stdio by the official SDK's own client."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.hooks.helpers import hook_env

NOTICES = "session-awareness://notices"
#: Every exchange with a server process is bounded: a hang fails the test, never blocks it.
DEADLINE = 60.0
CLI = [sys.executable, "-m", "session_awareness.infrastructure.cli"]


def server_params(
    url: str, state_dir: Path, *args: str, env: dict[str, str] | None = None
) -> StdioServerParameters:
    return StdioServerParameters(
        command=CLI[0],
        args=[*CLI[1:], "mcp", "--database-url", url, "--poll-seconds", "0.1", *args],
        env={**hook_env(state_dir), **(env or {})},
    )


class Updates:
    """The `notifications/resources/updated` a client has received, in order."""

    def __init__(self) -> None:
        self.uris: list[str] = []

    async def __call__(self, message: Any) -> None:
        message = getattr(message, "root", message)
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))

    async def wait_for(self, count: int, timeout: float = 30) -> None:
        """Until `count` updates arrived; fails at the deadline."""
        with anyio.fail_after(timeout):
            while len(self.uris) < count:
                await anyio.sleep(0.02)


@asynccontextmanager
async def connected(
    url: str,
    state_dir: Path,
    *args: str,
    env: dict[str, str] | None = None,
    mode: str = "legacy",
    updates: Updates | None = None,
    errlog: TextIO | None = None,
) -> AsyncIterator[Client]:
    """A client connected to a fresh server process, closed (and the process ended) after;
    the process's stderr goes to `errlog` when given (a file: the SDK hands it to the
    process), else to this one's."""
    params = server_params(url, state_dir, *args, env=env)
    server: Any = params if errlog is None else stdio_client(params, errlog=errlog)
    with anyio.fail_after(DEADLINE):
        async with Client(server, mode=mode, message_handler=updates) as client:
            yield client


async def logged(path: Path, event: str, timeout: float = DEADLINE) -> None:
    """Wait until a server process started with `--verbose` and `errlog` at `path` has
    logged `event` (a deadline, not a pause: a server that never logs it fails the test)."""
    with anyio.fail_after(timeout):
        while event not in path.read_text():
            await anyio.sleep(0.05)


def run(test: Callable[[], Awaitable[None]]) -> None:
    """Run an async scenario to completion on asyncio."""
    anyio.run(test)


async def call(client: Client, name: str, arguments: dict[str, Any] | None = None) -> Any:
    """A tool call's JSON result, and whether it was flagged as an error."""
    result = await client.call_tool(name, arguments or {})
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    return result.structured_content, bool(result.is_error), text.text


async def subscribe(client: Client) -> None:
    with warnings.catch_warnings():  # the 2025 protocol's subscription, deprecated by 2026's
        warnings.simplefilter("ignore")
        await client.subscribe_resource(NOTICES)


class RawServer:
    """A server process driven over raw stdio: bytes in, each line out read with a deadline,
    as a client that is not the SDK sees it."""

    INITIALIZE = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }

    def __init__(self, url: str, state_dir: Path, *args: str) -> None:
        params = server_params(url, state_dir, *args)
        self.process = subprocess.Popen(
            [params.command, *params.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=params.env,
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._errors: list[bytes] = []
        out, err = self.process.stdout, self.process.stderr
        assert out is not None and err is not None
        threading.Thread(target=lambda: [self._lines.put(x) for x in out], daemon=True).start()
        self._stderr = threading.Thread(target=lambda: self._errors.extend(err), daemon=True)
        self._stderr.start()

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *_: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=DEADLINE)

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def answer(self, timeout: float = 30) -> dict[str, Any]:
        """The next message on stdout; fails if none comes before the deadline."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer within {timeout} s") from None
        message: dict[str, Any] = json.loads(line)
        return message

    def initialize(self) -> None:
        self.send(json.dumps(self.INITIALIZE).encode())
        assert self.answer()["id"] == 0
        self.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    def stderr(self) -> str:
        """What the process wrote on stderr (all of it once it has exited)."""
        if self.process.poll() is not None:
            self._stderr.join(timeout=DEADLINE)
        return b"".join(self._errors).decode(errors="replace")

    def events(self) -> list[dict[str, Any]]:
        """The log events on stderr, for a server started with `--log-format json`."""
        lines = self.stderr().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]
