"""replay: an audit rebuild of the read models from the whole event store (1,000,000 events
on SQLite, 200,000 on PostgreSQL), in events/s, against the raw rate of reading and decoding
the same event table. Targets: ratio ≥ 0.25, and peak memory under 300 MB.

Each side runs in a subprocess of its own (`python -m bench.s_replay --child …`), which
reports its elapsed time and its peak resident set size (`ru_maxrss`).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.context import BENCH_DIR, Context
from bench.harness import Result, absolute_result, interleave, median, ratio_result
from bench.seed import Batch, session_history
from bench.store_cache import fingerprint, postgres_fill, sqlite_copy

NAME = "replay"
EVENTS_PER_CHILD = 1_000
PRUNE_EVERY = 50  # children
TABLES = {"sqlite": "stored_events", "postgresql": "sessionawareness_events"}


def rebuild(url: str) -> tuple[str, float]:
    """Our side: the audit's rebuild, timed alone (opening the service, with its startup
    prune and sweep, and importing its modules are not the replay; the raw side's imports
    are outside its timing too). Returns the path taken and its seconds."""
    from session_awareness.application import open_service  # noqa: PLC0415

    svc = open_service(url)
    try:
        started = time.perf_counter()
        svc.audit(rebuild=True)
        return "audit(rebuild=True)", time.perf_counter() - started
    finally:
        svc.close()


def child(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--side", choices=("ours", "raw"))
    parser.add_argument("--backend")
    parser.add_argument("--url")
    parser.add_argument("--target")
    parser.add_argument("--proposals", default="")
    args = parser.parse_args(argv)
    from bench.harness import quiet_logs  # noqa: PLC0415
    from bench.raw import read_and_decode  # noqa: PLC0415

    quiet_logs()
    inherited = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.proposals:
        from bench import proposals  # noqa: PLC0415

        proposals.apply(args.proposals.split(","))
    if args.side == "ours":
        path, elapsed = rebuild(args.url)
        # The event count is the table's, read by the raw side; ours reports its time.
        events = -1
    else:
        started = time.perf_counter()
        path, events = (
            "read and decode",
            read_and_decode(args.backend, args.target, TABLES[args.backend]),
        )
        elapsed = time.perf_counter() - started
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB → MiB on Linux
    report = {"elapsed": elapsed, "events": events, "path": path, "ru_maxrss_mb": maxrss,
              "ru_maxrss_at_start_mb": inherited, "peak_mb": own_peak_mb() or maxrss}  # fmt: skip
    print(json.dumps(report))


def own_peak_mb() -> float | None:
    """This process's own high-water RSS (`VmHWM`). Linux carries the parent's `ru_maxrss`
    across fork and exec, so a child of a large parent starts with the parent's peak; the
    child reports both, and `VmHWM` (its own address space since exec) is the one judged."""
    status = Path("/proc/self/status")
    if not status.exists():
        return None
    for line in status.read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None


def side(ctx: Context, side: str, backend: str, url: str, target: str) -> dict[str, Any]:
    from bench import proposals  # noqa: PLC0415

    done = subprocess.run(  # noqa: S603 -- this interpreter running this module
        [sys.executable, "-m", "bench.s_replay", "--child", "--side", side,
         "--backend", backend, "--url", url, "--target", target,
         "--proposals", ",".join(proposals.APPLIED)],
        capture_output=True, text=True, check=False, cwd=BENCH_DIR.parent,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"replay child failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def run(ctx: Context) -> list[Result]:
    out: list[Result] = []
    for backend in ctx.backends:
        out.extend(measure(ctx, backend))
    return out


def generate(url: str, events: int) -> None:
    """About `events` events through the service's record path: children spawned by managers,
    each with a realistic signal mix and its manager draining, pruned as retention would."""
    from session_awareness.application import open_service  # noqa: PLC0415

    rng = random.Random(3)  # noqa: S311 -- a seeded mix, not crypto
    svc = open_service(url)
    try:
        batch = Batch(svc)
        number = 0
        while batch.events < events:
            manager, child = f"agent:main:m{number // 20}", f"agent:main:subagent:c{number}"
            batch.open(manager)
            batch.spawn(child, parent=manager, run_id=f"spawn-{number}")
            session_history(batch, child, EVENTS_PER_CHILD * 3 // 5, watcher=manager, rng=rng)
            batch.flush()
            number += 1
            if number % PRUNE_EVERY == 0:
                svc.prune()
        svc.prune()
    finally:
        svc.close()


def create(url: str) -> None:
    from session_awareness.application import open_service  # noqa: PLC0415

    open_service(url).close()


def store(ctx: Context, backend: str, size: int) -> tuple[str, str]:
    """(service URL, raw target) of a store of about `size` events (see `store_cache`)."""
    key = fingerprint(f"replay-{backend}-{size}", generate, size, EVENTS_PER_CHILD, PRUNE_EVERY)
    if backend == "sqlite":
        path = sqlite_copy(key, ctx.work_dir, lambda url: generate(url, size))
        return f"sqlite:///{path}", str(path)
    url, target = ctx.database(backend, f"replay{size}")
    postgres_fill(key, url, target, lambda u: generate(u, size), create)
    return url, target


def measure(ctx: Context, backend: str) -> list[Result]:
    size = ctx.scale(1_000_000 if backend == "sqlite" else 200_000, 20_000)
    began = time.perf_counter()
    url, target = store(ctx, backend, size)
    store_seconds = time.perf_counter() - began  # generating it (first run) or copying it
    first_raw = side(ctx, "raw", backend, url, target)  # also warms the page cache
    events = int(first_raw["events"])
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "raw": []}

    def run_side(name: str) -> float:
        report = side(ctx, name, backend, url, target)
        runs[name].append(report)
        return events / float(report["elapsed"])

    rounds = interleave(
        lambda: run_side("ours"), lambda: run_side("raw"), rounds=ctx.scale(3, 2), warmup=0
    )
    peak = max(float(r["peak_mb"]) for r in runs["ours"])
    raw_peak = max(float(r["peak_mb"]) for r in runs["raw"])
    rate = ratio_result(
        NAME, backend, f"audit rebuild of {events:,} events (events/s)", rounds,
        unit="events/s", better="higher", target=0.25,
        details={"events": events, "path": runs["ours"][0]["path"],
                 "store_seconds": round(store_seconds, 1),
                 "ours_seconds": [r["elapsed"] for r in runs["ours"]]},
    )  # fmt: skip
    memory = absolute_result(
        NAME, backend, "audit rebuild, peak memory (MB)", peak, unit="MB", limit=300,
        baseline=raw_peak,
        details={"ours_median_mb": median([r["peak_mb"] for r in runs["ours"]]),
                 "ru_maxrss_mb": max(r["ru_maxrss_mb"] for r in runs["ours"]),
                 "ru_maxrss_at_start_mb": max(r["ru_maxrss_at_start_mb"] for r in runs["ours"])},
    )  # fmt: skip
    return [rate, memory]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2:])
