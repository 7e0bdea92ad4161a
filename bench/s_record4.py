"""record, 4 writer processes on 4 different sessions (PostgreSQL), against 4 processes doing
the raw INSERT + COMMIT. Aggregate throughput; target ≥ 0.5.

While one extra round of each side runs, the parent samples `pg_stat_activity` every few
milliseconds: what the writers' backends wait on (a table lock, the NOTIFY queue lock, the WAL
flush) is the profile that explains the ratio.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from collections import Counter
from multiprocessing.connection import Connection
from typing import Any

import psycopg

from bench.context import Context
from bench.harness import Result, interleave, quiet_logs, ratio_result
from bench.raw import RawStore, change_row
from bench.seed import watched_session

NAME = "record4"
WRITERS = 4


def worker(conn: Connection, url: str, raw_url: str, number: int, proposals: list[str]) -> None:
    """One writer process: its own service and its own session; runs rounds on command."""
    quiet_logs()
    if proposals:
        from bench import proposals as patches  # noqa: PLC0415

        patches.apply(proposals)
    from session_awareness.application import open_service  # noqa: PLC0415

    parent, child = f"agent:w{number}:main", f"agent:w{number}:subagent:worker"
    svc = open_service(url)
    raw = RawStore("postgresql", raw_url)
    watched_session(svc, child, parent)
    sequence = number * 10_000_000
    conn.send("ready")
    try:
        while True:
            command = conn.recv()
            if command is None:
                return
            side, count = command
            started = time.monotonic()
            for _ in range(count):
                if side == "ours":
                    if svc.record_human_direct_message(child, channel="bench") is None:
                        raise RuntimeError("the record was not recorded")
                else:
                    sequence += 1
                    raw.insert_committed(change_row(child, sequence))
            conn.send((started, time.monotonic()))
    finally:
        raw.close()
        svc.close()


class Writers:
    """Four writer processes driven round by round."""

    def __init__(self, url: str, raw_url: str, proposals: list[str]) -> None:
        spawn = mp.get_context("spawn")
        self.pipes: list[Connection] = []
        self.processes = []
        for number in range(WRITERS):
            here, there = spawn.Pipe()
            process = spawn.Process(
                target=worker, args=(there, url, raw_url, number, proposals), daemon=True
            )
            process.start()
            there.close()  # the child's end is the child's alone: its exit ends our `recv`
            self.pipes.append(here)
            self.processes.append(process)
        for pipe in self.pipes:
            if self._receive(pipe) != "ready":
                raise RuntimeError("a writer failed to start")

    @staticmethod
    def _receive(pipe: Connection) -> Any:
        try:
            return pipe.recv()
        except EOFError:
            raise RuntimeError("a writer process ended (its traceback is above)") from None

    def round(self, side: str, count: int) -> float:
        """Aggregate operations per second of one round of all writers."""
        for pipe in self.pipes:
            pipe.send((side, count))
        spans = [self._receive(pipe) for pipe in self.pipes]
        first, last = min(s for s, _ in spans), max(e for _, e in spans)
        return float(WRITERS * count / (last - first))

    def close(self) -> None:
        for pipe in self.pipes:
            pipe.send(None)
        for process in self.processes:
            process.join(timeout=30)


def sample_waits(url: str, stop: threading.Event) -> Counter[str]:
    """What the database's active backends wait on, sampled every 2 ms until `stop`."""
    seen: Counter[str] = Counter()
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            rows = conn.execute(
                "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU/running') "
                "FROM pg_stat_activity WHERE datname = current_database() "
                "AND state = 'active' AND pid <> pg_backend_pid()"
            ).fetchall()
            seen.update(row[0] for row in rows)
            time.sleep(0.002)
    return seen


def waits_during(url: str, action: Any) -> dict[str, float]:
    stop = threading.Event()
    result: dict[str, Counter[str]] = {}
    thread = threading.Thread(target=lambda: result.setdefault("w", sample_waits(url, stop)))
    thread.start()
    try:
        action()
    finally:
        stop.set()
        thread.join()
    counts = result.get("w", Counter())
    total = sum(counts.values()) or 1
    return {k: round(v / total, 3) for k, v in counts.most_common(6)}


def run(ctx: Context) -> list[Result]:
    if "postgresql" not in ctx.backends:
        return []
    url, raw_url = ctx.database("postgresql", "record4")
    from bench import proposals  # noqa: PLC0415

    raw = RawStore("postgresql", raw_url)
    raw.create_changes()
    raw.close()
    writers = Writers(url, raw_url, proposals.APPLIED)
    try:
        count = ctx.scale(150, 25)
        rounds = interleave(
            lambda: writers.round("ours", count),
            lambda: writers.round("raw", count),
            rounds=ctx.scale(7, 3),
        )
        waits = {
            "ours": waits_during(raw_url, lambda: writers.round("ours", count)),
            "baseline": waits_during(raw_url, lambda: writers.round("raw", count)),
        }
    finally:
        writers.close()
    result = ratio_result(
        NAME, "postgresql", "record, 4 writer processes (records/s, all writers)", rounds,
        unit="ops/s", better="higher", target=0.5,
        details={"per_writer_per_round": count, "backend_waits": waits},
    )  # fmt: skip
    return [result]
