"""scale: a PostgreSQL store of many sessions against one of 1,000, in the same run (issue 39,
item 6; ADR 038). Not part of `make bench`: `make bench-scale` (or `python -m bench.scale
--sessions N`).

Both stores are seeded by the same path: by default `bench.bulk_seed` (seven template
families through the service's producer logic, replicated by COPY with their ids, keys and
notification ids substituted; about 30,000 events/s here), or `--seed producers`: `seed.Batch`,
the producers' logic for every family, many calls per save (about 1,460 events/s). The small
store's whole event store is audited (`svc.audit()`), and both stores' own reads are checked
on a sample of families (heads, children, pending notices).

The shape is the issue's: a fifth of the sessions are main sessions of their own agent, each
spawning four sub-agents; a sub-agent gets its spawn and eleven human turns and goal changes,
its parent two goal changes, and every seventh parent drains one pair: about ten stored
signals per session. Nothing prunes while seeding (as a store that was never
opened by a service), so the first `open_service` finds the whole history past the row cap.

Measured, medians over rounds with their spread (p10–p90):
- `open_service` of each store with its background maintenance on: until it returns, and
  until its first call (`sessions_list(limit=20)`) answers; then how long the start-up
  maintenance (the prune of everything past the cap, then the sweep) takes in the background.
- While the first start's maintenance runs (its prune batches beside them): the calls below,
  with the slowest of each, since a stall shows in the tail.
- With the maintenance idle: a record on a watched sub-agent, `session_status` with
  `changes_since` five events back, a drain of one pending pair, and
  `sessions_list(kinds=["main"], limit=20)`, each as a ratio of the large store to the small,
  the two stores taking turns round by round so both see the same minutes of the machine.
- Seeding time and the database's size on disk.
- The audit of the whole large store, in a process of its own: its rate, its progress on
  stderr and its peak RSS (`--no-audit` skips it).

The first start's maintenance (the prune of everything past the row cap) is waited for at
most `--wait-maintenance` seconds; past that the calls are measured on a service opened with
`maintenance="manual"`, on a store the prune has not finished.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import multiprocessing
import os
import pstats
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from bench.bulk_seed import bulk_seed
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
#: A start slower than this (seconds) has its profile printed on stderr.
SLOW_START = 0.5
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


def seed_family(batch: FreshBatch, number: int, rng: random.Random, *, drained: bool) -> None:
    """One family: a main session spawning `CHILDREN` sub-agents, each with its spawn and
    `CHILD_SIGNALS - 1` human turns and goal changes, two goal changes on the parent, and,
    when `drained`, the parent draining one pair."""
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
    if drained:  # some parents drained one pair: a Drains stream each
        batch.acknowledge(main, child(number, 0))


def seed(svc: SessionAwareness, sessions: int, *, progress: bool) -> tuple[int, float]:
    """`sessions` sessions (a fifth main, four sub-agents each) through the producers' logic;
    events stored, seconds. No signal carries an idempotency key (turn keys, run ids): each
    would cost the seed a read of the key index, which is not what this measures."""
    rng = random.Random(sessions)  # noqa: S311 -- a seeded mix, not crypto
    started = time.perf_counter()
    batch = FreshBatch(svc, size=5_000)
    families = sessions // (CHILDREN + 1)
    for number in range(families):
        seed_family(batch, number, rng, drained=number % 7 == 0)
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


CALLS = ("record", "changes_since", "drain", "sessions_list")


def one_round(svc: SessionAwareness, rng: random.Random, families: int) -> dict[str, float]:
    """Each steady-state call once, on a family drawn by `rng`: seconds by call."""
    number = rng.randrange(families)
    key, main = child(number, 2), parent(number)
    svc.drain_notices(main)  # untimed: nothing pending before the record
    took = {"record": timed(lambda: svc.record_human_direct_message(key, channel="bench"))}
    head = svc.session_status(key)["stateVersion"]
    took["changes_since"] = timed(lambda: svc.session_status(key, changes_since=head - 5))
    took["drain"] = timed(lambda: svc.drain_notices(main))
    took["sessions_list"] = timed(lambda: svc.sessions_list(kinds=["main"], limit=20))
    return took


def measure(services: dict[str, tuple[SessionAwareness, int]], rounds: int) -> dict[str, Any]:
    """The steady-state calls, each `rounds` times on families spread over each store, the
    stores taking turns round by round (which goes first alternates), so both are measured
    in the same minutes of a machine whose load moves: by name, each call's spread."""
    rngs = {name: random.Random(11) for name in services}  # noqa: S311 -- a seeded sample
    samples: dict[str, dict[str, list[float]]] = {
        name: {call: [] for call in CALLS} for name in services
    }
    names = list(services)
    for number in range(rounds):
        for name in names if number % 2 == 0 else names[::-1]:
            svc, families = services[name]
            for call, seconds in one_round(svc, rngs[name], families).items():
                samples[name][call].append(seconds)
    return {name: {call: spread(values) for call, values in calls.items()}
            for name, calls in samples.items()}  # fmt: skip


