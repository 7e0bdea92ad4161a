"""`python -m bench.lock_span REV [--rounds N] [--records N]`: how long one writer's save
holds the events table's lock on PostgreSQL, by this tree and by commit `REV`, alternately,
each in a process of its own, on a fresh database of one throwaway server.

The span is seen from the client: from sending the query that takes the lock (`LOCK TABLE`)
to the answer of the query that ends in `COMMIT`. It is what several writer processes queue
for (`record4`), and it is far steadier on a noisy machine than their throughput. Also
printed: the whole record's time, which a writer alone waits for.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent
#: What a round reports, in microseconds.
KEYS = ("lock_span_us", "record_us")


class LockSpans:
    """Collects the lock spans of the queries one writer sends, in order."""

    def __init__(self) -> None:
        self.spans: list[float] = []
        self._locked_at: float | None = None

    def seen(self, query: str, sent: float, answered: float) -> None:
        if "LOCK TABLE" in query:
            self._locked_at = sent
        if query.rstrip().endswith("COMMIT") and self._locked_at is not None:
            self.spans.append(answered - self._locked_at)
            self._locked_at = None


def measure(url: str, records: int) -> dict[str, float]:
    """One round on the database `url`, by the code this interpreter imports: medians in
    microseconds."""
    import psycopg  # noqa: PLC0415 -- the child's imports: the service from the tree measured

    sys.path.insert(0, str(REPO))  # this tree's bench, whichever tree's service is measured
    from bench.harness import median, quiet_logs  # noqa: PLC0415

    quiet_logs()
    from session_awareness.application import open_service  # noqa: PLC0415

    spans = LockSpans()
    execute = psycopg.Cursor.execute

    def timed(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent = time.perf_counter()
        result = execute(self, query, *args, **kwargs)
        spans.seen(query if isinstance(query, str) else "", sent, time.perf_counter())
        return result

    psycopg.Cursor.execute = timed  # type: ignore[method-assign]
    parent, child = "agent:w:main", "agent:w:subagent:worker"
    svc = open_service(url)
    try:
        svc.open_session(parent)
        svc.record_child_spawned(child, parent=parent, run_id="run-1")
        for _ in range(100):  # warm: caches, the server's buffers
            svc.record_human_direct_message(child, channel="bench")
        spans.spans.clear()
        started = time.perf_counter()
        for _ in range(records):
            svc.record_human_direct_message(child, channel="bench")
        whole = (time.perf_counter() - started) / records
    finally:
        svc.close()
    return {"lock_span_us": median(spans.spans) * 1e6, "record_us": whole * 1e6}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lock_span", description=__doc__)
    parser.add_argument("rev", nargs="?", help="the commit to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--records", type=int, default=600)
    parser.add_argument("--measure", metavar="URL", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.measure:
        print(json.dumps(measure(options.measure, options.records)))
        return 0
    if options.rev is None:
        parser.error("a commit to compare with is needed")
    sys.path.insert(0, str(REPO))
    from bench.trees import median_and_range, run_script, sides  # noqa: PLC0415
    from session_awareness.testing.pgcluster import PostgresCluster  # noqa: PLC0415

    rounds: dict[str, list[dict[str, float]]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="sa-lock-span-") as folder,
        sides(options.rev, Path(folder)) as both,
        PostgresCluster(dbname="bench") as pg,
    ):
        for number in range(1, options.rounds + 1):
            for side, (name, interpreter, cwd) in enumerate(both):
                print(f"[lock_span] round {number}/{options.rounds}: {name}", file=sys.stderr)
                url = pg.create_database(f"round_{number}_{side}")
                args = ["--measure", url, "--records", str(options.records)]
                rounds.setdefault(name, []).append(run_script(interpreter, HERE, args, cwd))
    print("| tree | lock span, µs (median, range) | record, µs (median, range) |")
    print("|---|---:|---:|")
    for name, results in rounds.items():
        span, record = (median_and_range([r[key] for r in results]) for key in KEYS)
        print(f"| {name} | {span} | {record} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
