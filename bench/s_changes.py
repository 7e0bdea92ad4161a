"""changesSince page: `session_status(key, changes_since=v)` returning 200 events and 5
events, from a database holding 50,000 retained rows across 5,000 sessions, against the raw
indexed SELECT of the same page. Targets: median ratio ≤ 2 and p99 under 5 ms.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from bench.context import Context
from bench.harness import Result, absolute_result, clock, interleave, percentile, ratio_result
from bench.profiling import profile
from bench.raw import RawStore, change_row
from bench.seed import Batch, session_history
from session_awareness.application import SessionAwareness, open_service

NAME = "changes"
HOT = "agent:main:subagent:m0:hot"


def child(manager: int, number: int) -> str:
    return f"agent:main:subagent:m{manager}:c{number}"


def seed(svc: SessionAwareness, raw: RawStore, sessions: int, rows: int) -> list[str]:
    """`sessions` spawned children, `rows` retained rows in all (the hot one holds 250), and
    the same keys and sequences in the raw table. Returns the children's keys."""
    rng = random.Random(11)  # noqa: S311 -- a seeded mix, not crypto
    managers = max(1, sessions // 100)
    per_session = rows // sessions
    batch = Batch(svc)
    keys = []
    for m in range(managers):
        batch.open(f"agent:main:m{m}")
    for n in range(sessions - 1):
        m = n % managers
        key = child(m, n)
        keys.append(key)
        batch.spawn(key, parent=f"agent:main:m{m}", run_id=f"spawn-{n}")
        session_history(batch, key, per_session - 1, watcher=f"agent:main:m{m}", rng=rng)
    batch.spawn(HOT, parent="agent:main:m0", run_id="spawn-hot")
    session_history(batch, HOT, 249, watcher="agent:main:m0", rng=rng)
    batch.flush()
    svc.prune()  # keep the newest `rows` rows, as retention does
    raw_rows = [change_row(key, s) for key in keys for s in range(1, per_session + 1)]
    raw_rows += [change_row(HOT, s) for s in range(1, 251)]
    for start in range(0, len(raw_rows), 5000):
        raw.insert_many(raw_rows[start : start + 5000])
    return keys


def run(ctx: Context) -> list[Result]:
    out: list[Result] = []
    for backend in ctx.backends:
        out.extend(measure(ctx, backend))
    return out


def measure(ctx: Context, backend: str) -> list[Result]:
    url, target = ctx.database(backend, "changes")
    sessions, rows = ctx.scale(5_000, 500), ctx.scale(50_000, 5_000)
    svc = open_service(url, retention_rows=rows)
    raw = RawStore(backend, target)
    out: list[Result] = []
    try:
        raw.create_changes()
        keys = seed(svc, raw, sessions, rows)
        hot_head = svc.session_status(HOT)["stateVersion"]
        rng = random.Random(5)  # noqa: S311 -- a seeded sample, not crypto
        small = rng.sample(keys[len(keys) // 2 :], 100)  # sessions retention left whole
        heads = {key: svc.session_status(key)["stateVersion"] for key in small}
        raw_heads = dict.fromkeys(small, rows // sessions)
        calls = ctx.scale(100, 20)
        cases: list[tuple[str, list[tuple[str, int]], list[tuple[str, int]], int]] = [
            ("200", [(HOT, hot_head - 200)], [(HOT, 250 - 200)], 200),
            ("5", [(k, heads[k] - 5) for k in small], [(k, raw_heads[k] - 5) for k in small], 5),
        ]
        for label, our_pages, raw_pages, size in cases:
            samples: list[float] = []
            ours, baseline = sides(
                svc, raw, our_pages=our_pages, raw_pages=raw_pages, size=size, calls=calls,
                samples=samples,
            )  # fmt: skip
            rounds = interleave(ours, baseline, rounds=ctx.scale(9, 3))
            profile(ctx, f"{NAME}{label}", backend, lambda o=ours: [o() for _ in range(5)])  # type: ignore[misc]
            out.append(ratio_result(
                NAME, backend, f"changesSince {label}-event page (µs)", rounds,
                unit="µs", better="lower", target=2, scale=1e6,
                details={"calls_per_round": calls, "sessions": sessions, "rows": rows},
            ))  # fmt: skip
            out.append(absolute_result(
                NAME, backend, f"changesSince {label}-event page, p99 (ms)",
                percentile(samples, 0.99) * 1e3, unit="ms", limit=5,
                details={"samples": len(samples)},
            ))  # fmt: skip
    finally:
        raw.close()
        svc.close()
    return out


def sides(
    svc: SessionAwareness,
    raw: RawStore,
    *,
    our_pages: list[tuple[str, int]],
    raw_pages: list[tuple[str, int]],
    size: int,
    calls: int,
    samples: list[float],
) -> tuple[Callable[[], float], Callable[[], float]]:
    """Both sides of one page size; each returns its round's mean seconds per call, and ours
    keeps every call's latency in `samples` (for the p99)."""

    def ours() -> float:
        total = 0.0
        for number in range(calls):
            key, since = our_pages[number % len(our_pages)]
            started = clock()
            status = svc.session_status(key, changes_since=since)
            elapsed = clock() - started
            if len(status["stateChanges"]["events"]) != size:
                raise RuntimeError(f"expected a {size}-event page")
            samples.append(elapsed)
            total += elapsed
        return total / calls

    def baseline() -> float:
        started = clock()
        for number in range(calls):
            key, since = raw_pages[number % len(raw_pages)]
            if len(raw.page(key, since, size + 1)) != size:
                raise RuntimeError(f"expected a {size}-row page")
        return (clock() - started) / calls

    return ours, baseline
