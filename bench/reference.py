"""The reference system's data path (OpenClaw v1's session state awareness), replayed through
the same driver as ours: `sqlite3` on SQLite, psycopg 3 on PostgreSQL.

Sources. The reference documents its storage in `/work/shared/seeds/session-state.en.md`:
the signal log `session_state_events` ("appends a typed event to the shared state database"),
a "durable per-session head that survives pruning" (`stateVersion`, the highest sequence in a
session's log; the pruned watermark behind `historyGap`), and cursors
`session_watch_cursors` ("a session that holds a cursor on a target": one row per (watcher,
target), with its frozen notified position and its material watermark). A session's sequence
numbers are the log's global AUTOINCREMENT ids (a "highest sequence number in its log", with
gaps). The transaction shapes are the reference's v1 SQLite ones: one transaction per signal
that probes the target's cursors, inserts the event row, upserts the head and updates each
cursor ("Notices: one, not many"); a drain that is one `UPDATE` per pair ("Acknowledge on
drain"); `changesSince` the head and an indexed page `SELECT` (up to 200 events,
"Reconciling"). The column names below are
ours where the documents give none.

Nothing here is the product: it is the yardstick `bench/s_reference.py` measures us against.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

import psycopg

#: "up to 200" events per `changesSince` page (session-state.en.md, "Reconciling").
PAGE_LIMIT = 200

#: The schema: a global sequence for events, heads keyed by session, cursors keyed by
#: (watcher, target) with an index by target for the record's probe. `{seq}` is the
#: backend's auto-increment column.
DDL = (
    # session-state.en.md, "The signal log": the typed event, metadata and a one-line summary.
    "CREATE TABLE session_state_events (seq {seq}, session_key TEXT NOT NULL, "
    "kind TEXT NOT NULL, actor_type TEXT NOT NULL, summary TEXT NOT NULL, payload TEXT, "
    "created_at BIGINT NOT NULL)",
    "CREATE INDEX session_state_events_session ON session_state_events (session_key, seq)",
    # "a durable per-session head that survives pruning" and "a per-session pruned watermark".
    "CREATE TABLE session_state_heads (session_key TEXT PRIMARY KEY, state_version BIGINT "
    "NOT NULL, pruned_seq BIGINT NOT NULL DEFAULT 0, updated_at BIGINT NOT NULL)",
    # "Watchers": per-target cursors; "Frozen watermark": notified and material positions.
    "CREATE TABLE session_watch_cursors (watcher_key TEXT NOT NULL, target_key TEXT NOT NULL, "
    "acknowledged BIGINT NOT NULL, notified BIGINT NOT NULL, material BIGINT NOT NULL, "
    "updated_at BIGINT NOT NULL, PRIMARY KEY (watcher_key, target_key))",
    "CREATE INDEX session_watch_cursors_target ON session_watch_cursors (target_key)",
)
SEQ = {
    "sqlite": "INTEGER PRIMARY KEY AUTOINCREMENT",
    "postgresql": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
}

# -- record: one transaction per signal (probe, insert, upsert the head, update each cursor) --
PROBE = "SELECT watcher_key, acknowledged, notified FROM session_watch_cursors WHERE target_key = ?"
INSERT_EVENT = (
    "INSERT INTO session_state_events (session_key, kind, actor_type, summary, payload, "
    "created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING seq"
)
UPSERT_HEAD = (
    "INSERT INTO session_state_heads (session_key, state_version, updated_at) VALUES (?, ?, ?) "
    "ON CONFLICT (session_key) DO UPDATE SET state_version = excluded.state_version, "
    "updated_at = excluded.updated_at"
)
# "Frozen watermark": a pending cursor moves its material watermark only ...
ADVANCE_MATERIAL = (
    "UPDATE session_watch_cursors SET material = ?, updated_at = ? "
    "WHERE watcher_key = ? AND target_key = ?"
)
# ... a synced one queues a notice: notified (frozen) and material move to the new sequence.
OPEN_NOTICE = (
    "UPDATE session_watch_cursors SET notified = ?, material = ?, updated_at = ? "
    "WHERE watcher_key = ? AND target_key = ?"
)
SEED_CURSOR = (
    "INSERT INTO session_watch_cursors VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (watcher_key, target_key) DO NOTHING"
)

# -- drain: "Acknowledge on drain, reopen only for interleaved work": one UPDATE per pair ----
PENDING = (
    "SELECT target_key, notified, material FROM session_watch_cursors "
    "WHERE watcher_key = ? AND notified > acknowledged"
)
ACKNOWLEDGE = (
    "UPDATE session_watch_cursors SET acknowledged = ?, notified = ?, updated_at = ? "
    "WHERE watcher_key = ? AND target_key = ?"
)

# -- changesSince: the head, then the indexed page (session-state.en.md, "Reconciling") ------
HEAD = "SELECT state_version, pruned_seq FROM session_state_heads WHERE session_key = ?"
PAGE = (
    "SELECT seq, kind, actor_type, summary, payload FROM session_state_events "
    "WHERE session_key = ? AND seq > ? ORDER BY seq LIMIT ?"
)

KIND, ACTOR, SUMMARY = "human_direct_message", "human", "human message via bench"
PAYLOAD = json.dumps({"channel": "bench"}, separators=(",", ":"))


def now_ms() -> int:
    return int(time.time() * 1000)


class Reference:
    """One connection to the reference's tables. `target` is a SQLite path or a PostgreSQL
    URL; each thread of a multi-writer round opens its own."""

    def __init__(self, backend: str, target: str) -> None:
        self.backend = backend
        self._lite: sqlite3.Connection | None = None
        self._pg: psycopg.Connection[Any] | None = None
        if backend == "sqlite":
            # Autocommit mode, WAL, FULL sync (the default): as `raw.RawStore`, as ours.
            self._lite = sqlite3.connect(
                target, isolation_level=None, check_same_thread=False, timeout=60,
                cached_statements=64,
            )  # fmt: skip
            self._lite.execute("PRAGMA journal_mode=WAL")
        else:
            self._pg = psycopg.connect(target, autocommit=True)

    def _sql(self, text: str) -> str:
        return text if self._lite is not None else text.replace("?", "%s")

    def create(self) -> None:
        for statement in DDL:
            self._run(statement.replace("{seq}", SEQ[self.backend]))

    def _run(self, text: str, params: tuple[Any, ...] = ()) -> None:
        if self._lite is not None:
            self._lite.execute(text, params)
        else:
            self._pg_conn.execute(self._sql(text), params)

    @property
    def _pg_conn(self) -> psycopg.Connection[Any]:
        if self._pg is None:
            raise TypeError("not a PostgreSQL store")
        return self._pg

    # -- set-up ----------------------------------------------------------------------------

    def watch(self, watcher: str, target: str, at: int = 0) -> None:
        """A cursor registered at `at` (spawn seeding or `watch: true`, "Watchers")."""
        self._run(SEED_CURSOR, (watcher, target, at, at, at, now_ms()))

    def fill(self, rows: list[tuple[str, int]]) -> None:
        """Set-up: (session key, count) events per session, and their heads, in one go."""
        events = [(key, KIND, ACTOR, SUMMARY, PAYLOAD, now_ms())
                  for key, count in rows for _ in range(count)]  # fmt: skip
        insert = INSERT_EVENT.removesuffix(" RETURNING seq")
        heads = (
            "INSERT INTO session_state_heads (session_key, state_version, updated_at) "
            "SELECT session_key, MAX(seq), 0 FROM session_state_events GROUP BY session_key"
        )
        if self._lite is not None:
            self._lite.execute("BEGIN")
            self._lite.executemany(insert, events)
            self._lite.execute(heads)
            self._lite.execute("COMMIT")
            return
        with self._pg_conn.transaction(), self._pg_conn.cursor() as cur:
            cur.executemany(self._sql(insert), events)
            cur.execute(heads)

    # -- the measured operations -----------------------------------------------------------

    def record(self, session_key: str, actor_key: str | None = None) -> int:
        """One notify-eligible signal in one transaction: probe the target's cursors, insert
        the event, upsert the head, update each cursor (the actor's own is skipped:
        "Self-suppression"). Its sequence."""
        at = now_ms()
        if self._lite is not None:
            c = self._lite
            # IMMEDIATE: the probe reads before the writes; a deferred transaction would lose
            # its snapshot to a concurrent writer (SQLITE_BUSY) instead of waiting its turn.
            c.execute("BEGIN IMMEDIATE")
            try:
                cursors = c.execute(PROBE, (session_key,)).fetchall()
                seq = c.execute(
                    INSERT_EVENT, (session_key, KIND, ACTOR, SUMMARY, PAYLOAD, at)
                ).fetchone()[0]
                c.execute(UPSERT_HEAD, (session_key, seq, at))
                for watcher, acknowledged, notified in cursors:
                    if watcher == actor_key:
                        continue
                    if notified > acknowledged:
                        c.execute(ADVANCE_MATERIAL, (seq, at, watcher, session_key))
                    else:
                        c.execute(OPEN_NOTICE, (seq, seq, at, watcher, session_key))
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
            return int(seq)
        pg = self._pg_conn
        with pg.transaction(), pg.cursor() as cur:
            cur.execute(self._sql(PROBE), (session_key,), prepare=True)
            cursors = cur.fetchall()
            cur.execute(
                self._sql(INSERT_EVENT), (session_key, KIND, ACTOR, SUMMARY, PAYLOAD, at),
                prepare=True,
            )  # fmt: skip
            row = cur.fetchone()
            if row is None:
                raise RuntimeError("the insert returned no sequence")
            seq = row[0]
            cur.execute(self._sql(UPSERT_HEAD), (session_key, seq, at), prepare=True)
            for watcher, acknowledged, notified in cursors:
                if watcher == actor_key:
                    continue
                if notified > acknowledged:
                    cur.execute(
                        self._sql(ADVANCE_MATERIAL), (seq, at, watcher, session_key), prepare=True
                    )
                else:
                    cur.execute(
                        self._sql(OPEN_NOTICE), (seq, seq, at, watcher, session_key), prepare=True
                    )
        return int(seq)

    def drain(self, watcher: str) -> int:
        """Acknowledge every pending notice of `watcher` in one transaction, one `UPDATE` per
        pair (L = N, and N = M: a remainder reopens one notice); the pairs drained."""
        at = now_ms()
        if self._lite is not None:
            c = self._lite
            c.execute("BEGIN IMMEDIATE")
            try:
                pending = c.execute(PENDING, (watcher,)).fetchall()
                c.executemany(ACKNOWLEDGE, [(n, m, at, watcher, t) for t, n, m in pending])
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
            return len(pending)
        pg = self._pg_conn
        with pg.transaction(), pg.cursor() as cur:
            cur.execute(self._sql(PENDING), (watcher,), prepare=True)
            pending = cur.fetchall()
            cur.executemany(self._sql(ACKNOWLEDGE), [(n, m, at, watcher, t) for t, n, m in pending])
        return len(pending)

    def changes_since(self, session_key: str, since: int) -> dict[str, Any]:
        """`session_status` with `changesSince`: the head, then the page, shaped as the
        reference answers (stateVersion, events with their fields, historyGap)."""
        if self._lite is not None:
            head = self._lite.execute(HEAD, (session_key,)).fetchone()
            rows = self._lite.execute(PAGE, (session_key, since, PAGE_LIMIT)).fetchall()
        else:
            pg = self._pg_conn
            head = pg.execute(self._sql(HEAD), (session_key,), prepare=True).fetchone()
            rows = pg.execute(
                self._sql(PAGE), (session_key, since, PAGE_LIMIT), prepare=True
            ).fetchall()
        version, pruned = head if head is not None else (0, 0)
        events = [
            {"sequence": seq, "kind": kind, "actorType": actor, "summary": summary,
             "payload": json.loads(payload) if payload else None}
            for seq, kind, actor, summary, payload in rows
        ]  # fmt: skip
        return {
            "stateVersion": version,
            "stateChanges": {"events": events, "historyGap": since < pruned},
        }

    def close(self) -> None:
        if self._lite is not None:
            self._lite.close()
        if self._pg is not None:
            self._pg.close()
