"""record latency vs history length: the same record on a session holding 100 events and on
one holding 100,000. Ratio long / short of the per-record latency; target ≤ 1.5.

Both sessions are watched and carry a realistic mix (see `seed.session_history`). The steady
state is measured with the service's aggregate cache warm; the first record after a restart
(cache cold: the session and its cursor load from their latest snapshots, ADR 022) is shown
for context. `BENCH_HISTORY_EVENTS` sets the long session's length (default 100,000), e.g.

    BENCH_HISTORY_EVENTS=1000000 python -m bench --only history --backend sqlite
"""

from __future__ import annotations

import os
import random

from bench.context import Context
from bench.harness import Result, clock, info_result, interleave, ratio_result, record_seconds
from bench.profiling import profile
from bench.seed import Batch, session_history, watched_session
from bench.store_cache import fingerprint, postgres_fill, sqlite_copy
from session_awareness.application import open_service

NAME = "history"
PARENT = "agent:main:main"
SHORT = "agent:main:subagent:short"
LONG = "agent:main:subagent:long"


def run(ctx: Context) -> list[Result]:
    out: list[Result] = []
    for backend in ctx.backends:
        out.extend(measure(ctx, backend))
    return out


def seed(url: str, short: int, long: int) -> None:
    rng = random.Random(7)  # noqa: S311 -- a seeded mix, not crypto
    svc = open_service(url)
    try:
        watched_session(svc, SHORT, PARENT)
        watched_session(svc, LONG, PARENT)
        batch = Batch(svc)
        session_history(batch, SHORT, short, watcher=PARENT, rng=rng)
        session_history(batch, LONG, long, watcher=PARENT, rng=rng)
        batch.flush()
        svc.prune()  # retention keeps the read model bounded, as it would in service
    finally:
        svc.close()


def database(ctx: Context, backend: str, long_size: int) -> str:
    """A database holding both sessions (built once, then copied from `bench/.cache`)."""
    key = fingerprint(f"history-{backend}-{long_size}", seed, long_size)
    if backend == "sqlite":
        return "sqlite:///" + str(sqlite_copy(key, ctx.work_dir, lambda u: seed(u, 100, long_size)))
    url, raw_url = ctx.database(backend, "history")
    postgres_fill(key, url, raw_url, lambda u: seed(u, 100, long_size),
                  lambda u: open_service(u).close())  # fmt: skip
    return url


def measure(ctx: Context, backend: str) -> list[Result]:
    long_size = ctx.scale(int(os.environ.get("BENCH_HISTORY_EVENTS", "100000")), 5_000)
    url = database(ctx, backend, long_size)
    # Cold: a restarted process records first on each session (its cache is empty).
    cold: dict[str, float] = {}
    for key in (SHORT, LONG):
        svc = open_service(url)
        try:
            started = clock()
            if svc.record_human_direct_message(key, channel="bench") is None:
                raise RuntimeError("the record was not recorded")
            cold[key] = clock() - started
        finally:
            svc.close()
    svc = open_service(url)
    try:
        per_round = ctx.scale(150, 20)

        def on(key: str) -> float:
            return record_seconds(svc, key, per_round)

        rounds = interleave(lambda: on(LONG), lambda: on(SHORT), rounds=ctx.scale(7, 3))
        profile(ctx, NAME, backend, lambda: on(LONG))
        repository = svc.store.repository
        versions: dict[str, int] = {key: repository.get(svc.resolve(key).session_id).version
                    for key in (SHORT, LONG)}  # fmt: skip
    finally:
        svc.close()
    steady = ratio_result(
        NAME, backend, f"record on a {long_size:,}-event session vs a 100-event one (µs)",
        rounds, unit="µs", better="lower", target=1.5, scale=1e6,
        details={"per_round": per_round, "session_versions": versions},
    )  # fmt: skip
    first = info_result(
        NAME, backend, "first record after a restart, long vs short session (ms)",
        cold[LONG] * 1e3, unit="ms", baseline=cold[SHORT] * 1e3,
    )  # fmt: skip
    return [steady, first]