def measure_while_maintaining(svc: SessionAwareness, rounds: int, families: int) -> dict[str, Any]:
    """The same calls while the start-up maintenance runs in the background (the prune's
    batches beside them): at most `rounds` rounds, each kept only when the maintenance was
    under way from its start to its end; the slowest call is reported too, since a stall
    shows in the tail, not the median."""
    rng = random.Random(13)  # noqa: S311 -- a seeded sample, not crypto
    samples: dict[str, list[float]] = {name: [] for name in CALLS}

    def busy() -> bool:
        return not svc.maintenance_idle

    for _ in range(rounds):
        if not busy():
            break
        took = one_round(svc, rng, families)
        if not busy():
            break
        for name, seconds in took.items():
            samples[name].append(seconds)
    calls = {name: {**spread(values), "max": max(values)} for name, values in samples.items()
             if values}  # fmt: skip
    return {"rounds": len(samples["record"]), "calls": calls}


def opened(
    url: str, rounds: int, wait: float, *, families: int, calls: int
) -> tuple[SessionAwareness, dict[str, Any]]:
    """Open the store as a restarted host does (background maintenance on), `rounds` times:
    until `open_service` returns and until its first call answers (each start's own figures
    are kept, so one slow start shows). After the first start, `calls` rounds of the calls
    are measured while its maintenance runs (`measure_while_maintaining`), then the
    maintenance is waited for, `wait` seconds at most: a service still maintaining is
    closed (after its batch under way) and the calls are measured on one opened with
    `maintenance="manual"`, so no prune batch runs beside them. The service measured is
    returned open."""
    returns, first_calls = [], []
    maintenance: float | None = None
    while_maintaining: dict[str, Any] | None = None
    svc: SessionAwareness | None = None
    for number in range(rounds):
        if svc is not None:
            svc.close()
        profile = cProfile.Profile()
        started = time.perf_counter()
        svc = profile.runcall(open_service, url)
        returns.append(time.perf_counter() - started)
        if returns[-1] > SLOW_START:  # say where a slow start went, not only that it was slow
            print(f"start {number + 1} took {returns[-1]:.2f} s:", file=sys.stderr)
            pstats.Stats(profile, stream=sys.stderr).sort_stats("cumulative").print_stats(25)
        svc.sessions_list(limit=20)
        first_calls.append(time.perf_counter() - started)
        if number == 0:  # the first start does the big prune: wait for it once
            maintained = time.perf_counter()
            print("measuring calls while the maintenance runs", file=sys.stderr, flush=True)
            first = svc
            while_maintaining = measure_while_maintaining(first, calls, families)
            if wait_until(lambda: first.maintenance_idle, wait, 0.5):  # noqa: B023
                maintenance = time.perf_counter() - maintained
    if svc is None:
        raise ValueError("opens must be at least 1")
    if maintenance is None or not svc.maintenance_idle:
        svc.close()
        svc = open_service(url, maintenance="manual")
    return svc, {
        "open_service": spread(returns),
        "first_call": spread(first_calls),
        "open_service_each_s": returns,
        "first_call_each_s": first_calls,
        "calls_while_maintaining": while_maintaining,
        "first_maintenance_s": maintenance,
        "maintenance_waited_s": wait if maintenance is None else None,
    }


def seeded(ctx: Any, name: str, size: int, how: str) -> dict[str, Any]:
    """A store of `size` sessions seeded by `how` (`bulk`: `bench.bulk_seed`; `producers`:
    `seed`), its reads checked on a sample, the small one audited."""
    url, raw = ctx.database("postgresql", f"scale_{name}")
    print(f"seeding {name}: {size:,} sessions ({how})", file=sys.stderr, flush=True)
    if how == "bulk":
        template, _ = ctx.database("postgresql", f"scale_{name}_template")
        events, seconds = bulk_seed(
            url, raw, template, size // (CHILDREN + 1), progress=name == "large"
        )
        svc = open_service(url, maintenance="manual")
    else:
        svc = open_service(url, maintenance="manual")
        events, seconds = seed(svc, size, progress=name == "large")
    try:
        check_reads(svc, size)
        if name == "small":
            report = svc.audit()
            check(report.clean, report.as_dict())
        return {"url": url, "events": events, "seed_s": seconds,
                "size_bytes": database_size(svc)}  # fmt: skip
    finally:
        svc.close()


