"""`python -m bench.hook_ab REV [--runs N] [--rounds R] [--watching]`: the hook's start-up on
another tree of this repository and on this one, alternately, in the same minutes (issue 39).

`bench.hook_timing`'s hook rows (the command each tree's `install claude-code` writes, run
through `sh -c` with the event on stdin: in-process with no server up, then relayed to the
session's MCP server) and a bare interpreter start, for `REV` and for the working tree, one
after the other, `--rounds` times. Each tree's package is put first on `PYTHONPATH` (`REV`'s
sources come from `git archive`); every process finds a bytecode cache (a warm-up run per
row). Prints, per row and tree, the median wall time with its 10th and 90th percentiles and
the median CPU time (user + system) of the process, which a shared machine's load moves far
less than the wall time.

With `--watching`, each store is first given, by its own tree's code, a lead as a real one
is: it spawned a worker, whose human turn opened a notice the lead then drained, so its
cursor and its `Drains` are in the store and nothing is pending when the timed prompts come.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.hook_timing import CPU, events, timed_process

REPO = Path(__file__).resolve().parent.parent
LAYERS = ("domain", "application", "infrastructure")
#: What a tree answers about itself: its hook command, and its server's hook socket.
ASK = """
import os, sys
from session_awareness.infrastructure.claude_relay import socket_path
from session_awareness.infrastructure.claude_state import ClaudeState, process_identity
from session_awareness.infrastructure.install_claude import hook_command
url, state = sys.argv[1:]
print(hook_command(url, "claude"))
print(socket_path(ClaudeState(state), str(process_identity(os.getppid()))))
"""
#: `--watching`: the hook's lead spawns a worker and drains the notice the worker's human turn
#: opened, so that the timed prompts find a cursor and a `Drains` and nothing pending.
WATCHING = """
import sys
from session_awareness.application import open_service
from session_awareness.infrastructure.claude_hooks import session_key
url, = sys.argv[1:]
lead = session_key("claude", "lead-1")
worker = f"{lead}:subagent:w1"
with open_service(url, spool=False, maintenance="manual") as svc:
    svc.open_session(lead, kind="main")
    svc.record_child_spawned(worker, parent=lead, run_id="run-1")
    svc.record_human_direct_message(worker, channel="bench")
    assert len(svc.drain_notices(lead)) == 1
"""


def package(source: Path, into: Path) -> Path:
    """`source`'s package assembled as an install lays it out, in `into`."""
    root = into / "session_awareness"
    shutil.copytree(source / "src" / "session_awareness", root)
    for layer in LAYERS:
        shutil.copytree(source / layer, root / layer)
    return into


def checkout(rev: str, into: Path) -> Path:
    into.mkdir()
    archive = subprocess.run(  # noqa: S603 -- a fixed argument list
        ["git", "-C", str(REPO), "archive", rev],  # noqa: S607 -- git from PATH, as `make` runs it
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)  # noqa: S603, S607
    return into


def timed(argv: list[str], env: dict[str, str], stdin: str = "") -> tuple[float, float]:
    """Wall and CPU ms of one process."""
    CPU.clear()
    wall = timed_process(argv, env, stdin)
    return wall, next(iter(CPU.values()))[0]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hook_ab")
    parser.add_argument("rev")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--watching", action="store_true", help="a lead that drained before")
    args = parser.parse_args()
    rows: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        trees = {
            args.rev: package(checkout(args.rev, scratch / "rev"), scratch / "rev-pkg"),
            "working tree": package(REPO, scratch / "work-pkg"),
        }
        envs: dict[str, dict[str, str]] = {}
        commands: dict[tuple[str, str], str] = {}
        sockets: dict[str, Path] = {}
        for n, (tree, path) in enumerate(trees.items()):
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env |= {
                "PYTHONPATH": str(path),
                "PYTHONPYCACHEPREFIX": str(scratch / "pycache"),
                "SESSION_AWARENESS_STATE_DIR": str(scratch / f"state-{n}"),
                "CLAUDE_CODE_SESSION_ID": "lead-1",
            }
            env.pop("SESSION_AWARENESS_DATABASE_URL", None)
            envs[tree] = env
            for mode in ("in-process", "relayed"):
                url = f"sqlite:///{scratch}/{mode}-{n}.db"
                told = subprocess.run(  # noqa: S603 -- a fixed argument list
                    [sys.executable, "-c", ASK, url, env["SESSION_AWARENESS_STATE_DIR"]],
                    env=env, capture_output=True, text=True, check=True,
                ).stdout.splitlines()  # fmt: skip
                commands[tree, mode] = told[0]
                sockets[tree] = Path(told[1])
                if args.watching:
                    subprocess.run(  # noqa: S603 -- a fixed argument list
                        [sys.executable, "-c", WATCHING, url], env=env, check=True
                    )

        def hook_rows(mode: str) -> None:
            for tree, env in envs.items():
                for name, event in events("claude-code").items():
                    text = json.dumps({"session_id": "lead-1", "cwd": "/home/dev/shop", **event})
                    argv = ["/bin/sh", "-c", commands[tree, mode]]
                    timed(argv, env, text)  # the warm-up
                    for _ in range(args.runs):
                        rows.setdefault((mode, name, tree), []).append(timed(argv, env, text))

        for _ in range(args.rounds):
            hook_rows("in-process")
        servers = [
            subprocess.Popen(  # noqa: S603 -- a fixed argument list
                [
                    sys.executable,
                    "-m",
                    "session_awareness.infrastructure.cli",
                    "mcp",
                    "--database-url",
                    f"sqlite:///{scratch}/relayed-{n}.db",
                    "--visibility",
                    "agent",
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
            )
            for n, (tree, env) in enumerate(envs.items())
        ]
        try:
            deadline = time.monotonic() + 60
            while not all(path.exists() for path in sockets.values()):
                if time.monotonic() > deadline:
                    raise SystemExit("an MCP server did not open its hook socket")
                time.sleep(0.05)  # polling a condition with a deadline
            for _ in range(args.rounds):
                hook_rows("relayed")
                for tree, env in envs.items():
                    for _ in range(args.runs):
                        rows.setdefault(("interpreter", "python -c pass", tree), []).append(
                            timed([sys.executable, "-c", "pass"], env)
                        )
        finally:
            for server in servers:
                server.stdin.close()  # type: ignore[union-attr]
                server.wait(timeout=30)
    lead = "; the lead drained before (--watching)" if args.watching else ""
    print(f"runs {args.runs} x rounds {args.rounds}; load average {os.getloadavg()[0]:.1f}{lead}")
    print("| path | event | tree | wall median ms (p10–p90) | CPU median ms |")
    print("|---|---|---|---:|---:|")
    for (mode, name, tree), runs in rows.items():
        walls = sorted(w for w, _ in runs)
        p10, p90 = walls[len(walls) // 10], walls[len(walls) * 9 // 10]
        cpu = statistics.median(c for _, c in runs)
        print(
            f"| {mode} | {name} | {tree} | {statistics.median(walls):.1f} "
            f"({p10:.0f}–{p90:.0f}) | {cpu:.1f} |"
        )


if __name__ == "__main__":
    main()
