"""scale: a PostgreSQL store of many sessions against one of 1,000, in the same run (issue 39,
item 6; ADR 038). Not part of `make bench`: `make bench-scale` (or `python -m bench.scale
--sessions N`).

Both stores are seeded by the same bulk path, `seed.Batch`: the service's own producer logic
(the same domain decisions, fan-out and idempotency as `record_*`), many calls per unit of
work, every event of a unit stored with the inline projection in one save (multi-row inserts,
the read-model appends by COPY). The rows are exactly the ones the producers would write one
call at a time; only the transactions are fewer. The small store's whole event store is
audited (`svc.audit()`), and the large store's own reads are checked on a sample of sessions
(heads, children, pending notices).

The shape is the issue's: a fifth of the sessions are main sessions of their own agent, each
spawning four sub-agents; a sub-agent gets its spawn and eleven human turns and goal changes,
its parent two goal changes, and every seventh parent drains one pair: about ten stored
signals per session. Nothing prunes while seeding (as a store that was never
opened by a service), so the first `open_service` finds the whole history past the row cap.

Measured, medians over rounds with their spread (p10–p90):
- `open_service` of each store with its background maintenance on: until it returns, and
  until its first call (`sessions_list(limit=20)`) answers; then how long the start-up
  maintenance (the prune of everything past the cap, then the sweep) takes in the background.
- With the maintenance idle: a record on a watched sub-agent, `session_status` with
  `changes_since` five events back, a drain of one pending pair, and
  `sessions_list(kinds=["main"], limit=20)`, each as a ratio of the large store to the small.
- Seeding time and the database's size on disk.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from bench.context import RESULTS_DIR, run_context
from bench.harness import quiet_logs
from bench.seed import Batch
from session_awareness.application import SessionAwareness, open_service
from session_awareness.domain.keys import SessionRef, drains_id, watch_id
from session_awareness.testing import wait_until

SMALL = 1_000
CHILDREN = 4
CHILD_SIGNALS = 12
PARENT_GOALS = 2
SAMPLE = 50
#: How long the background maintenance of the large store may take before the run gives up.
MAINTENANCE_DEADLINE = 6 * 3600.0


def parent(number: int) -> str:
    return f"agent:a{number}:main"


def child(number: int, index: int) -> str:
    return f"agent:a{number}:subagent:c{index}"


class FreshBatch(Batch):
    """`Batch` on a store being seeded: the sessions, cursors and drains of a family are new,
    so the unit of work is told they are absent instead of asking the store for each."""

    def absent(self, *ids: UUID) -> None:
        for aggregate_id in ids:
            self._uow._loaded.setdefault(aggregate_id, None)


def family_ids(number: int) -> list[UUID]:
    main = SessionRef.of(parent(number))
    ids = [main.session_id, drains_id(main.key)]
    for index in range(CHILDREN):
        sid = SessionRef.of(child(number, index)).session_id
        ids += [sid, watch_id(main.key, sid)]
    return ids


def seed(svc: SessionAwareness, sessions: int, *, progress: bool) -> tuple[int, float]:
    """`sessions` sessions (a fifth main, four sub-agents each); events stored, seconds.
    No signal carries an idempotency key (turn keys, run ids): each would cost the seed a
    read of the key index, which is not what this measures."""
    rng = random.Random(sessions)  # noqa: S311 -- a seeded mix, not crypto
    started = time.perf_counter()
    batch = FreshBatch(svc, size=5_000)
    families = sessions // (CHILDREN + 1)
    for number in range(families):
        main = parent(number)
        batch.absent(*family_ids(number))
        batch.open(main)
        for index in range(CHILDREN):
            key = child(number, index)
            batch.spawn(key, parent=main, run_id=f"spawn-{index}")
            for _ in range(1, CHILD_SIGNALS):
                if rng.random() < 0.6:
                    batch.human(key)
                else:
                    batch.goal(key)
        for _ in range(PARENT_GOALS):
            batch.goal(main)
        if number % 7 == 0:  # some parents drained one pair: a Drains stream each
            batch.acknowledge(main, child(number, 0))
        if progress and number and number % 2_000 == 0:
            rate = batch.events / (time.perf_counter() - started)
            print(f"  seeded {number * (CHILDREN + 1):,} sessions, {rate:,.0f} events/s",
                  file=sys.stderr, flush=True)  # fmt: skip
    batch.flush()
    return batch.events, time.perf_counter() - started


def database_size(svc: SessionAwareness) -> int:
    with svc.store.recorder.datastore.transaction(commit=False) as c:  # type: ignore[attr-defined]
        c.execute("SELECT pg_database_size(current_database())")
        return int(next(iter(dict(c.fetchone()).values())))


def spread(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    at = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"median": statistics.median(ordered), "p10": at(0.1), "p90": at(0.9)}


def timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def check(holds: bool, what: object) -> None:
    """A seeded store that does not read as seeded stops the run: its figures would lie."""
    if not holds:
        raise RuntimeError(f"the seeded store does not read as seeded: {what!r}")


def check_reads(svc: SessionAwareness, sessions: int) -> None:
    """The service's own reads of a sample agree with what was seeded."""
    rng = random.Random(7)  # noqa: S311 -- a seeded sample, not crypto
    families = sessions // (CHILDREN + 1)
    for number in rng.sample(range(families), min(SAMPLE, families)):
        status = svc.session_status(child(number, 1))
        check(status["stateVersion"] == CHILD_SIGNALS, status)
        rows = svc.sessions_list(agent_id=f"a{number}", kinds=["main"])
        check([row["sessionKey"] for row in rows] == [parent(number)], rows)
        children = sorted(rows[0]["childSessionKeys"])
        check(children == [child(number, i) for i in range(CHILDREN)], children)
        head = svc.session_status(parent(number))["stateVersion"]
        check(head == PARENT_GOALS, head)
        check(len(svc.pending_notices(parent(number))) <= CHILDREN, parent(number))


