"""The baselines: the plain driver (sqlite3 in WAL mode, or psycopg 3) doing the minimum
equivalent work on tables shaped like our read-model rows, at default durability."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import psycopg

CHANGES_DDL = (
    "CREATE TABLE raw_changes (key TEXT NOT NULL, sequence BIGINT NOT NULL, kind TEXT NOT NULL, "
    "actor TEXT NOT NULL, summary TEXT NOT NULL, payload TEXT, time BIGINT NOT NULL, "
    "PRIMARY KEY (key, sequence))"
)
CURSORS_DDL = (
    "CREATE TABLE raw_cursors (watch_id TEXT PRIMARY KEY, watcher_key TEXT NOT NULL, "
    "target_key TEXT NOT NULL, acknowledged BIGINT NOT NULL, notified BIGINT NOT NULL, "
    "material BIGINT NOT NULL, updated_at BIGINT NOT NULL)"
)
CURSORS_INDEX = "CREATE INDEX raw_cursors_watcher ON raw_cursors (watcher_key)"
INSERT = "INSERT INTO raw_changes VALUES (?, ?, ?, ?, ?, ?, ?)"
PAGE = (
    "SELECT sequence, kind, actor, summary, payload, time FROM raw_changes "
    "WHERE key = ? AND sequence > ? ORDER BY sequence LIMIT ?"
)
PENDING = (
    "SELECT watch_id, notified, material FROM raw_cursors "
    "WHERE watcher_key = ? AND notified > acknowledged"
)
ACKNOWLEDGE = (
    "UPDATE raw_cursors SET acknowledged = ?, notified = ?, updated_at = ? WHERE watch_id = ?"
)
PAYLOAD = json.dumps({"channel": "bench"}, separators=(",", ":"))


def now_ms() -> int:
    return int(time.time() * 1000)


def change_row(key: str, sequence: int) -> tuple[Any, ...]:
    return (key, sequence, "human_direct_message", "human", "human message via bench",
            PAYLOAD, now_ms())  # fmt: skip


class RawStore:
    """One connection of the plain driver. `target` is a SQLite path or a PostgreSQL URL."""

    def __init__(self, backend: str, target: str) -> None:
        self.backend = backend
        self._lite: sqlite3.Connection | None = None
        self._pg: psycopg.Connection[Any] | None = None
        if backend == "sqlite":
            self._lite = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
            self._lite.execute("PRAGMA journal_mode=WAL")
        else:
            # Autocommit: a read is one statement; a write is BEGIN, its statements, COMMIT.
            self._pg = psycopg.connect(target, autocommit=True)

    @property
    def pg(self) -> psycopg.Connection[Any]:
        if self._pg is None:
            raise TypeError("not a PostgreSQL store")
        return self._pg

    def sql(self, text: str) -> str:
        return text if self._lite is not None else text.replace("?", "%s")

    def execute(self, text: str, params: Sequence[Any] = ()) -> list[Any]:
        """One statement in its own transaction (DDL, set-up)."""
        if self._lite is not None:
            return self._lite.execute(text, params).fetchall()
        with self.pg.cursor() as cur:
            cur.execute(self.sql(text), params)
            return cur.fetchall() if cur.description else []

    def create_changes(self) -> None:
        self.execute(CHANGES_DDL)

    def create_cursors(self) -> None:
        self.execute(CURSORS_DDL)
        self.execute(CURSORS_INDEX)

    # -- the measured operations -----------------------------------------------------------

    def insert_committed(self, row: Sequence[Any]) -> None:
        """One INSERT and its COMMIT."""
        if self._lite is not None:
            self._lite.execute("BEGIN")
            self._lite.execute(INSERT, row)
            self._lite.execute("COMMIT")
            return
        with self.pg.transaction():
            self.pg.execute(self.sql(INSERT), row, prepare=True)

    def insert_many(self, rows: Sequence[Sequence[Any]]) -> None:
        """Set-up: many rows in one transaction."""
        if self._lite is not None:
            self._lite.execute("BEGIN")
            self._lite.executemany(INSERT, rows)
            self._lite.execute("COMMIT")
            return
        with self.pg.transaction(), self.pg.cursor() as cur:
            cur.executemany(self.sql(INSERT), rows)

    def page(self, key: str, after: int, limit: int) -> list[Any]:
        """The indexed SELECT of one `changesSince` page."""
        if self._lite is not None:
            return self._lite.execute(PAGE, (key, after, limit)).fetchall()
        with self.pg.cursor() as cur:
            cur.execute(self.sql(PAGE), (key, after, limit), prepare=True)
            return cur.fetchall()

    def acknowledge_all(self, watcher: str) -> int:
        """Read the watcher's pending cursor rows and move each (L = N, N = M) in one
        transaction; the number of rows moved."""
        at = now_ms()
        if self._lite is not None:
            self._lite.execute("BEGIN")
            rows = self._lite.execute(PENDING, (watcher,)).fetchall()
            self._lite.executemany(ACKNOWLEDGE, [(n, m, at, w) for w, n, m in rows])
            self._lite.execute("COMMIT")
            return len(rows)
        with self.pg.transaction(), self.pg.cursor() as cur:
            cur.execute(self.sql(PENDING), (watcher,), prepare=True)
            rows = cur.fetchall()
            cur.executemany(self.sql(ACKNOWLEDGE), [(n, m, at, w) for w, n, m in rows])
        return len(rows)

    def close(self) -> None:
        if self._lite is not None:
            self._lite.close()
        if self._pg is not None:
            self._pg.close()


def read_and_decode(backend: str, target: str, table: str) -> int:
    """Stream every row of an event table in notification order and decode its JSON state;
    the number of rows. The raw rate an event-store replay is compared with."""
    count = 0
    loads = json.loads
    if backend == "sqlite":
        conn = sqlite3.connect(target)
        try:
            cur = conn.execute(
                f"SELECT rowid, originator_id, originator_version, topic, state "  # noqa: S608 -- a fixed table name
                f"FROM {table} ORDER BY rowid"
            )
            while batch := cur.fetchmany(2000):
                for row in batch:
                    loads(row[4])
                    count += 1
        finally:
            conn.close()
        return count
    with psycopg.connect(target) as pg, pg.cursor(name="raw_replay") as named:
        named.itersize = 2000
        named.execute(
            f"SELECT notification_id, originator_id, originator_version, topic, state "  # noqa: S608 -- a fixed table name
            f"FROM {table} ORDER BY notification_id"
        )
        for row in named:
            loads(row[4])
            count += 1
    return count
