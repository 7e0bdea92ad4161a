"""`python -m bench.floor`: the floor of a record's writes, with no Python around them.

The `record` scenario compares a record with one raw `INSERT` + `COMMIT`. A record writes
more than that, by design (ADR 002): on a target whose watcher's notice is pending, one
event (the signal; M is derived, ADR 023) and its read-model rows (retained row, head,
registry, material, activity), then the save's check that no cursor is synced below its
target's M, durably, in one transaction. This writes exactly those rows through the plain
driver, with the service's own statements (the projection's row changes rendered by
`infrastructure/readmodel/writes.py`; SQLite: one transaction; PostgreSQL: its two round
trips, ADR 013), against the raw insert, alternating round by round, and prints the best
throughput ratio a record can reach in this design: raw time / floor time.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg

from bench.raw import CHANGES_DDL, INSERT, PAYLOAD
from session_awareness.application import projection as p
from session_awareness.infrastructure.readmodel.bulk import behind_query
from session_awareness.infrastructure.readmodel.dialect import Dialect
from session_awareness.infrastructure.readmodel.pg_recorder import PostgresDialect
from session_awareness.infrastructure.readmodel.sqlite_recorder import SQLITE
from session_awareness.infrastructure.readmodel.tables import READ_MODEL_DDL
from session_awareness.infrastructure.readmodel.writes import WRITES

ROUNDS, PER_ROUND = 7, 300
STATE = json.dumps({"summary": "x" * 250}).encode()
SESSION = UUID(int=0xA)
SID = SESSION.hex


def sql(template: str, d: Dialect) -> str:
    return d.render(template)


def opening(d: Dialect) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements that open the session (registry, head, material and activity rows)."""
    opened = p.SessionOpened(SESSION, "main", "k", "subagent", None, None, 0)
    return [
        (sql(w.template, d), params) for w, _, params in WRITES[p.SessionOpened](d.bind_id, opened)
    ]


def record_statements(d: Dialect, n: int) -> list[tuple[str, tuple[Any, ...]]]:
    """A human turn's read-model statements on a session whose watcher is pending, as the
    service writes them, then the save's check (`bulk.behind_query`)."""
    changes: list[Any] = [
        p.SignalAppended(SESSION, 2 * n, n, "human_direct_message", "human", None, None, n,
                         "human message via bench", json.loads(PAYLOAD), n),  # and the touch
        p.MaterialMoved(SESSION, n, None, n),
        p.ChannelSeen(SESSION, "bench"),
    ]  # fmt: skip
    out = [
        (sql(w.template, d), params)
        for change in changes
        for w, _, params in WRITES[type(change)](d.bind_id, change)
    ]
    template, params = behind_query(d, [SESSION], [])
    return [*out, (sql(template, d), tuple(params))]


def rounds(floor: Callable[[int], None], raw: Callable[[int], None]) -> dict[str, float]:
    out: dict[str, list[float]] = {"floor": [], "raw": []}
    number = 0
    for _ in range(ROUNDS):
        for name, write in (("floor", floor), ("raw", raw)):
            started = time.perf_counter()
            for _ in range(PER_ROUND):
                number += 1
                write(number)
            out[name].append((time.perf_counter() - started) / PER_ROUND * 1e6)
    return {name: statistics.median(values) for name, values in out.items()}


def sqlite_store(path: Path) -> sqlite3.Connection:
    """A SQLite file with the library's event table and the service's read-model tables."""
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute(
        "CREATE TABLE stored_events (originator_id TEXT, originator_version INTEGER, "
        "topic TEXT, state BLOB, PRIMARY KEY (originator_id, originator_version))"
    )
    for ddl in READ_MODEL_DDL:
        c.execute(sql(ddl, SQLITE))
    return c


def sqlite_floor(path: Path) -> dict[str, float]:
    d = SQLITE
    c = sqlite_store(path)
    c.execute(CHANGES_DDL)
    for statement, params in opening(d):
        c.execute(statement, params)

    def floor(n: int) -> None:
        c.execute("BEGIN")
        c.execute(
            "INSERT INTO stored_events VALUES (?, ?, 'Session.HumanDirectMessage', ?)",
            (SID, n, STATE),
        )
        for statement, params in record_statements(d, n):
            c.execute(statement, params).fetchall()
        c.execute("COMMIT")

    def raw(n: int) -> None:
        c.execute("BEGIN")
        c.execute(
            INSERT, ("k", n, "human_direct_message", "human", "human message via bench", PAYLOAD, n)
        )
        c.execute("COMMIT")

    try:
        return rounds(floor, raw)
    finally:
        c.close()


def postgres_floor(url: str) -> dict[str, float]:
    conn = psycopg.connect(url, autocommit=True)
    conn.execute(
        "CREATE TABLE stored_events (notification_id bigserial UNIQUE, originator_id "
        "uuid, originator_version bigint, topic text, state bytea, "
        "PRIMARY KEY (originator_id, originator_version))"
    )
    d = PostgresDialect()
    for ddl in READ_MODEL_DDL:
        conn.execute(sql(ddl, d))
    conn.execute(sql(CHANGES_DDL, d))
    for statement, params in opening(d):
        conn.execute(statement, params)
    bind = psycopg.ClientCursor(conn).mogrify
    cur = conn.cursor()

    def floor(n: int) -> None:  # the service's two round trips (ADR 013)
        cur.execute(
            "BEGIN; SET LOCAL lock_timeout = '0s'; LOCK TABLE stored_events IN EXCLUSIVE MODE; "
            + bind(
                "INSERT INTO stored_events (originator_id, originator_version, topic, state) "
                "VALUES (%s, %s, 'Session.HumanDirectMessage', %s) RETURNING notification_id",
                (SESSION, n, STATE),
            )
        )
        while cur.nextset():
            pass
        cur.fetchall()
        rows = [bind(statement, params) for statement, params in record_statements(d, n)]
        cur.execute("; ".join([*rows, "COMMIT"]))

    def raw(n: int) -> None:
        with conn.transaction():
            conn.execute(
                sql(INSERT, d),
                ("k", n, "human_direct_message", "human", "human message via bench", PAYLOAD, n),
                prepare=True,
            )

    try:
        return rounds(floor, raw)
    finally:
        conn.close()


def report(backend: str, medians: dict[str, float]) -> None:
    floor, raw = medians["floor"], medians["raw"]
    print(
        f"{backend}: the record's writes {floor:.0f} us, the raw insert {raw:.0f} us; "
        f"best record throughput ratio {raw / floor:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"))
    args = parser.parse_args()
    if args.backend in (None, "sqlite"):
        with tempfile.TemporaryDirectory() as directory:
            report("sqlite", sqlite_floor(Path(directory) / "floor.db"))
    if args.backend in (None, "postgresql"):
        from session_awareness.testing.pgcluster import PostgresCluster  # noqa: PLC0415 -- only when measured

        with PostgresCluster() as cluster:
            report("postgresql", postgres_floor(cluster.url))


if __name__ == "__main__":
    main()
