"""`python -m bench.changes_forms [--backend B] [--sessions N]`: the A/B of the two forms of
the `changesSince` statement (`infrastructure/readmodel/session_state.py`, ADR 043), on each
backend: the joined form (the head on every row of the page) and the stacked one (a head row,
then the page). Both run through the store's own `fetch_tuples` on one seeded store, call by
call alternately, so the machine's load falls on both alike; the figures are the medians of
every call's latency, a 5-event and a 200-event page.
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections.abc import Callable
from typing import Any

from bench import s_changes
from bench.context import run_context
from bench.harness import clock
from bench.raw import RawStore
from session_awareness.application import open_service
from session_awareness.infrastructure.readmodel.session_state import _JOINED, _STACKED

CALLS = {"5": 20_000, "200": 3_000}


def measure(url: str, raw_target: str, backend: str, sessions: int) -> list[str]:
    rows = sessions * 10
    svc = open_service(url, retention_rows=rows)
    raw = RawStore(backend, raw_target)
    lines = []
    try:
        raw.create_changes()
        keys = s_changes.seed(svc, raw, sessions, rows)
        store = svc.store
        rec: Any = store.recorder
        bind = rec.dialect.bind_id
        small = random.Random(5).sample(keys[len(keys) // 2 :], 100)  # noqa: S311 -- a sample
        hot = svc.session_status(s_changes.HOT)["stateVersion"]
        cases = {
            "5": [(bind(store.resolve_id(k)[1]), svc.session_status(k)["stateVersion"] - 5)
                  for k in small],
            "200": [(bind(store.resolve_id(s_changes.HOT)[1]), hot - 200)],
        }  # fmt: skip

        def joined(sid: Any, since: int) -> object:
            return rec.fetch_tuples(_JOINED, (sid, since, sid, 201))

        def stacked(sid: Any, since: int) -> object:
            return rec.fetch_tuples(_STACKED, (sid, sid, sid, since, sid, 201))

        for case, calls in CALLS.items():
            pages = cases[case]
            times: dict[str, list[float]] = {"joined": [], "stacked": []}
            forms: list[tuple[str, Callable[[Any, int], object]]] = [
                ("joined", joined), ("stacked", stacked)
            ]  # fmt: skip
            for number in range(calls + 200):
                page = pages[number % len(pages)]
                for name, form in forms if number % 2 else forms[::-1]:
                    started = clock()
                    form(*page)
                    if number >= 200:  # the first 200 warm both up
                        times[name].append(clock() - started)
            j, s = (statistics.median(times[n]) * 1e6 for n in ("joined", "stacked"))
            lines.append(
                f"{backend}, {case}-event page: joined {j:.1f} µs, stacked {s:.1f} µs, "
                f"stacked / joined {s / j:.3f} ({calls:,} calls each)"
            )
    finally:
        raw.close()
        svc.close()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql"))
    parser.add_argument("--sessions", type=int, default=2_000)
    args = parser.parse_args()
    backends = (args.backend,) if args.backend else ("sqlite", "postgresql")
    with run_context(quick=False, backends=backends) as ctx:
        for backend in backends:
            url, raw_target = ctx.database(backend, "forms")
            for line in measure(url, raw_target, backend, args.sessions):
                print(line, flush=True)


if __name__ == "__main__":
    main()
