"""drain: `drain_notices` for a watcher with 1,000 pending pairs, per pair, against the raw
read-and-UPDATE of 1,000 cursor rows in one transaction. Per-pair ratio; target ≤ 2 (issue 39).

Before each round (untimed) every pair is made pending again: one human turn on each target,
recorded through the service's own record path, all in one save (see `seed.Batch`).
"""

from __future__ import annotations

from bench.context import Context
from bench.harness import Result, clock, interleave, ratio_result
from bench.profiling import profile
from bench.raw import RawStore, now_ms
from bench.seed import Batch
from session_awareness.application import SessionAwareness, open_service

NAME = "drain"
WATCHER = "agent:main:main"


def target(number: int) -> str:
    return f"agent:main:subagent:t{number}"


def seed(svc: SessionAwareness, raw: RawStore, pairs: int) -> None:
    batch = Batch(svc)
    batch.open(WATCHER)
    for number in range(pairs):
        batch.spawn(target(number), parent=WATCHER, run_id=f"spawn-{number}")
    batch.flush()
    raw.create_cursors()
    rows = [(f"w{number:06d}", WATCHER, target(number), 1, 1, 1, now_ms())
            for number in range(pairs)]  # fmt: skip
    for row in rows:
        raw.execute("INSERT INTO raw_cursors VALUES (?, ?, ?, ?, ?, ?, ?)", row)


def make_pending(svc: SessionAwareness, pairs: int) -> None:
    batch = Batch(svc, size=10_000)
    for number in range(pairs):
        if batch.human(target(number)) is None:
            raise RuntimeError("the record was not recorded")
    batch.flush()


def make_raw_pending(raw: RawStore) -> None:
    raw.execute("UPDATE raw_cursors SET material = material + 1")
    raw.execute("UPDATE raw_cursors SET notified = material WHERE notified = acknowledged")


def run(ctx: Context) -> list[Result]:
    return [measure(ctx, backend) for backend in ctx.backends]


def measure(ctx: Context, backend: str) -> Result:
    url, target_db = ctx.database(backend, "drain")
    pairs = ctx.scale(1_000, 100)
    svc = open_service(url)
    raw = RawStore(backend, target_db)
    try:
        seed(svc, raw, pairs)

        def ours() -> float:
            make_pending(svc, pairs)
            started = clock()
            drained = svc.drain_notices(WATCHER)
            elapsed = clock() - started
            if len(drained) != pairs:
                raise RuntimeError(f"drained {len(drained)} notices, expected {pairs}")
            return elapsed / pairs

        def baseline() -> float:
            make_raw_pending(raw)
            started = clock()
            moved = raw.acknowledge_all(WATCHER)
            elapsed = clock() - started
            if moved != pairs:
                raise RuntimeError(f"moved {moved} rows, expected {pairs}")
            return elapsed / pairs

        rounds = interleave(ours, baseline, rounds=ctx.scale(5, 3))
        if ctx.profile:
            make_pending(svc, pairs)
            profile(ctx, NAME, backend, lambda: svc.drain_notices(WATCHER))
    finally:
        raw.close()
        svc.close()
    return ratio_result(
        NAME, backend, f"drain {pairs:,} pending pairs, per pair (µs)", rounds,
        unit="µs", better="lower", target=2, scale=1e6, details={"pairs": pairs},
    )  # fmt: skip
