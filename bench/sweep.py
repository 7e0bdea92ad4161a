"""sweep: the start-up sweep's time per watcher on a store of many pending notices (issue 39,
item 6; ADR 038). Not part of `make bench`: `python -m bench.sweep --backend postgresql
--families 3000` (the lead's profile: 15,000 sessions, 3,000 watchers with four pending
cursors each).

The store is seeded as `bench.scale` seeds it: on PostgreSQL by `bench.bulk_seed` (template
families replicated by COPY), on SQLite through the producers' logic (`bench.scale.seed`).
The service is then opened twice with its maintenance manual (the second open has a cold
aggregate cache, as a restart has), and the sweep's first `--batches` batches are timed, each
re-delivering and waking `SWEEP_BATCH` watchers in one transaction. `--profile` prints the
cumulative profile of those batches instead of timing them bare.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time
from datetime import UTC, datetime

from bench.bulk_seed import bulk_seed
from bench.context import run_context
from bench.harness import quiet_logs
from bench.scale import CHILDREN, seed
from session_awareness.application import open_service
from session_awareness.application.retention import SWEEP_BATCH


def measure(backend: str, families: int, batches: int, *, profile: bool) -> dict[str, object]:
    with run_context(quick=False, backends=(backend,)) as ctx:
        url, raw = ctx.database(backend, "sweep")
        if backend == "postgresql":
            template, _ = ctx.database(backend, "sweep_templates")
            events, seconds = bulk_seed(url, raw, template, families)
        else:
            svc = open_service(url, maintenance="manual")
            events, seconds = seed(svc, families * (CHILDREN + 1), progress=False)
            svc.close()
        open_service(url, maintenance="manual").close()  # a first start: the store's marks
        svc = open_service(url, maintenance="manual")  # a restart: nothing cached
        try:
            passing = svc._maintenance.start_sweep(redeliver=True)
            watchers = min(passing.total, batches * SWEEP_BATCH)
            profiler = cProfile.Profile() if profile else None
            started = time.perf_counter()
            if profiler is not None:
                profiler.enable()
            for _ in range(batches):
                if not passing.step():
                    break
            if profiler is not None:
                profiler.disable()
            elapsed = time.perf_counter() - started
        finally:
            svc.close()
        if profiler is not None:
            pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(30)
        return {
            "backend": backend,
            "families": families,
            "seeded_events": events,
            "seed_seconds": round(seconds, 1),
            "watchers_pending": passing.total,
            "watchers_swept": watchers,
            "redelivered": passing.redelivered,
            "woken": passing.woken,
            "seconds": round(elapsed, 3),
            "ms_per_watcher": round(1000 * elapsed / max(watchers, 1), 3),
            "profiled": profile,
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "load": round(os.getloadavg()[0], 1),
        }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.sweep", description=__doc__)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="postgresql")
    parser.add_argument("--families", type=int, default=3000, help="watchers (5 sessions each)")
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    quiet_logs()
    result = measure(args.backend, args.families, args.batches, profile=args.profile)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
