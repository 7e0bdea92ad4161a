"""Codex CLI over MCP only: the pinned `@openai/codex` from the npm registry takes the server
with its own `codex mcp add` (into `~/.codex/config.toml`), lists it as a stdio server, and the
server it would start lists the session tools and answers a call for the caller the entry names
(R-A1); under `codex exec`, its model a scripted fake Responses API on 127.0.0.1
(`fake_responses_api.py`), the model's calls of the session tools reach that caller. Codex
gets no automatic notices this way: nothing hands them to its prompt, so its model asks with
`session_notices`.

Slow (`make test-slow`); node and npm as for the Gemini CLI test (`tests/gemini/npm.py`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from session_awareness.application import open_service
from tests.gemini.fake_responses_api import FakeResponsesApi, mcp_call, message, outputs
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


#: What docs/claude-code.md has the user add to the entry `codex mcp add` wrote: its tools
#: approved (`codex exec` cannot ask before a call), and the server awaited before the first
#: turn (else a turn that starts first finds no such tool, and a server that fails to start
#: is never said).
SERVER_SETTINGS = 'default_tools_approval_mode = "approve"\nrequired = true\n'
RUN_TIMEOUT = 120


def _codex_exec(codex: list[str], prompt: str, env: dict[str, str], cwd: Path) -> str:
    """One `codex exec` turn; its stderr. Its process group is ended on a timeout (the
    node wrapper's native child would outlive the wrapper)."""
    ran = subprocess.Popen([*codex, "exec", "--skip-git-repo-check", prompt], cwd=cwd,
                           env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        _, err = ran.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(ran.pid, signal.SIGKILL)
        ran.communicate()
        raise
    assert ran.returncode == 0, err[-3000:]
    return err


def test_under_codex_exec_the_caller_watches_a_gemini_session_and_hears_of_it(
    codex: list[str], tmp_path: Path
) -> None:
    """R-A1, R-W2: the entry as docs/claude-code.md gives it (`--caller agent:codex:main
    --visibility all`, its tools approved and the server awaited, as it says); under the real
    Codex `exec` its model (a scripted fake) calls `session_watch` on a Gemini CLI session,
    which is taken (the caller, which no hook opened, was `unknown_session`); a human turn
    there is the one notice its `session_notices` drain returns at the next turn."""
    home, state, url = tmp_path / "home", tmp_path / "state", f"sqlite:///{tmp_path / 'x.db'}"
    project = tmp_path / "shop"
    project.mkdir()
    home.mkdir()
    worker = "agent:gemini:gemini:w1"
    with open_service(url) as svc:
        svc.open_session(worker, agent_id="gemini", kind="main")
    with FakeResponsesApi() as api:
        env = {k: v for k, v in hook_env(state).items() if not k.startswith(("OPENAI", "CODEX"))}
        env.update(HOME=str(home), OPENAI_API_KEY="fake")
        server = [sys.executable, "-m", "session_awareness.infrastructure.cli", "mcp",
                  "--caller", CALLER, "--visibility", "all", "--database-url", url]  # fmt: skip
        add = [*codex, "mcp", "add", "session-awareness",
               "--env", f"SESSION_AWARENESS_STATE_DIR={state}", "--", *server]  # fmt: skip
        done = subprocess.run(add, capture_output=True, text=True, timeout=TIMEOUT,
                              check=False, env=env)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        config = home / ".codex" / "config.toml"
        header = "[mcp_servers.session-awareness]\n"
        text = config.read_text()
        assert header in text
        config.write_text(
            'model = "fake-model"\nmodel_provider = "fake"\n'
            + text.replace(header, header + SERVER_SETTINGS)
            + f'\n[model_providers.fake]\nname = "fake"\nbase_url = "{api.url}"\n'
            'wire_api = "responses"\nenv_key = "OPENAI_API_KEY"\n'
            "supports_websockets = false\nrequest_max_retries = 0\nstream_max_retries = 0\n"
        )

        def answered(call_id: str) -> Any:
            return json.loads(outputs(api.requests[-1])[call_id].split("Output:", 1)[-1])

        api.script.extend([
            mcp_call("session-awareness", "session_watch", {"sessionKey": worker}, "watch"),
            message("Watching."),
        ])  # fmt: skip
        _codex_exec(codex, "Watch the worker.", env, project)
        assert answered("watch") == {"sessionKey": worker, "watched": True}

        with open_service(url) as svc:
            svc.record_human_direct_message(worker, channel="gemini-cli")
        api.script.extend([
            mcp_call("session-awareness", "session_notices", {"drain": True}, "notices"),
            message("Reconciling."),
        ])  # fmt: skip
        _codex_exec(codex, "Anything new?", env, project)
        notices = answered("notices")
        assert (notices["sessionKey"], notices["drained"]) == (CALLER, True)
        [notice] = notices["notices"]
        assert notice.startswith(f'Session "{worker}" changed (other actor).')
