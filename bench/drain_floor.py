"""`python -m bench.drain_floor`: the floor of a drain's work, with as little Python as it can have.

Each shape runs through the plain driver on SQLite (the service's read-model tables, the
library's event table) in one transaction a round, alternating round by round, and is printed
per pair and as a ratio to the drain benchmark's own baseline (`bench/s_drain.py`: the pending
rows read and one `UPDATE` a pair on a bare cursor table, `bench/raw.py`), the baseline of
issue 39's target (≤ 2):

- the shapes before and after ADR 024 (a drain of 1,000 pending pairs stored one
  `Watch.Acknowledged` event a pair, now one event for the drain): the same `UPDATE`s on the
  service's cursor table, with each design's events, and with none;
- the least any design of a drain with its event can do: the drain's own pending read (the
  target's M joined, `reads._PENDING_TO_DRAIN`, with the cursor's positions read from the row
  so that no aggregate is loaded), each pair decided and its notice's text made in a few
  lines of Python, the event's JSON, the event, the `UPDATE`s; and the same with the cursors'
  `updated_at` index dropped (it serves the expiry walk, R-W6, and every drain moves it).
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
from bench.raw import ACKNOWLEDGE as RAW_ACKNOWLEDGE
from bench.raw import CURSORS_DDL, CURSORS_INDEX
from bench.raw import PENDING as RAW_PENDING
from session_awareness.domain.positions import notice_text
from session_awareness.infrastructure.readmodel.reads import _PENDING_TO_DRAIN
from session_awareness.infrastructure.readmodel.sqlite_recorder import SQLITE

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
#: The drain's own pending read, with the positions a decision from the row needs.
PENDING_AS_DRAINED = SQLITE.render(_PENDING_TO_DRAIN).replace(
    "SELECT c.watch_id,", "SELECT c.watch_id, c.acknowledged, c.notified, c.material, c.target_key,"
)
MOVE = (
    "UPDATE session_watch_cursors SET acknowledged = ?, notified = ?, material = ?, "
    "updated_at = ? WHERE watch_id = ?"
)
EVENT = "INSERT INTO stored_events VALUES (?, ?, ?, ?)"
MAKE_PENDING = (
    "UPDATE session_watch_cursors SET notified = acknowledged + 1, material = acknowledged + 1",
    "UPDATE raw_cursors SET notified = acknowledged + 1, material = acknowledged + 1",
)


def setup(path: Path) -> sqlite3.Connection:
    c = sqlite_store(path)
    c.executemany(
        "INSERT INTO session_watch_cursors VALUES (?, ?, ?, ?, 1, 1, 1, NULL, 0)",
        [(f"{n:032x}", WATCHER, f"{n:032x}", f"agent:main:subagent:t{n}") for n in range(PAIRS)],
    )
    c.executemany(
        "INSERT INTO session_material (session_id) VALUES (?)",
        [(f"{n:032x}",) for n in range(PAIRS)],
    )
    c.execute(CURSORS_DDL)
    c.execute(CURSORS_INDEX)
    c.executemany(
        "INSERT INTO raw_cursors VALUES (?, ?, ?, 1, 1, 1, 0)",
        [(f"w{n:06d}", WATCHER, f"agent:main:subagent:t{n}") for n in range(PAIRS)],
    )
    return c


def drains(c: sqlite3.Connection) -> dict[str, Callable[[int], None]]:
    def pending(version: int) -> list[tuple[str, int, int, int]]:
        # Each round makes every pair pending first (untimed): N and M one ahead of L.
        return [(w, n, m, version) for w, n, m in c.execute(PENDING, (WATCHER,)).fetchall()]

    def transaction(
        version: int, events: Callable[[list[tuple[str, int, int, int]]], object]
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

    def no_event(version: int) -> None:
        transaction(version, lambda rows: None)

    def decided_from_rows(version: int) -> None:
        c.execute("BEGIN IMMEDIATE")
        entries, texts = [], []
        rows = c.execute(PENDING_AS_DRAINED, (WATCHER,))
        for wid, acknowledged, notified, material, key, held in rows:
            moved = material if material > held else held
            entries.append([wid, version, notified, moved, moved])
            texts.append(notice_text(key, acknowledged))
        state = json.dumps({"entries": entries}, separators=(",", ":")).encode()
        c.execute(EVENT, ("f" * 32, version, "session_awareness:Drains.Drained", state))
        c.executemany(MOVE, [(e[2], e[3], e[4], version, e[0]) for e in entries])
        c.execute("COMMIT")

    def baseline(version: int) -> None:
        c.execute("BEGIN")
        rows = c.execute(RAW_PENDING, (WATCHER,)).fetchall()
        c.executemany(RAW_ACKNOWLEDGE, [(n, m, version, w) for w, n, m in rows])
        c.execute("COMMIT")

    return {
        "per-pair events": per_pair,
        "one event per drain": one_event,
        "no event": no_event,
        "decided from the rows": decided_from_rows,
        "the drain bench's baseline": baseline,
    }


def measure(c: sqlite3.Connection, version: int) -> dict[str, float]:
    """Each shape's median per pair; the events stored from `version` + 1 on."""
    shapes = drains(c)
    times: dict[str, list[float]] = {name: [] for name in shapes}
    for _ in range(ROUNDS):
        for name, drain in shapes.items():
            for statement in MAKE_PENDING:
                c.execute(statement)
            version += 1
            started = time.perf_counter()
            drain(version)
            times[name].append((time.perf_counter() - started) / PAIRS * 1e6)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="sa-drain-floor-") as work:
        c = setup(Path(work) / "floor.db")
        per_pair = measure(c, 0)
        c.execute("DROP INDEX session_watch_cursors_updated")
        unindexed = measure(c, ROUNDS * 10)
        c.close()
    baseline = per_pair["the drain bench's baseline"]
    print(f"drain of {PAIRS:,} pending pairs, SQLite, per pair (median of {ROUNDS} rounds),")
    print("against the drain benchmark's baseline (a plain read and UPDATE, target ≤ 2):")
    for name, micros in per_pair.items():
        print(f"  {name:28} {micros:6.2f} µs  {micros / baseline:5.2f}x")
    print("the cursors' updated_at index dropped:")
    for name in ("no event", "decided from the rows"):
        micros = unindexed[name]
        ratio = micros / unindexed["the drain bench's baseline"]
        print(f"  {name:28} {micros:6.2f} µs  {ratio:5.2f}x")


if __name__ == "__main__":
    main()
