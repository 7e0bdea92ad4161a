"""A kept signal outlives the process on a real PostgreSQL outage: the server stops, signals
are kept and spooled, the service closes (or its process is killed), and after the server
is back a new service records every one exactly once, in order (R-L10, issue 38)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator

import pytest
from structlog.testing import capture_logs

from session_awareness.application import SessionAwareness, open_service
from session_awareness.testing.pgcluster import PostgresCluster
from tests.conftest import wait_until
from tests.contract.helpers import CHILD, MANAGER, notice, spawn
from tests.postgres.conftest import Worker

#: Generous on purpose: this bounds a hang, it does not measure speed.
NO_HANG = 30.0
GOALS = ["goal created", "goal updated", "goal cleared"]
CONNECT_TIMEOUT = 1


@pytest.fixture
def own_cluster() -> Iterator[PostgresCluster]:
    """A cluster of its own: these tests stop and restart it."""
    with PostgresCluster() as cluster:
        yield cluster


def recorded_once(svc: SessionAwareness) -> None:
    """The store's own reads: the three kept goals follow the spawn, once each, in order."""
    assert svc.session_status(CHILD)["stateVersion"] == 4
    events = svc.session_status(CHILD, changes_since=1)["stateChanges"]["events"]
    assert [(e["sequence"], e["summary"]) for e in events] == [
        (2, GOALS[0]),
        (3, GOALS[1]),
        (4, GOALS[2]),
    ]
    signals = [entry for entry in svc.history(CHILD) if entry["event"] == "signal"]
    assert [(entry["sequence"], entry["summary"]) for entry in signals[1:]] == [
        (2, GOALS[0]),
        (3, GOALS[1]),
        (4, GOALS[2]),
    ]
    assert svc.pending_notices(MANAGER) == [notice(CHILD, 1)]


class TestSpoolAcrossProcesses:
    def test_signals_kept_when_the_server_stopped_outlive_close(
        self, own_cluster: PostgresCluster
    ) -> None:
        """R-L10: with the server stopped, three signals are kept and spooled; close() is
        bounded (at most a second beyond the connect timeout), leaves them in the spool
        and says so at WARNING; a new service records each once after the server returns."""
        url = f"{own_cluster.url}?schema=spool_close&connect_timeout={CONNECT_TIMEOUT}"
        first = open_service(url)
        spawn(first)
        own_cluster.stop(mode="immediate")
        for summary in GOALS:
            assert first.record_goal_changed(CHILD, summary=summary) is None
        health = first.health()
        assert health["signals"]["buffered"] == 3
        assert health["spool"]["signals"] == 3
        with capture_logs() as logs:
            started = time.monotonic()
            first.close()
            assert time.monotonic() - started <= CONNECT_TIMEOUT + 1
        left = [(e["log_level"], e["count"]) for e in logs if e["event"] == "signal_spool_left"]
        assert left == [("warning", 3)]

        own_cluster.start()
        with open_service(url) as second:
            assert wait_until(second.flush_signals, timeout=NO_HANG)
            recorded_once(second)
            assert second.health()["spool"]["signals"] == 0
        with open_service(url) as third:  # nothing is left to record again
            assert third.flush_signals()
            assert third.health()["signals"]["kept"] == 0
            assert third.session_status(CHILD)["stateVersion"] == 4

    def test_signals_kept_by_a_killed_process_are_recorded_once_by_the_next(
        self, own_cluster: PostgresCluster, workers: Callable[..., Worker]
    ) -> None:
        """R-L10: a host process keeps three signals while the server is stopped and is
        killed (SIGKILL: no close, no flush); after the server returns, a new process's
        service records each once, in order."""
        url = f"{own_cluster.url}?schema=spool_kill&connect_timeout={CONNECT_TIMEOUT}"
        with open_service(url) as setup:
            spawn(setup)
        host = workers("keep", url, CHILD)
        host.read(lambda m: m.get("ready") is True)
        own_cluster.stop(mode="immediate")
        assert host.process.stdin is not None
        host.process.stdin.write("record\n")
        host.process.stdin.flush()
        kept = host.read(lambda m: "kept" in m)
        assert kept["results"] == [None, None, None]
        assert kept["kept"] == 3
        assert kept["spool"]["signals"] == 3
        host.process.send_signal(signal.SIGKILL)
        host.process.wait(NO_HANG)

        own_cluster.start()
        with open_service(url) as after:
            assert wait_until(after.flush_signals, timeout=NO_HANG)
            recorded_once(after)
            assert after.health()["signals"]["flushed"] == 3
            assert after.health()["spool"]["signals"] == 0
