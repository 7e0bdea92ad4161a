"""fan-out: a notify-eligible record (`record_human_direct_message`) on a target with 100
watchers against the same record on a target with 1 watcher. Latency ratio; target ≤ 10.

The watchers' notices are pending after the warm-up, so each measured record moves every
watcher's material position (R-N2): derived from the target (ADR 023), it stores the signal
alone; each watcher's cursor is still loaded to tell it is pending.
"""

from __future__ import annotations

from bench.context import Context
from bench.harness import Result, interleave, ratio_result, record_seconds
from bench.profiling import profile
from bench.seed import watched_session
from session_awareness.application import SessionAwareness, open_service

NAME = "fanout"
PARENT = "agent:main:main"
WIDE = "agent:main:subagent:wide"
NARROW = "agent:main:subagent:narrow"
WATCHERS = 100


def run(ctx: Context) -> list[Result]:
    return [measure(ctx, backend) for backend in ctx.backends]


def seed(svc: SessionAwareness) -> None:
    watched_session(svc, WIDE, PARENT)  # the parent is the first watcher of each
    watched_session(svc, NARROW, PARENT)
    for number in range(1, WATCHERS):
        svc.open_session(f"agent:peer{number}:main")  # a watcher the service knows (R-L9)
        if not svc.watch(f"agent:peer{number}:main", WIDE):
            raise RuntimeError("the watch was refused")


def measure(ctx: Context, backend: str) -> Result:
    url, _ = ctx.database(backend, "fanout")
    svc = open_service(url)
    try:
        seed(svc)
        per_round = ctx.scale(20, 5)

        def on(key: str) -> float:
            return record_seconds(svc, key, per_round)

        rounds = interleave(lambda: on(WIDE), lambda: on(NARROW), rounds=ctx.scale(7, 3))
        profile(ctx, NAME, backend, lambda: on(WIDE))
    finally:
        svc.close()
    return ratio_result(
        NAME, backend, f"record on a target with {WATCHERS} watchers vs 1 watcher (µs)",
        rounds, unit="µs", better="lower", target=10, scale=1e6,
        details={"per_round": per_round},
    )  # fmt: skip
