"""`python -m bench.drain_floor`: the floor of a drain's writes, with no Python around them.

Before ADR 024, a drain of 1,000 pending pairs stored one `Watch.Acknowledged` event per pair
and moved each pair's cursor row (docs/architecture.md). This writes exactly that through the plain
driver (SQLite, the service's read-model tables, the library's event table), against the
reference's drain (the pending rows read, one `UPDATE` per pair, `bench/reference.py`), and
against the shape ADR 024 chose (the same `UPDATE`s and one event for the whole drain),
alternating round by round in one transaction each. It prints each per pair and as a ratio
to the reference's: the best a drain can reach in each design.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.floor import sqlite_store

ROUNDS, PAIRS = 9, 1_000
WATCHER = "agent:main:main"
#: An `Acknowledged` event's state as the library stores it (about the size of the real one).
STATE = json.dumps(
    {"originator_id": "0" * 32, "originator_version": 5, "acknowledged": 2, "notified": 3,
     "material": 3, "timestamp": {"_type_": "datetime_iso", "_data_": "2026-12-01T19:00:00"}}
).encode()  # fmt: skip
PENDING = (
    "SELECT watch_id, notified, material FROM session_watch_cursors "
    "WHERE watcher_key = ? AND notified > acknowledged"
)
MOVE = (
    "UPDATE session_watch_cursors SET acknowledged = ?, notified = ?, material = ?, "
    "updated_at = ? WHERE watch_id = ?"
)
EVENT = "INSERT INTO stored_events VALUES (?, ?, ?, ?)"


def setup(path: Path) -> sqlite3.Connection:
    c = sqlite_store(path)
    c.executemany(
        "INSERT INTO session_watch_cursors VALUES (?, ?, ?, ?, 1, 1, 1, NULL, 0)",
        [(f"{n:032x}", WATCHER, f"{n:032x}", f"agent:main:subagent:t{n}") for n in range(PAIRS)],
    )
    return c


def drains(c: sqlite3.Connection) -> dict[str, Callable[[int], None]]:
    def pending(version: int) -> list[tuple[str, int, int, int]]:
        # Each round makes every pair pending first (untimed): N and M one ahead of L.
        return [(w, n, m, version) for w, n, m in c.execute(PENDING, (WATCHER,)).fetchall()]

    def transaction(
        version: int, events: Callable[[list[tuple[str, int, int, int]]], None]
    ) -> None:
        c.execute("BEGIN IMMEDIATE")
        rows = pending(version)
        c.executemany(MOVE, [(n, m, m, v, w) for w, n, m, v in rows])
        events(rows)
        c.execute("COMMIT")

    def per_pair(version: int) -> None:
        transaction(version, lambda rows: c.executemany(
            EVENT, [(w, v, "session_awareness:Watch.Acknowledged", STATE) for w, _, _, v in rows]
        ))  # fmt: skip

    def one_event(version: int) -> None:
        transaction(version, lambda rows: c.execute(
            EVENT, ("f" * 32, version, "session_awareness:Drains.Drained", STATE * (len(rows) // 4))
        ))  # fmt: skip

    def reference(version: int) -> None:
        transaction(version, lambda rows: None)

    return {"per-pair events": per_pair, "one event per drain": one_event, "reference": reference}


def measure(path: Path) -> dict[str, float]:
    c = setup(path)
    shapes = drains(c)
    times: dict[str, list[float]] = {name: [] for name in shapes}
    version = 1
    for _ in range(ROUNDS):
        for name, drain in shapes.items():
            c.execute("UPDATE session_watch_cursors SET notified = acknowledged + 1, "
                      "material = acknowledged + 1")  # fmt: skip
            version += 1
            started = time.perf_counter()
            drain(version)
            times[name].append((time.perf_counter() - started) / PAIRS * 1e6)
    c.close()
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="sa-drain-floor-") as work:
        per_pair = measure(Path(work) / "floor.db")
    reference = per_pair["reference"]
    print(f"drain of {PAIRS:,} pending pairs, SQLite, per pair (median of {ROUNDS} rounds):")
    for name, micros in per_pair.items():
        print(f"  {name:22} {micros:6.2f} µs  {micros / reference:5.2f}x the reference")


if __name__ == "__main__":
    main()
