"""record, 1 writer: `record_human_direct_message` on a watched session, one per transaction,
against one INSERT + COMMIT per row through the plain driver. Throughput; target ≥ 0.5."""

from __future__ import annotations

from itertools import count

from bench.context import Context
from bench.harness import Result, clock, interleave, ratio_result, record_seconds
from bench.profiling import profile
from bench.raw import RawStore, change_row
from bench.seed import watched_session
from session_awareness.application import open_service

NAME = "record"
PARENT = "agent:main:main"
CHILD = "agent:main:subagent:worker"


def run(ctx: Context) -> list[Result]:
    return [measure(ctx, backend) for backend in ctx.backends]


def measure(ctx: Context, backend: str) -> Result:
    url, target = ctx.database(backend, "record")
    svc = open_service(url)
    raw = RawStore(backend, target)
    try:
        watched_session(svc, CHILD, PARENT)
        raw.create_changes()
        per_round = ctx.scale(200, 30)
        sequence = count(1)

        def ours() -> float:
            return 1 / record_seconds(svc, CHILD, per_round)

        def baseline() -> float:
            started = clock()
            for _ in range(per_round):
                raw.insert_committed(change_row(CHILD, next(sequence)))
            return per_round / (clock() - started)

        rounds = interleave(ours, baseline, rounds=ctx.scale(7, 3))
        profile(ctx, NAME, backend, lambda: [ours() for _ in range(3)])
    finally:
        raw.close()
        svc.close()
    return ratio_result(
        NAME, backend, "record, 1 writer (records/s)", rounds,
        unit="ops/s", better="higher", target=0.5,
        details={"per_round": per_round},
    )  # fmt: skip
