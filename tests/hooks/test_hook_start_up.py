"""What a hook process imports: a hook run is a process start on every prompt, so its imports
are the user's wait (issue 39). Each test runs the hook as Claude Code does (a process, JSON on
stdin) under a probe that lists the modules the hook added to the interpreter's own start-up."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from session_awareness.application import open_service
from session_awareness.infrastructure.claude_relay import socket_path
from session_awareness.infrastructure.claude_state import ClaudeState, process_identity
from tests.hooks.helpers import TIMEOUT, fixture, hook_env, lead_key

#: Runs the hook module as `python -m` does, then writes the modules it added to the file the
#: environment names (stdout and stderr stay the hook's).
PROBE = """
import sys
before = set(sys.modules)
import runpy
sys.argv = ["claude_hooks", *sys.argv[1:]]
try:
    runpy.run_module("session_awareness.infrastructure.claude_hooks", run_name="__main__")
except SystemExit:
    pass
added = sorted(set(sys.modules) - before - {"runpy"})
import os
with open(os.environ["PROBE_OUT"], "w") as out:
    out.write("\\n".join(added))
"""
#: Standard-library modules the relayed path leaves alone: each costs a share of the wait.
HEAVY_STDLIB = {
    "argparse",
    "dataclasses",
    "hashlib",
    "inspect",
    "logging",
    "pathlib",
    "subprocess",
    "tempfile",
    "typing",
    "uuid",
}


def hook_modules(
    event: dict[str, object], url: str, state: Path, out: Path
) -> tuple[str, set[str]]:
    """The hook's stdout and the modules it imported beyond the interpreter's start-up."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "claude-code", "--database-url", url],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**hook_env(state), "PROBE_OUT": str(out)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, set(out.read_text().split())


def third_party(modules: set[str]) -> list[str]:
    return sorted(
        m
        for m in modules
        if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] != "session_awareness"
    )


@contextmanager
def relay_server(state: Path, notices: list[str]) -> Iterator[list[dict[str, object]]]:
    """A stand-in for the session's MCP server on the hook socket of this process (the hook's
    parent, as Claude Code is of both): it answers every request with `notices`."""
    host = process_identity(os.getpid())
    assert host is not None
    path = socket_path(ClaudeState(state), host)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    received: list[dict[str, object]] = []
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()
    listener.settimeout(TIMEOUT)

    def serve() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:  # closed: the test is over
            return
        with conn, conn.makefile("rwb") as stream:
            received.append(json.loads(stream.readline()))
            stream.write(json.dumps({"notices": notices}).encode() + b"\n")

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    try:
        yield received
    finally:
        listener.close()
        path.unlink(missing_ok=True)
        worker.join(timeout=TIMEOUT)


class TestARelayedPrompt:
    def test_it_imports_the_standard_library_only_and_none_of_its_heavy_modules(
        self, tmp_path: Path
    ) -> None:
        """A prompt whose session's MCP server is up is handed to it by a hook that imports
        no third-party package, no layer of the service, and none of the slow standard
        modules (R-A1: a hook never blocks the turn it serves); the server's notices are
        the hook's output."""
        state = tmp_path / "state"
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        event = fixture("user_prompt_submit", session_id="lead-1")
        with relay_server(state, ["a notice"]) as received:
            stdout, modules = hook_modules(event, url, state, tmp_path / "modules.txt")
        assert [r["signal"]["event"] for r in received] == ["UserPromptSubmit"]  # type: ignore[index]
        assert "a notice" in json.loads(stdout)["hookSpecificOutput"]["additionalContext"]
        assert third_party(modules) == []
        assert sorted(m for m in modules if m.startswith("session_awareness.")) == [
            "session_awareness.configuration",
            "session_awareness.infrastructure",  # the hook itself runs as `__main__`
            "session_awareness.infrastructure.claude_relay",
            "session_awareness.infrastructure.claude_state",
        ]
        assert sorted(modules & HEAVY_STDLIB) == []


class TestInProcess:
    def test_a_prompt_without_a_server_records_in_process(self, tmp_path: Path) -> None:
        """With no server up, the hook loads the service itself and records the turn
        (R-A1); the relay's lean imports change nothing of what is opened."""
        state = tmp_path / "state"
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        event = fixture("user_prompt_submit", session_id="lead-1")
        stdout, modules = hook_modules(event, url, state, tmp_path / "modules.txt")
        assert stdout == ""
        assert "session_awareness.application" in modules
        with open_service(url) as svc:
            assert [row.key for row in svc.session_rows()] == [lead_key("lead-1")]

    @pytest.mark.parametrize("text", ["{not json", json.dumps(fixture("stop"))])
    def test_input_that_records_nothing_loads_no_service(self, text: str, tmp_path: Path) -> None:
        """An event the hook ignores is refused before anything heavy is imported."""
        out = tmp_path / "modules.txt"
        done = subprocess.run(
            [sys.executable, "-c", PROBE, "claude-code"],
            input=text,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env={**hook_env(tmp_path / "state"), "PROBE_OUT": str(out)},
            check=False,
        )
        assert (done.returncode, done.stdout) == (0, "")
        assert "ignored" in done.stderr
        modules = set(out.read_text().split())
        assert third_party(modules) == []
        assert not [m for m in modules if m.startswith("session_awareness.application")]