def _audit_in_child(url: str, results: Any) -> None:
    """The whole store's audit in a process of its own, so its peak memory is its own:
    progress on stderr every ten seconds; the report's figures and the peak RSS sent back."""
    quiet_logs()
    svc = open_service(url, maintenance="manual")
    shown = [time.perf_counter()]
    started = time.perf_counter()

    def progress(position: int, last: int) -> None:
        now = time.perf_counter()
        if now - shown[0] >= 10:
            shown[0] = now
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
            print(f"  audit: {position:,} of {last:,} ({position / (now - started):,.0f} "
                  f"events/s, peak {rss} MB)", file=sys.stderr, flush=True)  # fmt: skip

    try:
        report = svc.audit(progress=progress)
    finally:
        svc.close()
    results.put({
        "clean": report.clean,
        "events": report.events,
        "seconds": report.seconds,
        "events_per_second": report.events_per_second,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    })  # fmt: skip


def audited(url: str) -> dict[str, Any]:
    """`_audit_in_child` run and waited for."""
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    child = spawn.Process(target=_audit_in_child, args=(url, results))
    child.start()
    outcome: dict[str, Any] = results.get()
    child.join()
    return outcome


def run(
    sessions: int, rounds: int, opens: int, *, how: str = "bulk",
    wait: float = MAINTENANCE_DEADLINE, audit: bool = True,
) -> dict[str, Any]:  # fmt: skip
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "sessions": sessions,
        "rounds": rounds,
        "seed": how,
        "load_before": os.getloadavg(),
    }
    with run_context(quick=False, backends=("postgresql",)) as ctx:
        stores = {name: seeded(ctx, name, size, how)
                  for name, size in (("small", SMALL), ("large", sessions))}  # fmt: skip
        services: dict[str, tuple[SessionAwareness, int]] = {}
        try:
            for name in ("small", "large"):
                print(f"opening {name}", file=sys.stderr, flush=True)
                families = (SMALL if name == "small" else sessions) // (CHILDREN + 1)
                svc, starts = opened(stores[name]["url"], opens, wait, families=families,
                                     calls=rounds)  # fmt: skip
                services[name] = (svc, families)
                stores[name].update(starts)
                stores[name]["size_after_start_bytes"] = database_size(svc)
            print("measuring both stores, round by round", file=sys.stderr, flush=True)
            for name, calls in measure(services, rounds).items():
                stores[name]["calls"] = calls
        finally:
            for svc, _ in services.values():
                svc.close()
        shown = {n: {k: v for k, v in store.items() if k != "url"} for n, store in stores.items()}
        print(json.dumps(shown), file=sys.stderr, flush=True)  # before the audit
        if audit:
            print("auditing large", file=sys.stderr, flush=True)
            stores["large"]["audit"] = audited(stores["large"]["url"])
        for store in stores.values():
            del store["url"]
    small, large = stores["small"]["calls"], stores["large"]["calls"]
    result["stores"] = stores
    result["ratios"] = {name: large[name]["median"] / small[name]["median"] for name in small}
    result["load_after"] = os.getloadavg()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scale", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--sessions", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--opens", type=int, default=5)
    parser.add_argument(
        "--seed",
        choices=("bulk", "producers"),
        default="bulk",
        help="bulk: COPY of replicated template families (bench.bulk_seed)",
    )
    parser.add_argument(
        "--wait-maintenance",
        type=float,
        default=MAINTENANCE_DEADLINE,
        help="seconds to wait for the first start's maintenance (the prune)",
    )
    parser.add_argument("--no-audit", action="store_true",
                        help="skip the audit of the whole large store")  # fmt: skip
    args = parser.parse_args(argv)
    quiet_logs()  # the service's INFO lines are not what is measured; progress goes to stderr
    result = run(args.sessions, args.rounds, args.opens, how=args.seed,
                 wait=args.wait_maintenance, audit=not args.no_audit)  # fmt: skip
    text = json.dumps(result, indent=2)
    print(text)
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"scale-{args.sessions}.json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
