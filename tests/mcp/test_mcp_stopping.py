"""The MCP server stops when told to, with stdin still open, and closes its store (R-M2): Claude
Code sends SIGINT at every session end and waits for the process."""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path

import psycopg
import pytest

from session_awareness.application import open_service
from session_awareness.testing import wait_until
from session_awareness.testing.pgcluster import PostgresCluster
from tests.mcp.helpers import RawServer

LEAD = "agent:main:main"
#: How long the server may take to leave once signalled.
WITHIN = 1.0
#: The server's own connections, told from every other by the `application_name` its URL
#: gives: a count before and after would also see the backends of connections closed just
#: before it started, which leave `pg_stat_activity` a moment after their client has gone.
CONNECTIONS = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND backend_type = 'client backend' AND application_name = %s"
)


def stop(server: RawServer, number: signal.Signals) -> float:
    """Signal the server (stdin left open) and the seconds until it has exited with 0."""
    started = time.monotonic()
    server.process.send_signal(number)
    code = server.process.wait(timeout=30)
    took = time.monotonic() - started
    assert code == 0, server.stderr()
    return took


def serving(url: str, tmp_path: Path) -> RawServer:
    """A server that has answered a call which read the store."""
    server = RawServer(url, tmp_path, "--caller", LEAD, "--verbose", "--log-format", "json")
    server.initialize()
    server.send(
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call",'
        b' "params": {"name": "session_status", "arguments": {}}}'
    )
    assert server.answer()["id"] == 1
    return server


def stopped(server: RawServer) -> list[str]:
    """The reasons the server's `mcp_server_stopped` events give."""
    return [e["reason"] for e in server.events() if e["event"] == "mcp_server_stopped"]


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
class TestSignals:
    def test_on_sqlite_the_server_leaves_within_a_second_and_checkpoints_its_store(
        self, number: signal.Signals, tmp_path: Path
    ) -> None:
        """R-M2: signalled with stdin open, the server exits 0 within a second, having closed
        the store: the last connection's close checkpoints the WAL and removes its file (a
        killed process leaves it behind)."""
        db = tmp_path / "s.db"
        with open_service(f"sqlite:///{db}") as svc:
            svc.open_session(LEAD)
        with serving(f"sqlite:///{db}", tmp_path) as server:
            assert db.with_name("s.db-wal").exists()
            assert stop(server, number) < WITHIN
        assert stopped(server) == [number.name]
        assert not db.with_name("s.db-wal").exists()

    def test_on_postgresql_the_server_leaves_within_a_second_and_closes_its_connections(
        self, number: signal.Signals, postgres: PostgresCluster, tmp_path: Path
    ) -> None:
        """R-M2: signalled with stdin open, the server exits 0 within a second, and every
        connection it held (its pool and its wake listener) is gone."""
        name = f"stop_{uuid.uuid4().hex[:12]}"
        url = f"{postgres.url}?schema={name}"
        with open_service(url) as svc:
            svc.open_session(LEAD)
        with psycopg.connect(postgres.url, autocommit=True) as probe:

            def connections() -> int:
                row = probe.execute(CONNECTIONS, (name,)).fetchone()
                assert row is not None
                return int(row[0])

            with serving(f"{url}&application_name={name}", tmp_path) as server:
                assert connections() >= 2, "its pool and its wake listener"
                assert stop(server, number) < WITHIN
            assert stopped(server) == [number.name]
            assert wait_until(lambda: connections() == 0, timeout=10)
