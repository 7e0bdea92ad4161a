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
CLI = [sys.executable, "-m", "session_awareness.infrastructure.cli"]
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


@dataclass
class UserMachine:
    """A user's machine in a scratch folder, for an agent CLI run for real: a home, a
    project (`shop`), the state directory, one store."""

    root: Path
    url: str

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def project(self) -> Path:
        return self.root / "shop"

    @property
    def state(self) -> Path:
        return self.root / "state"

    def env(self) -> dict[str, str]:
        """The CLI's environment (a subclass adds its own)."""
        return self.cli_env(())

    def cli_env(self, drop: tuple[str, ...], **extra: str) -> dict[str, str]:
        """The hooks' environment without the variables whose names start with one of
        `drop` (the CLI's own) or `CI`, in this home, colours off, `extra` added."""
        env = {k: v for k, v in hook_env(self.state).items() if not k.startswith((*drop, "CI"))}
        env.update(HOME=str(self.home), NO_COLOR="1", **extra)
        return env

    def install(self, cli: str) -> subprocess.CompletedProcess[str]:
        """`session-awareness install CLI --project` into the project, on the store."""
        return subprocess.run(
            [*CLI, "install", cli, "--project", str(self.project), "--database-url", self.url],
            capture_output=True, text=True, timeout=TIMEOUT, check=False, env=self.env(),
        )  # fmt: skip


@dataclass(frozen=True)
class HookRun:
    returncode: int
    stdout: str
    stderr: str

    @property
    def told(self) -> str | None:
        """The warning the hook had the CLI show the user (its JSON `systemMessage`), if any;
        then it printed nothing else on stdout."""
        if not self.stdout:
            return None
        output = json.loads(self.stdout)
        assert set(output) == {"systemMessage"}, output
        return str(output["systemMessage"])

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


#: Enough notices (with keys near the longest a key may be) for a prompt's context of more
#: than 64 KiB: past the relay's old answer cap, and past a pipe's usual capacity.
MANY = 80


def watched_targets(count: int = MANY) -> list[str]:
    """Target keys of about 440 characters each (R-K1 allows 512)."""
    return [f"agent:claude:worker-{n:03d}-{'x' * 420}" for n in range(count)]


def seed_notices(url: str, watcher: str, targets: list[str]) -> list[str]:
    """`watcher` watches each target, and a human turn on each opens one notice for it: the
    notices' texts, oldest first."""
    from session_awareness.application import open_service  # noqa: PLC0415
    from session_awareness.domain.watch import notice_text  # noqa: PLC0415

    with open_service(url) as svc:
        svc.open_session(watcher)
        for target in targets:
            svc.open_session(target)
            assert svc.watch(watcher, target)
            assert svc.record_human_direct_message(target, channel="telegram") is not None
        texts = [notice_text(target, 0) for target in targets]
        assert set(texts) <= set(svc.pending_notices(watcher))
    return texts


class StalledHook:
    """A hook process whose stdout is a pipe of the smallest capacity nobody reads: a
    prompt's context larger than that holds the hook in its print, as a reader that has
    stopped (or a hook about to be killed) does. `kill_while_printing` kills it there, as
    Claude Code's hook timeout or the user's ^C would: Claude Code then ignores its output."""

    def __init__(self, event: dict[str, Any], *, url: str, state_dir: Path) -> None:
        import fcntl  # noqa: PLC0415 -- Linux's F_SETPIPE_SZ

        read, write = os.pipe()
        fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)
        self.out = read
        self.process = subprocess.Popen(
            [*HOOK, "--database-url", url],
            stdin=subprocess.PIPE,
            stdout=write,
            stderr=subprocess.DEVNULL,
            env=hook_env(state_dir),
        )
        os.close(write)
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(event).encode())
        self.process.stdin.close()

    def kill_while_printing(self) -> None:
        """Wait (with a deadline) until the hook has begun its output, then SIGKILL it: it
        cannot have finished printing, the pipe being full."""
        import select  # noqa: PLC0415

        from session_awareness.testing.waiting import wait_until  # noqa: PLC0415

        printing = wait_until(
            lambda: bool(select.select([self.out], [], [], 0)[0]), timeout=TIMEOUT
        )
        assert printing, "the hook printed nothing"
        assert self.process.poll() is None, "the hook finished its print"
        self.process.kill()
        self.process.wait(timeout=TIMEOUT)
        os.close(self.out)
