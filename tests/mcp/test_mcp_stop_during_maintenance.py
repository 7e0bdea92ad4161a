"""The MCP server stops within a second even while its start-up maintenance is held in a
statement (R-M2): the close ends the batch rather than wait for it."""

from __future__ import annotations

import signal
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.sql import SQL, Identifier

from session_awareness.application import open_service
from session_awareness.testing import FakeClock, wait_until
from session_awareness.testing.pgcluster import PostgresCluster
from tests.contract.helpers import sequences
from tests.mcp.helpers import RawServer
from tests.mcp.test_mcp_stopping import WITHIN, serving, stop, stopped

KEYS = [f"agent:main:subagent:c{n}" for n in range(3)]
#: How long the test waits for what the server does (a deadline, not a pause).
DEADLINE = 30.0


def seed(url: str) -> str:
    """Three sessions whose rows are 40 days old: the server's start-up prune removes them.
    The name of the store's events table."""
    clock = FakeClock(datetime.now(UTC) - timedelta(days=40))
    with open_service(url, clock=clock, maintenance="manual") as svc:
        for key in KEYS:
            svc.open_session(key)
            svc.record_goal_changed(key, summary="goal created")
        recorder: Any = svc.store.recorder
        return str(recorder.events_table_name)


def pruned_after_restart(url: str) -> bool:
    """The store as the interrupted server left it is clean and unpruned; a start prunes it."""
    with open_service(url, maintenance="manual") as svc:
        assert svc.audit().clean
        assert all(sequences(svc, key) == [1] for key in KEYS)  # nothing half-written
        svc.maintain()
        assert svc.audit().clean
        return all(sequences(svc, key) == [] for key in KEYS)


def interrupted(server: RawServer) -> list[str]:
    return [e["task"] for e in server.events() if e["event"] == "maintenance_interrupted"]


def verified(server: RawServer) -> bool:
    """Whether the maintenance's first batch (the read models' check) is done: its prune,
    next, is under way."""
    return any(
        e["event"] == "maintenance_done" and e.get("task") == "verify" for e in server.events()
    )


class TestStopDuringMaintenance:
    def test_on_sqlite_a_sigterm_while_a_batch_waits_for_the_write_lock_exits_at_once(
        self, tmp_path: Path
    ) -> None:
        """R-M2: with another process holding the store's write lock, the server's start-up
        prune waits for it; SIGTERM still ends the server within a second (exit 0,
        `mcp_server_stopped`) while the lock is held, the batch logged
        `maintenance_interrupted` and rolled back; the next start prunes."""
        db = tmp_path / "s.db"
        url = f"sqlite:///{db}"
        seed(url)
        blocker = sqlite3.connect(db, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with serving(url, tmp_path) as server:
                assert wait_until(lambda: verified(server), DEADLINE)
                assert stop(server, signal.SIGTERM) < WITHIN
                assert blocker.in_transaction
        finally:
            blocker.rollback()
            blocker.close()
        assert stopped(server) == ["SIGTERM"]
        assert interrupted(server) == ["prune"]
        assert pruned_after_restart(url)

    def test_on_postgresql_a_sigterm_while_a_batch_waits_for_a_lock_exits_at_once(
        self, postgres: PostgresCluster, tmp_path: Path
    ) -> None:
        """R-M2: with another session holding the events table, the server's start-up prune
        waits for its lock (a minute's deadline); SIGTERM still ends the server within a
        second (exit 0, `mcp_server_stopped`) while the lock is held: the batch's statement
        is cancelled and rolled back (`maintenance_interrupted`); the next start prunes."""
        schema = f"stop_{uuid.uuid4().hex[:12]}"
        url = f"{postgres.url}?schema={schema}&connect_timeout=60"
        table = Identifier(schema, seed(url))
        with (
            psycopg.connect(postgres.url) as blocker,
            psycopg.connect(postgres.url, autocommit=True) as probe,
        ):
            blocker.execute(SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(table))

            def waiting() -> int:
                row = probe.execute(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = %s::regclass",
                    (table.as_string(probe),),
                ).fetchone()
                assert row is not None
                return int(row[0])

            with serving(url, tmp_path) as server:
                assert wait_until(lambda: waiting() == 1, DEADLINE)
                assert stop(server, signal.SIGTERM) < WITHIN
                assert blocker.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
            blocker.rollback()
        assert stopped(server) == ["SIGTERM"]
        assert interrupted(server) == ["prune"]
        assert pruned_after_restart(url)