def measure(svc: SessionAwareness, rounds: int, families: int) -> dict[str, dict[str, float]]:
    """The steady-state calls, each `rounds` times, on families spread over the store."""
    rng = random.Random(11)  # noqa: S311 -- a seeded sample, not crypto
    samples: dict[str, list[float]] = {"record": [], "changes_since": [], "drain": [],
                                       "sessions_list": []}  # fmt: skip
    for _ in range(rounds):
        number = rng.randrange(families)
        key, main = child(number, 2), parent(number)
        svc.drain_notices(main)  # untimed: nothing pending before the record
        samples["record"].append(
            timed(lambda: svc.record_human_direct_message(key, channel="bench"))  # noqa: B023
        )
        head = svc.session_status(key)["stateVersion"]
        samples["changes_since"].append(
            timed(lambda: svc.session_status(key, changes_since=head - 5))  # noqa: B023
        )
        samples["drain"].append(timed(lambda: svc.drain_notices(main)))  # noqa: B023
        samples["sessions_list"].append(timed(lambda: svc.sessions_list(kinds=["main"], limit=20)))
    return {name: spread(values) for name, values in samples.items()}


def opened(url: str, rounds: int) -> tuple[SessionAwareness, dict[str, Any]]:
    """Open the store as a restarted host does (background maintenance on), `rounds` times:
    until `open_service` returns and until its first call answers; the last one is kept
    open and its start-up maintenance waited for."""
    returns, first_calls = [], []
    svc: SessionAwareness | None = None
    for number in range(rounds):
        if svc is not None:
            svc.close()
        started = time.perf_counter()
        svc = open_service(url)
        returns.append(time.perf_counter() - started)
        svc.sessions_list(limit=20)
        first_calls.append(time.perf_counter() - started)
        if number == 0:  # the first start does the big prune: wait for it once
            maintained = time.perf_counter()
            if not wait_until(lambda: svc.maintenance_idle, MAINTENANCE_DEADLINE, 0.5):  # noqa: B023
                raise RuntimeError("the start-up maintenance did not finish in time")
            maintenance = time.perf_counter() - maintained
    if svc is None:
        raise ValueError("opens must be at least 1")
    return svc, {
        "open_service": spread(returns),
        "first_call": spread(first_calls),
        "first_maintenance_s": maintenance,
    }


def run(sessions: int, rounds: int, opens: int) -> dict[str, Any]:
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "sessions": sessions,
        "rounds": rounds,
    }
    with run_context(quick=False, backends=("postgresql",)) as ctx:
        stores = {}
        for name, size in (("small", SMALL), ("large", sessions)):
            url, _ = ctx.database("postgresql", f"scale_{name}")
            svc = open_service(url, maintenance="manual")
            print(f"seeding {name}: {size:,} sessions", file=sys.stderr, flush=True)
            events, seconds = seed(svc, size, progress=name == "large")
            check_reads(svc, size)
            if name == "small":
                report = svc.audit()
                check(report.clean, report.as_dict())
            stores[name] = {"url": url, "events": events, "seed_s": seconds,
                            "size_bytes": database_size(svc)}  # fmt: skip
            svc.close()
        for name in ("small", "large"):
            print(f"opening {name}", file=sys.stderr, flush=True)
            svc, starts = opened(stores[name]["url"], opens)
            stores[name].update(starts)
            stores[name]["size_after_prune_bytes"] = database_size(svc)
            families = (SMALL if name == "small" else sessions) // (CHILDREN + 1)
            print(f"measuring {name}", file=sys.stderr, flush=True)
            stores[name]["calls"] = measure(svc, rounds, families)
            svc.close()
            del stores[name]["url"]
    small, large = stores["small"]["calls"], stores["large"]["calls"]
    result["stores"] = stores
    result["ratios"] = {name: large[name]["median"] / small[name]["median"] for name in small}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scale", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--sessions", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--opens", type=int, default=5)
    args = parser.parse_args(argv)
    quiet_logs()  # the service's INFO lines are not what is measured; progress goes to stderr
    result = run(args.sessions, args.rounds, args.opens)
    text = json.dumps(result, indent=2)
    print(text)
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"scale-{args.sessions}.json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
