"""`python -m bench.ab PROPOSAL[,PROPOSAL] [--only CASES] [--backend B] [--quick]`: the
measured effect of bench-only proposals (`bench/proposals.py`).

For each case, one process sets up the scenario once, then alternates rounds with the
proposals switched off and on (after a warm-up of each): the figure is the median of the
per-round speed-ups, time without / time with (> 1: the proposal helps). Results go to
`bench/results/ab.json` (ignored) and are quoted in `bench/PROPOSALS.md`.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bench import proposals
from bench.context import RESULTS_DIR, Context, run_context
from bench.harness import clock, interleave, median, quiet_logs
from bench.raw import RawStore

Op = Callable[[], float]  # one round: seconds per operation
Case = Callable[[Context, str], Any]  # a context manager yielding an Op


def _records(svc: Any, key: str, count: int) -> float:
    started = clock()
    for _ in range(count):
        if svc.record_human_direct_message(key, channel="bench") is None:
            raise RuntimeError("the record was not recorded")
    return (clock() - started) / count


@contextmanager
def record(ctx: Context, backend: str) -> Iterator[Op]:
    from bench import s_record  # noqa: PLC0415
    from bench.seed import watched_session  # noqa: PLC0415
    from session_awareness.application import open_service  # noqa: PLC0415

    url, _ = ctx.database(backend, "ab_record")
    svc = open_service(url)
    try:
        watched_session(svc, s_record.CHILD, s_record.PARENT)
        yield lambda: _records(svc, s_record.CHILD, ctx.scale(200, 30))
    finally:
        svc.close()


@contextmanager
def history(ctx: Context, backend: str) -> Iterator[Op]:
    from bench import s_history  # noqa: PLC0415
    from session_awareness.application import open_service  # noqa: PLC0415

    svc = open_service(s_history.database(ctx, backend, ctx.scale(100_000, 5_000)))
    try:
        yield lambda: _records(svc, s_history.LONG, ctx.scale(50, 10))
    finally:
        svc.close()


@contextmanager
def fanout(ctx: Context, backend: str) -> Iterator[Op]:
    from bench import s_fanout  # noqa: PLC0415
    from session_awareness.application import open_service  # noqa: PLC0415

    url, _ = ctx.database(backend, "ab_fanout")
    svc = open_service(url)
    try:
        s_fanout.seed(svc)
        yield lambda: _records(svc, s_fanout.WIDE, ctx.scale(20, 5))
    finally:
        svc.close()


@contextmanager
def drain(ctx: Context, backend: str) -> Iterator[Op]:
    from bench import s_drain  # noqa: PLC0415
    from session_awareness.application import open_service  # noqa: PLC0415

    url, target = ctx.database(backend, "ab_drain")
    pairs = ctx.scale(1_000, 100)
    svc = open_service(url)
    raw = RawStore(backend, target)
    try:
        s_drain.seed(svc, raw, pairs)

        def op() -> float:
            s_drain.make_pending(svc, pairs)
            started = clock()
            if len(svc.drain_notices(s_drain.WATCHER)) != pairs:
                raise RuntimeError("not every pair was drained")
            return (clock() - started) / pairs

        yield op
    finally:
        raw.close()
        svc.close()


@contextmanager
def changes(ctx: Context, backend: str) -> Iterator[dict[str, Op]]:
    from bench import s_changes  # noqa: PLC0415
    from session_awareness.application import open_service  # noqa: PLC0415

    url, target = ctx.database(backend, "ab_changes")
    sessions, rows = ctx.scale(5_000, 500), ctx.scale(50_000, 5_000)
    svc = open_service(url, retention_rows=rows)
    raw = RawStore(backend, target)
    try:
        raw.create_changes()
        keys = s_changes.seed(svc, raw, sessions, rows)
        small = random.Random(5).sample(keys[len(keys) // 2 :], 50)  # noqa: S311 -- a sample
        pages = {
            "changes200": [
                (s_changes.HOT, svc.session_status(s_changes.HOT)["stateVersion"] - 200)
            ],
            "changes5": [(k, svc.session_status(k)["stateVersion"] - 5) for k in small],
        }

        def op(label: str) -> Op:
            def one_round() -> float:
                started, calls = clock(), ctx.scale(200, 30)
                for number in range(calls):
                    key, since = pages[label][number % len(pages[label])]
                    svc.session_status(key, changes_since=since)
                return (clock() - started) / calls

            return one_round

        yield {label: op(label) for label in pages}
    finally:
        raw.close()
        svc.close()


@contextmanager
def replay(ctx: Context, backend: str) -> Iterator[dict[str, Op]]:
    """Our replay side, in a subprocess with and without the proposals (see `s_replay`)."""
    from bench import s_replay  # noqa: PLC0415

    size = ctx.scale(200_000, 20_000)  # 200,000 on both backends: enough, and quick to repeat
    url, target = s_replay.store(ctx, backend, size)
    yield {"replay": lambda: float(s_replay.side(ctx, "ours", backend, url, target)["elapsed"])}


@contextmanager
def record4(ctx: Context, backend: str) -> Iterator[Op]:
    """Four threads of one service recording at once, each on a session of its own: seconds
    per record, all threads together."""
    import threading  # noqa: PLC0415

    from bench.seed import watched_session  # noqa: PLC0415
    from session_awareness.application import open_service  # noqa: PLC0415

    url, _ = ctx.database(backend, "ab_record4")
    svc = open_service(url)
    children = [f"agent:t{n}:subagent:worker" for n in range(4)]
    count = ctx.scale(100, 20)
    try:
        for n, child in enumerate(children):
            watched_session(svc, child, f"agent:t{n}:main")

        def round_() -> float:
            threads = [
                threading.Thread(target=_records, args=(svc, child, count)) for child in children
            ]
            started = clock()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            return (clock() - started) / (count * len(children))

        yield round_
    finally:
        svc.close()


CASES: dict[str, Case] = {
    "record": record, "record4": record4, "history": history, "changes": changes,
    "fanout": fanout, "drain": drain, "replay": replay,
}  # fmt: skip


def measure(names: list[str], op: Op, rounds: int) -> dict[str, Any]:
    def switched_on() -> float:
        proposals.apply(names)
        try:
            return op()
        finally:
            proposals.switch_off(names)

    found = interleave(op, switched_on, rounds=rounds)
    return {
        "speedup": median(found.ratios()),
        "without_us": median(found.ours) * 1e6,
        "with_us": median(found.baseline) * 1e6,
        "ratios": [round(r, 3) for r in found.ratios()],
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__)
    parser.add_argument("proposals", help="comma-separated names from bench/proposals.py")
    parser.add_argument("--only", default=",".join(CASES))
    parser.add_argument("--backend", choices=("sqlite", "postgresql"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--base", default="", help="proposals switched on in both arms")
    args = parser.parse_args(argv)
    # A terminated run still stops its PostgreSQL cluster and removes its files.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    quiet_logs()
    names = [n for n in args.proposals.split(",") if n]
    names = [n for name in names for n in (proposals.ALL if name == "all" else [name])]
    proposals.install(names)
    base = proposals.apply([n for n in args.base.split(",") if n])
    backends = (args.backend,) if args.backend else ("sqlite", "postgresql")
    out: list[dict[str, Any]] = []
    with run_context(quick=args.quick, backends=backends) as ctx:
        for case in args.only.split(","):
            for backend in backends:
                with CASES[case](ctx, backend) as ops:
                    for label, op in (ops if isinstance(ops, dict) else {case: ops}).items():
                        found = measure(names, op, 3 if label == "replay" else args.rounds)
                        row = {"case": label, "backend": backend, "proposals": names,
                               "base": base, **found}  # fmt: skip
                        out.append(row)
                        print(
                            f"[ab] {label} [{backend}] {'+'.join(names)}"
                            f"{' over ' + '+'.join(base) if base else ''}: "
                            f"{found['without_us']:.0f} µs -> {found['with_us']:.0f} µs, "
                            f"speed-up x{found['speedup']:.2f}",
                            flush=True,
                        )
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / "ab.json"
    previous = json.loads(path.read_text()) if path.exists() else []
    path.write_text(json.dumps(previous + out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
