"""Running the Claude Code hook the way Claude Code does: a process per event, JSON on stdin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"
HOOK = [sys.executable, "-m", "session_awareness.infrastructure.claude_hooks", "claude-code"]
TIMEOUT = 60


def fixture(name: str, **fields: Any) -> dict[str, Any]:
    """A documented hook input with the scenario's fields (session_id, agent_id, …) in it."""
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    data.update(fields)
    return data


def hook_env(state_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "SESSION_AWARE"))}
    env["SESSION_AWARENESS_STATE_DIR"] = str(state_dir)
    env.update(extra)
    return env


@dataclass(frozen=True)
class HookRun:
    returncode: int
    stdout: str
    stderr: str

    @property
    def context(self) -> str | None:
        """The `additionalContext` the hook handed Claude Code, if it printed any."""
        if not self.stdout:
            return None
        output = json.loads(self.stdout)
        assert output["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
        return str(output["hookSpecificOutput"]["additionalContext"])


def run_hook(
    event: dict[str, Any] | str,
    *,
    url: str,
    state_dir: Path,
    command: list[str] | None = None,
    args: tuple[str, ...] = (),
) -> HookRun:
    """One hook process, bounded by a timeout, as Claude Code starts it."""
    text = event if isinstance(event, str) else json.dumps(event)
    done = subprocess.run(
        [*(command or HOOK), "--database-url", url, *args],
        input=text,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=hook_env(state_dir),
        check=False,
    )
    return HookRun(done.returncode, done.stdout, done.stderr)


def lead_key(session_id: str, agent: str = "claude") -> str:
    return f"agent:{agent}:claude:{session_id}"
