"""reference: our service against the reference system's own data path (`bench/reference.py`),
on the same backend and driver, round by round. Every figure is ours / reference in one run:

- record, 1 writer: records/s, ours / reference; target ≥ 0.8;
- record, 4 threads of one process, each on its own session: records/s of all four; ≥ 1.5;
- fan-out: a record on a target with 100 pending watchers vs 1 (ours); ≤ 2. The reference's
  own 100 / 1 is shown beside it;
- drain, per pair, 1,000 pending pairs: ours / reference; ≤ 2;
- drain of one pending pair (a watcher with one child that spoke): latency ours / reference;
  ≤ 1.0 (issue 39);
- `changesSince`, a 200-event and a 5-event page: latency ours / reference; ≤ 1.0.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

from bench import s_changes, s_drain, s_fanout
from bench.context import Context
from bench.harness import (
    Result,
    clock,
    info_result,
    interleave,
    median,
    ratio_result,
    record_seconds,
)
from bench.profiling import profile
from bench.raw import RawStore
from bench.reference import PAGE_LIMIT, Reference
from bench.seed import watched_session
from session_awareness.application import open_service

NAME = "reference"
PARENT = "agent:main:main"
CHILD = "agent:main:subagent:worker"
THREADS = 4


def run(ctx: Context) -> list[Result]:
    out: list[Result] = []
    for backend in ctx.backends:
        out.append(record(ctx, backend))
        out.append(record_threads(ctx, backend))
        out.extend(fanout(ctx, backend))
        out.append(drain(ctx, backend))
        out.append(drain_one(ctx, backend))
        out.extend(changes(ctx, backend))
    return out


def _reference(ctx: Context, backend: str, name: str) -> tuple[Reference, str]:
    """The reference's tables in a database of their own, and that database's target."""
    _, target = ctx.database(backend, name)
    ref = Reference(backend, target)
    ref.create()
    return ref, target


def _ref_records(ref: Reference, key: str, count: int) -> float:
    started = clock()
    for _ in range(count):
        ref.record(key)
    return (clock() - started) / count


def record(ctx: Context, backend: str) -> Result:
    url, _ = ctx.database(backend, "ref_record_ours")
    svc = open_service(url)
    ref, _ = _reference(ctx, backend, "ref_record")
    try:
        watched_session(svc, CHILD, PARENT)
        ref.watch(PARENT, CHILD)
        per_round = ctx.scale(200, 30)
        rounds = interleave(
            lambda: 1 / record_seconds(svc, CHILD, per_round),
            lambda: 1 / _ref_records(ref, CHILD, per_round),
            rounds=ctx.scale(7, 3),
        )
    finally:
        ref.close()
        svc.close()
    return ratio_result(
        NAME, backend, "record, 1 writer vs the reference (records/s)", rounds,
        unit="ops/s", better="higher", target=0.8, details={"per_round": per_round},
    )  # fmt: skip


def _threaded(actions: list[Callable[[], None]]) -> float:
    """Run each action on its own thread, all released together; operations per second is
    for the caller to compute from the elapsed seconds returned."""
    gate = threading.Barrier(len(actions) + 1)
    errors: list[BaseException] = []

    def body(action: Callable[[], None]) -> None:
        gate.wait()
        try:
            action()
        except BaseException as error:  # noqa: BLE001 -- reported by the caller
            errors.append(error)

    threads = [threading.Thread(target=body, args=(a,)) for a in actions]
    for thread in threads:
        thread.start()
    gate.wait()
    started = clock()
    for thread in threads:
        thread.join()
    elapsed = clock() - started
    if errors:
        raise errors[0]
    return elapsed


def record_threads(ctx: Context, backend: str) -> Result:
    url, _ = ctx.database(backend, "ref_record4_ours")
    svc = open_service(url)
    _, target = ctx.database(backend, "ref_record4")
    refs = [Reference(backend, target) for _ in range(THREADS)]
    refs[0].create()
    keys = [(f"agent:t{n}:main", f"agent:t{n}:subagent:worker") for n in range(THREADS)]
    try:
        for parent, child in keys:
            watched_session(svc, child, parent)
            refs[0].watch(parent, child)
        count = ctx.scale(150, 25)

        def ours() -> float:
            elapsed = _threaded(
                [lambda c=child: record_seconds(svc, c, count) and None for _, child in keys]  # type: ignore[misc]
            )
            return THREADS * count / elapsed

        def reference() -> float:
            elapsed = _threaded(
                [lambda r=r, c=child: _ref_records(r, c, count) and None  # type: ignore[misc]
                 for r, (_, child) in zip(refs, keys, strict=True)]
            )  # fmt: skip
            return THREADS * count / elapsed

        rounds = interleave(ours, reference, rounds=ctx.scale(7, 3))
    finally:
        for ref in refs:
            ref.close()
        svc.close()
    return ratio_result(
        NAME, backend, f"record, {THREADS} threads vs the reference's {THREADS} (records/s, all)",
        rounds, unit="ops/s", better="higher", target=1.5,
        details={"per_thread_per_round": count},
    )  # fmt: skip


def fanout(ctx: Context, backend: str) -> list[Result]:
    url, _ = ctx.database(backend, "ref_fanout_ours")
    svc = open_service(url)
    ref, _ = _reference(ctx, backend, "ref_fanout")
    try:
        s_fanout.seed(svc)
        for watcher in [PARENT, *(f"agent:peer{n}:main" for n in range(1, s_fanout.WATCHERS))]:
            ref.watch(watcher, s_fanout.WIDE)
        ref.watch(PARENT, s_fanout.NARROW)
        per_round = ctx.scale(20, 5)
        ours = interleave(
            lambda: record_seconds(svc, s_fanout.WIDE, per_round),
            lambda: record_seconds(svc, s_fanout.NARROW, per_round),
            rounds=ctx.scale(7, 3),
        )
        theirs = interleave(
            lambda: _ref_records(ref, s_fanout.WIDE, per_round),
            lambda: _ref_records(ref, s_fanout.NARROW, per_round),
            rounds=ctx.scale(7, 3),
        )
        profile(ctx, NAME + "-fanout", backend,
                lambda: record_seconds(svc, s_fanout.WIDE, per_round))  # fmt: skip
    finally:
        ref.close()
        svc.close()
    watchers = s_fanout.WATCHERS
    return [
        ratio_result(
            NAME, backend, f"record on {watchers} pending watchers vs 1, ours (µs)", ours,
            unit="µs", better="lower", target=2, scale=1e6, details={"per_round": per_round},
        ),
        info_result(
            NAME, backend, f"record on {watchers} pending watchers vs 1, the reference (µs)",
            median(theirs.ours) * 1e6, unit="µs", baseline=median(theirs.baseline) * 1e6,
            details={"ratios": [round(r, 4) for r in theirs.ratios()]},
        ),
    ]  # fmt: skip


def drain(ctx: Context, backend: str) -> Result:
    url, raw_target = ctx.database(backend, "ref_drain_ours")
    pairs = ctx.scale(1_000, 100)
    svc = open_service(url)
    raw = RawStore(backend, raw_target)  # s_drain's seed also fills its plain-driver table
    ref, _ = _reference(ctx, backend, "ref_drain")
    try:
        s_drain.seed(svc, raw, pairs)
        for number in range(pairs):
            ref.watch(s_drain.WATCHER, s_drain.target(number))

        def ours() -> float:
            s_drain.make_pending(svc, pairs)
            started = clock()
            drained = len(svc.drain_notices(s_drain.WATCHER))
            elapsed = clock() - started
            if drained != pairs:
                raise RuntimeError(f"drained {drained} notices, expected {pairs}")
            return elapsed / pairs

        def reference() -> float:
            for number in range(pairs):  # untimed: one signal on each target
                ref.record(s_drain.target(number))
            started = clock()
            drained = ref.drain(s_drain.WATCHER)
            elapsed = clock() - started
            if drained != pairs:
                raise RuntimeError(f"the reference drained {drained}, expected {pairs}")
            return elapsed / pairs

        rounds = interleave(ours, reference, rounds=ctx.scale(5, 3))
    finally:
        ref.close()
        raw.close()
        svc.close()
    return ratio_result(
        NAME, backend, f"drain {pairs:,} pending pairs vs the reference, per pair (µs)", rounds,
        unit="µs", better="lower", target=2, scale=1e6, details={"pairs": pairs},
    )  # fmt: skip


def drain_one(ctx: Context, backend: str) -> Result:
    """A drain of the one pending pair a watcher has, as an agent's turn drains the notice
    of the child that spoke: the record that makes it pending is untimed, on both sides."""
    url, raw_target = ctx.database(backend, "ref_drain_one_ours")
    calls = ctx.scale(50, 10)
    svc = open_service(url)
    raw = RawStore(backend, raw_target)
    ref, _ = _reference(ctx, backend, "ref_drain_one")
    try:
        s_drain.seed(svc, raw, 1)
        ref.watch(s_drain.WATCHER, s_drain.target(0))

        def ours() -> float:
            total = 0.0
            for _ in range(calls):
                s_drain.make_pending(svc, 1)
                started = clock()
                drained = len(svc.drain_notices(s_drain.WATCHER))
                total += clock() - started
                if drained != 1:
                    raise RuntimeError(f"drained {drained} notices, expected 1")
            return total / calls

        def reference() -> float:
            total = 0.0
            for _ in range(calls):
                ref.record(s_drain.target(0))
                started = clock()
                drained = ref.drain(s_drain.WATCHER)
                total += clock() - started
                if drained != 1:
                    raise RuntimeError(f"the reference drained {drained}, expected 1")
            return total / calls

        rounds = interleave(ours, reference, rounds=ctx.scale(9, 3))
        profile(ctx, f"{NAME}-drain1", backend, ours)
    finally:
        ref.close()
        raw.close()
        svc.close()
    return ratio_result(
        NAME, backend, "drain of 1 pending pair vs the reference (µs)", rounds,
        unit="µs", better="lower", target=1, scale=1e6, details={"calls_per_round": calls},
    )  # fmt: skip


def changes(ctx: Context, backend: str) -> list[Result]:
    url, raw_target = ctx.database(backend, "ref_changes_ours")
    sessions, rows = ctx.scale(5_000, 500), ctx.scale(50_000, 5_000)
    svc = open_service(url, retention_rows=rows)
    raw = RawStore(backend, raw_target)
    ref, _ = _reference(ctx, backend, "ref_changes")
    out: list[Result] = []
    try:
        raw.create_changes()
        keys = s_changes.seed(svc, raw, sessions, rows)
        per_session = rows // sessions
        ref.fill([(key, per_session) for key in keys] + [(s_changes.HOT, 250)])
        small = random.Random(5).sample(keys[len(keys) // 2 :], 100)  # noqa: S311 -- a sample
        calls = ctx.scale(100, 20)
        for size, page_keys in ((200, [s_changes.HOT]), (5, small)):
            our_pages = [(k, svc.session_status(k)["stateVersion"] - size) for k in page_keys]
            ref_pages = [(k, _since(ref, k, size)) for k in page_keys]
            rounds = interleave(
                _pages(lambda k, s: svc.session_status(k, changes_since=s), our_pages, size, calls),
                _pages(ref.changes_since, ref_pages, size, calls),
                rounds=ctx.scale(9, 3),
            )
            out.append(ratio_result(
                NAME, backend, f"changesSince {size}-event page vs the reference (µs)", rounds,
                unit="µs", better="lower", target=1.0, scale=1e6,
                details={"calls_per_round": calls, "sessions": sessions, "rows": rows},
            ))  # fmt: skip
    finally:
        ref.close()
        raw.close()
        svc.close()
    return out


def _since(ref: Reference, key: str, size: int) -> int:
    """The sequence after which `key` has exactly `size` events in the reference's log (its
    sequences are global, so not the head minus `size`)."""
    page = ref.changes_since(key, 0)["stateChanges"]["events"]
    sequences = [event["sequence"] for event in page]
    while len(page) == PAGE_LIMIT:  # a full page: read on
        page = ref.changes_since(key, sequences[-1])["stateChanges"]["events"]
        sequences += [event["sequence"] for event in page]
    return int(sequences[-size - 1])


def _pages(
    call: Callable[[str, int], dict[str, Any]], pages: list[tuple[str, int]], size: int, calls: int
) -> Callable[[], float]:
    def one_round() -> float:
        started = clock()
        for number in range(calls):
            key, since = pages[number % len(pages)]
            if len(call(key, since)["stateChanges"]["events"]) != size:
                raise RuntimeError(f"expected a {size}-event page")
        return (clock() - started) / calls

    return one_round
