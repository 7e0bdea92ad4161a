"""Codex CLI over MCP only: the pinned `@openai/codex` from the npm registry takes the server
with its own `codex mcp add` (into `~/.codex/config.toml`), lists it as a stdio server, and the
server it would start lists the session tools and answers a call for the caller the entry names
(R-A1). Codex gets no automatic notices this way: nothing hands them to its prompt, so its
model asks with `session_notices`.

Slow (`make test-slow`); node and npm as for the Gemini CLI test (`tests/gemini/npm.py`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from session_awareness.application import open_service
from tests.gemini.npm import npm_cli
from tests.hooks.helpers import TIMEOUT, hook_env
from tests.mcp.helpers import DEADLINE, call, run

pytestmark = pytest.mark.slow

VERSION = "0.171.0"
CALLER, WORKER = "agent:codex:main", "agent:codex:worker"


@pytest.fixture(scope="module")
def codex() -> list[str]:
    return npm_cli("@openai/codex", VERSION, "bin/codex.js")


def test_codex_takes_the_server_and_the_server_answers_its_caller(
    codex: list[str], tmp_path: Path
) -> None:
    """`codex mcp add session-awareness … -- <python> -m session_awareness.infrastructure.cli
    mcp --caller KEY --database-url URL` as the README documents it; `codex mcp list --json`
    shows it enabled, as a stdio server; started as Codex would start it, it lists the tools
    and answers `session_notices` for KEY with the notice a human turn in a watched session
    opened (R-A1, R-N3)."""
    home, state, url = tmp_path / "home", tmp_path / "state", f"sqlite:///{tmp_path / 'x.db'}"
    home.mkdir()
    env = {**hook_env(state), "HOME": str(home)}
    server = [sys.executable, "-m", "session_awareness.infrastructure.cli", "mcp",
              "--caller", CALLER, "--database-url", url]  # fmt: skip
    add = [*codex, "mcp", "add", "session-awareness",
           "--env", f"SESSION_AWARENESS_STATE_DIR={state}", "--", *server]  # fmt: skip
    done = subprocess.run(add, capture_output=True, text=True, timeout=TIMEOUT, check=False,
                          env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    config = tomllib.loads((home / ".codex" / "config.toml").read_text())
    assert config["mcp_servers"]["session-awareness"]["command"] == sys.executable

    listed = subprocess.run([*codex, "mcp", "list", "--json"], capture_output=True, text=True,
                            timeout=TIMEOUT, check=False, env=env)  # fmt: skip
    assert listed.returncode == 0, listed.stderr[-2000:]
    [entry] = [e for e in json.loads(listed.stdout) if e["name"] == "session-awareness"]
    transport = entry["transport"]
    assert (entry["enabled"], transport["type"]) == (True, "stdio")
    assert [transport["command"], *transport["args"]] == server

    with open_service(url) as svc:
        svc.open_session(CALLER)
        svc.open_session(WORKER)
        assert svc.watch(CALLER, WORKER)
        svc.record_human_direct_message(WORKER, channel="terminal")

    params = StdioServerParameters(
        command=transport["command"],
        args=transport["args"],
        env={**hook_env(state), **transport["env"]},
    )

    async def scenario() -> None:
        with anyio.fail_after(DEADLINE):
            async with Client(params) as client:
                tools = {tool.name for tool in (await client.list_tools()).tools}
                assert {"session_status", "session_notices", "session_watch"} <= tools
                notices, failed, _ = await call(client, "session_notices", {"drain": True})
                assert (failed, notices["sessionKey"], notices["drained"]) == (False, CALLER, True)
                [notice] = notices["notices"]
                assert notice.startswith(f'Session "{WORKER}" changed (other actor).')
                status, failed, _ = await call(client, "session_status", {"sessionKey": "current"})
                assert (failed, status["sessionKey"]) == (False, CALLER)

    run(scenario)
