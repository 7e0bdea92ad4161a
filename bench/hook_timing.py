"""`python -m bench.hook_timing [--runs N] [--cli claude-code|gemini-cli]`: start-to-exit
time of an agent CLI's hook (Claude Code's by default).

Each run is what the CLI pays per event: a process start, the event JSON on stdin, the
exit. Measured on a fresh SQLite file in two set-ups: the hook recording in-process (no MCP
server) and the hook relaying to the session's MCP server (started, as under Claude Code, by
the same parent process as the hooks). Prints the median and the 90th percentile per event.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from session_awareness.infrastructure.claude_hooks import CLIS
from session_awareness.infrastructure.claude_relay import socket_path
from session_awareness.infrastructure.claude_state import ClaudeState, process_identity

HOOK = [sys.executable, "-m", "session_awareness.infrastructure.claude_hooks"]
SERVER = [sys.executable, "-m", "session_awareness.infrastructure.cli", "mcp"]


def events(cli: str) -> dict[str, dict[str, str]]:
    """The CLI's session start and human prompt events."""
    prompt = CLIS[cli].prompt_event
    return {
        "SessionStart": {"hook_event_name": "SessionStart", "source": "resume"},
        prompt: {"hook_event_name": prompt, "prompt": "next step"},
    }


def timed(cli: str, event: dict[str, str], url: str, env: dict[str, str], runs: int) -> list[float]:
    text = json.dumps({"session_id": "lead-1", "cwd": "/home/dev/shop", **event})
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(  # noqa: S603 -- a fixed argument list
            [*HOOK, cli, "--database-url", url],
            input=text,
            text=True,
            capture_output=True,
            env=env,
            timeout=60,
            check=True,
        )
        out.append((time.perf_counter() - started) * 1000)
    return sorted(out)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hook_timing")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--cli", choices=sorted(CLIS), default="claude-code")
    args = parser.parse_args()
    runs, cli = args.runs, args.cli
    with tempfile.TemporaryDirectory() as scratch:
        state, url = Path(scratch) / "state", f"sqlite:///{scratch}/sessions.db"
        env = {
            **os.environ,
            "SESSION_AWARENESS_STATE_DIR": str(state),
            "CLAUDE_CODE_SESSION_ID": "lead-1",
        }
        rows = [
            ("in-process", name, timed(cli, event, url, env, runs))
            for name, event in events(cli).items()
        ]
        server = subprocess.Popen(  # noqa: S603 -- a fixed argument list
            [*SERVER, "--database-url", url, "--agent", CLIS[cli].default_agent],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        try:
            path = socket_path(ClaudeState(state), str(process_identity(os.getpid())))
            deadline = time.monotonic() + 60
            while not path.exists():
                if time.monotonic() > deadline:
                    raise SystemExit("the MCP server did not open its hook socket")
                time.sleep(0.05)  # polling a condition with a deadline, not waiting for a result
            rows += [
                ("via MCP server", name, timed(cli, e, url, env, runs))
                for name, e in events(cli).items()
            ]
        finally:
            server.stdin.close()  # type: ignore[union-attr]
            server.wait(timeout=30)
    print("| hook path | event | median ms | p90 ms | runs |")
    print("|---|---|---:|---:|---:|")
    for path_name, name, times in rows:
        p90 = times[int(len(times) * 0.9) - 1]
        print(f"| {path_name} | {name} | {statistics.median(times):.0f} | {p90:.0f} | {runs} |")


if __name__ == "__main__":
    main()
