"""`python -m bench.hook_timing [--runs N] [--cli claude-code|gemini-cli]`: the start-up waits
people feel (issue 39), each timed as the whole process a host spawns, from its start to its
exit (or, for the MCP server, to its answer to `initialize`).

- **Hooks**: what the agent CLI pays per event: a shell (`sh -c`, as Claude Code and Gemini
  CLI run a hook's command) running the command `install` writes, the event JSON on stdin, the
  exit. On a fresh SQLite file in two set-ups: the hook recording in-process (no MCP server),
  and the hook relaying to the session's MCP server (started, as under Claude Code, by the
  same parent process as the hooks).
- **MCP server**: spawned with the arguments `install` writes, `initialize` written at once;
  the time until its answer arrives.
- **CLI**: `--version`, `--help`, and the looking commands `status` and `list` on a small
  SQLite store, as a shell runs them.
- A bare interpreter start (`python -c pass`) beside them, the floor every row stands on.

Every process runs with the bytecode cache an install leaves (written once, in a scratch
folder, by a warm-up run): `PYTHONDONTWRITEBYTECODE` is dropped for the children. Prints the
median, the fastest and the slowest run of each row, and the median CPU time (user + system)
of the process, which a shared machine's load moves far less than the wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from session_awareness.infrastructure.claude_hooks import CLIS
from session_awareness.infrastructure.claude_relay import socket_path
from session_awareness.infrastructure.claude_state import ClaudeState, process_identity
from session_awareness.infrastructure.install_claude import hook_command, server_entry

CLI = [sys.executable, "-m", "session_awareness.infrastructure.cli"]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}
WARM_UP = 1


def events(cli: str) -> dict[str, dict[str, str]]:
    """The CLI's session start and human prompt events."""
    prompt = CLIS[cli].prompt_event
    return {
        "SessionStart": {"hook_event_name": "SessionStart", "source": "resume"},
        prompt: {"hook_event_name": prompt, "prompt": "next step"},
    }


def rounds(runs: int, once: Callable[[], float]) -> tuple[list[float], float | None]:
    """`runs` timings in ms, after the warm-up (which writes the bytecode cache), and the
    median CPU time of the processes they ran (None where the process outlives the timing)."""
    for _ in range(WARM_UP):
        once()
    CPU.clear()
    times = sorted(once() for _ in range(runs))
    cpu = [t for ts in CPU.values() for t in ts]
    return times, statistics.median(cpu) if len(cpu) == runs else None


#: The CPU time (user + system, ms) of each process `timed_process` ran, by its argv: on a
#: shared machine the wall time grows with the load, the process's own CPU time far less.
CPU: dict[tuple[str, ...], list[float]] = {}


def timed_process(argv: list[str], env: dict[str, str], stdin: str = "") -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(  # noqa: S603 -- a fixed argument list
        argv, input=stdin, text=True, capture_output=True, env=env, timeout=60, check=True
    )
    elapsed = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    CPU.setdefault(tuple(argv), []).append(cpu)
    return elapsed


def hook(cli: str, event: dict[str, str], url: str, env: dict[str, str]) -> Callable[[], float]:
    """One hook run as the CLI starts it: the installed command, through a shell."""
    text = json.dumps({"session_id": "lead-1", "cwd": "/home/dev/shop", **event})
    command = hook_command(url, CLIS[cli].default_agent, CLIS[cli])
    return lambda: timed_process(["/bin/sh", "-c", command], env, text)


def server_argv(cli: str, url: str) -> list[str]:
    entry = server_entry(url, CLIS[cli].default_agent, "agent", CLIS[cli])
    return [entry["command"], *entry["args"]]


def initialize(cli: str, url: str, env: dict[str, str]) -> float:
    """From the MCP server's spawn to its answer to `initialize` (sent at once)."""
    started = time.perf_counter()
    server = subprocess.Popen(  # noqa: S603 -- a fixed argument list
        server_argv(cli, url),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert server.stdin is not None and server.stdout is not None  # noqa: S101 -- piped
    server.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
    server.stdin.flush()
    answer = server.stdout.readline()
    elapsed = (time.perf_counter() - started) * 1000
    server.stdin.close()
    server.wait(timeout=60)
    if b'"result"' not in answer:
        raise SystemExit(f"the MCP server did not answer initialize: {answer!r}")
    return elapsed


def seed(url: str) -> str:
    """A small store (a lead, three workers, a few turns); the key `status` reads."""
    from session_awareness.application import open_service  # noqa: PLC0415

    lead = "agent:main:main"
    with open_service(url) as svc:
        svc.open_session(lead)
        for n in range(3):
            worker = f"agent:main:subagent:w{n}"
            svc.record_child_spawned(worker, parent=lead, run_id=f"run-{n}")
            svc.record_human_direct_message(worker, channel="bench")
    return lead


def hook_rows(
    cli: str, scratch: Path, env: dict[str, str], runs: int
) -> list[tuple[str, str, tuple[list[float], float | None]]]:
    url = f"sqlite:///{scratch}/hooks.db"
    state = Path(env["SESSION_AWARENESS_STATE_DIR"])
    rows = [
        ("hook in-process", name, rounds(runs, hook(cli, event, url, env)))
        for name, event in events(cli).items()
    ]
    server = subprocess.Popen(  # noqa: S603 -- a fixed argument list
        server_argv(cli, url),
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
            ("hook via MCP server", name, rounds(runs, hook(cli, e, url, env)))
            for name, e in events(cli).items()
        ]
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(timeout=30)
    return rows


def start_up_rows(
    cli: str, scratch: Path, env: dict[str, str], runs: int
) -> list[tuple[str, str, tuple[list[float], float | None]]]:
    url = f"sqlite:///{scratch}/small.db"
    key = seed(url)
    shell = [
        ("--version", [*CLI, "--version"]),
        ("--help", [*CLI, "--help"]),
        ("status", [*CLI, "status", key, "--database-url", url]),
        ("list", [*CLI, "list", "--database-url", url]),
    ]
    rows = [
        (
            "interpreter",
            "python -c pass",
            rounds(runs, lambda: timed_process([sys.executable, "-c", "pass"], env)),
        )
    ]
    rows += [
        ("CLI", name, rounds(runs, lambda argv=argv: timed_process(argv, env)))  # type: ignore[misc]
        for name, argv in shell
    ]
    rows.append(
        ("MCP server", "initialize answered", rounds(runs, lambda: initialize(cli, url, env)))
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hook_timing")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--cli", choices=sorted(CLIS), default="claude-code")
    args = parser.parse_args()
    runs, cli = args.runs, args.cli
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {
            "PYTHONPYCACHEPREFIX": str(scratch / "pycache"),
            "SESSION_AWARENESS_STATE_DIR": str(scratch / "state"),
            "CLAUDE_CODE_SESSION_ID": "lead-1",
        }
        env.pop("SESSION_AWARENESS_DATABASE_URL", None)
        rows = start_up_rows(cli, scratch, env, runs) + hook_rows(cli, scratch, env, runs)
    print(f"runs per row: {runs} (after {WARM_UP} warm-up); cli: {cli}")
    print("| process | what | median ms | fastest ms | slowest ms | median CPU ms |")
    print("|---|---|---:|---:|---:|---:|")
    for process, what, (times, cpu) in rows:
        print(
            f"| {process} | {what} | {statistics.median(times):.0f} | {times[0]:.0f} "
            f"| {times[-1]:.0f} | {'–' if cpu is None else f'{cpu:.0f}'} |"
        )


if __name__ == "__main__":
    main()
