"""`python -m bench.replay_stages STORE [--tree REV] [--rounds N] [--stages]`: an audit
rebuild of one SQLite event store, timed alone, by this tree's code and (with `--tree`)
another commit's, alternately, each on a fresh copy of the store.

Plain, it times `svc.audit(rebuild=True)`. With `--stages` it runs the tree's own replay loop
(`_Replay.into`) with each stage it calls timed (read a page, read the deletions ahead,
decode, check the invariants, project, write the scratch tables), and counts the row
changes the projection makes, by class: the figures that tell whether a tree replays the
same work slower or does more work (ADR 021, "Comparing trees").
A store written by an older tree is read by a newer one as any old store is.

Each run is a child process (this file run as a script by the tree's interpreter, see
`bench.trees.interpreter_for`), so nothing of one tree's modules is loaded in the other's.
"""

from __future__ import annotations

import argparse
import collections
import inspect
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parent.parent


#: The stages of `_Replay.into`, each timed where `into` calls it; `ahead` is the look-ahead's
#: reads of the deletions past the page (none on a tree without one).
STAGES = ("read", "ahead", "decode", "check", "project", "write")


def _staged(svc: Any) -> dict[str, Any]:
    """The audit's own replay (`_Replay.into`) into a scratch store, each stage it calls
    timed through a wrapper (read a page, read ahead, decode, check, project, write): `into` is
    not written again here, so the figures are of the tree's own loop. Each stage's time
    includes its wrapper's two clock reads (about 0.2 µs per decoded event)."""
    from session_awareness.application import audit  # noqa: PLC0415

    store = getattr(svc, "store", svc)  # older trees: the service is its own store
    audit_store = store.audit_store() if hasattr(store, "audit_store") else store._audit_store()
    replay = audit._Replay(store, audit.AUDIT_PAGE_SIZE, None)
    seconds = dict.fromkeys(STAGES, 0.0)
    classes: collections.Counter[str] = collections.Counter()
    clock = time.perf_counter

    def timed(stage: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            started = clock()
            try:
                return call(*args)
            finally:
                seconds[stage] += clock() - started

        return run

    replay.decode = timed("decode", replay.decode)
    replay.invariants.check = timed("check", replay.invariants.check)
    project = audit.project
    audit.project = timed("project", project)
    try:
        with audit_store.scratch() as scratch:
            write = timed("write", scratch.apply)

            def apply(changes: list[Any]) -> None:
                classes.update(type(change).__name__ for change in changes)  # not timed
                write(changes)

            target = SimpleNamespace(
                notifications=timed("read", scratch.notifications), apply=apply
            )
            began = clock()
            if "ahead" in inspect.signature(replay.into).parameters:
                ahead = SimpleNamespace(notifications_of=timed("ahead", scratch.notifications_of))
                replay.into(target, ahead)
            else:  # a tree before the look-ahead
                replay.into(target)
            total = clock() - began
    finally:
        audit.project = project
    return {"events": replay.events, "seconds": total, "stages": seconds,
            "changes": dict(classes)}  # fmt: skip


def child(path: str, stages: bool) -> None:
    sys.path.insert(0, str(REPO))  # this tree's bench, whichever tree's service is measured
    from bench.harness import quiet_logs  # noqa: PLC0415

    quiet_logs()
    from session_awareness.application import open_service  # noqa: PLC0415

    svc = open_service(f"sqlite:///{path}")
    try:
        if stages:
            report = _staged(svc)
        else:
            began = time.perf_counter()
            events = svc.audit(rebuild=True).events
            report = {"events": events, "seconds": time.perf_counter() - began}
    finally:
        svc.close()
    print(json.dumps(report))


def _run(python: Path, cwd: Path, store: Path, folder: Path, stages: bool) -> dict[str, Any]:
    copy = folder / "copy.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(store, copy)
    from bench.trees import run_script  # noqa: PLC0415 -- the parent's, beside `other_tree`

    args = ["--child", str(copy), *(["--stages"] if stages else [])]
    return run_script(python, Path(__file__).resolve(), args, cwd)


def _line(name: str, report: dict[str, Any]) -> str:
    events, seconds = report["events"], report["seconds"]
    line = f"{name}: {events:,} events in {seconds:.2f} s, {events / seconds:,.0f} events/s"
    if "stages" in report:
        changes = sum(report["changes"].values())
        parts = [f"{stage} {t / events * 1e6:.1f}" for stage, t in report["stages"].items()]
        line += f"; µs per event: {', '.join(parts)}; {changes:,} row changes"
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.replay_stages", description=__doc__.split("\n")[0]
    )
    parser.add_argument("store", type=Path, help="a SQLite event store (it is copied, not changed)")
    parser.add_argument("--tree", help="also replay with this commit's code, alternately")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--stages", action="store_true", help="time each stage; count changes")
    args = parser.parse_args(argv)
    if not args.store.is_file():
        parser.error(f"no such store: {args.store}")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    from bench.trees import sides  # noqa: PLC0415

    with (
        tempfile.TemporaryDirectory(prefix="bench-replay-") as scratch,
        sides(args.tree, Path(scratch)) as both,
    ):
        reports: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in both}
        for _ in range(args.rounds):
            for name, python, cwd in both:
                report = _run(python, cwd, args.store, Path(scratch), args.stages)
                reports[name].append(report)
                print(_line(name, report), flush=True)
    if args.stages:
        for name, runs in reports.items():
            print(f"\nrow changes by class, {name}:")
            for cls, count in sorted(runs[-1]["changes"].items(), key=lambda kv: -kv[1]):
                print(f"  {cls:22} {count:9,}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], "--stages" in sys.argv[3:])
    else:
        raise SystemExit(main())
