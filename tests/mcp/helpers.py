"""The MCP server as a client sees it: spawned over stdio by the official SDK's own client."""

from __future__ import annotations

import sys
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters

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
) -> AsyncIterator[Client]:
    """A client connected to a fresh server process, closed (and the process ended) after."""
    params = server_params(url, state_dir, *args, env=env)
    with anyio.fail_after(DEADLINE):
        async with Client(params, mode=mode, message_handler=updates) as client:
            yield client


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
