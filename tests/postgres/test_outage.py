"""The database goes away and comes back (issue 3, R-L8)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from structlog.testing import capture_logs

from session_awareness.application import StoreUnavailableError, open_service
from session_awareness.application.recording import FLUSHER_JOIN
from session_awareness.testing.pgcluster import PostgresCluster
from tests.conftest import RecordingWaker, wait_until
from tests.contract.helpers import CHILD, MANAGER, notice, spawn

#: Generous on purpose: this bounds a hang, it does not measure speed.
NO_HANG = 20.0


@pytest.fixture
def own_cluster() -> Iterator[PostgresCluster]:
    """A cluster of its own: this test stops and restarts it."""
    with PostgresCluster() as cluster:
        yield cluster


class TestOutage:
    def test_signals_recorded_during_an_outage_are_kept_and_flushed_in_order(
        self, own_cluster: PostgresCluster
    ) -> None:
        """R-L8: with the database stopped, producers return None promptly and log
        signal_record_failed; the signals are kept and recorded in order once it is back;
        queries raise a typed error meanwhile; the counts are exposed by health()."""
        waker = RecordingWaker()
        url = own_cluster.url + "?schema=outage&connect_timeout=1"
        with open_service(url, waker=waker) as svc:
            spawn(svc)
            own_cluster.stop(mode="immediate")

            with capture_logs() as logs:
                started = time.monotonic()
                assert svc.record_human_direct_message(CHILD, channel="telegram") is None
                assert svc.record_goal_changed(CHILD, summary="goal updated") is None
                assert time.monotonic() - started < NO_HANG
            failures = [e for e in logs if e["event"] == "signal_record_failed"]
            assert [(e["session_key"], e["kind"]) for e in failures] == [
                (CHILD, "human_direct_message"),
                (CHILD, "goal_changed"),
            ]
            with pytest.raises(StoreUnavailableError, match=r"^session store unavailable: "):
                svc.session_status(CHILD, changes_since=0)
            health = svc.health()
            assert health["signals"]["buffered"] == 2
            assert health["store"].startswith("session store unavailable")

            own_cluster.start()
            assert wait_until(svc.flush_signals, timeout=NO_HANG)
            events = svc.session_status(CHILD, changes_since=1)["stateChanges"]["events"]
            assert [(e["sequence"], e["kind"]) for e in events] == [
                (2, "human_direct_message"),
                (3, "goal_changed"),
            ]
            assert svc.pending_notices(MANAGER) == [notice(CHILD, 1)]
            signals = svc.health()["signals"]
            assert (signals["buffered"], signals["flushed"], signals["dropped"]) == (0, 2, 0)
            assert svc.health()["store"] == "ok"

    def test_closing_with_kept_signals_ends_the_flusher_at_once(
        self, own_cluster: PostgresCluster
    ) -> None:
        """R-L8, ADR 010: close() ends the backlog's flusher through the store's `closing` event:
        it returns without waiting out the flusher's join (its wait on `closing` used to
        return at once, again and again, until the join gave up), and no flusher is left."""
        url = own_cluster.url + "?schema=closing&connect_timeout=1"
        svc = open_service(url)
        spawn(svc)
        own_cluster.stop(mode="immediate")
        assert svc.record_human_direct_message(CHILD, channel="telegram") is None
        assert svc.health()["signals"]["buffered"] == 1
        started = time.monotonic()
        svc.close()
        assert time.monotonic() - started < FLUSHER_JOIN
        names = {thread.name for thread in threading.enumerate()}
        assert "session-awareness-backlog" not in names

    def test_a_full_backlog_drops_the_oldest_signal_and_says_so(
        self, own_cluster: PostgresCluster
    ) -> None:
        """R-L8: the backlog is bounded; when full the oldest kept signal is dropped and
        counted, and what stays is flushed in order."""
        url = own_cluster.url + "?schema=full&connect_timeout=1"
        with open_service(url, signal_backlog=2) as svc:
            spawn(svc)
            own_cluster.stop(mode="immediate")
            with capture_logs() as logs:
                for summary in ("goal created", "goal updated", "goal cleared"):
                    assert svc.record_goal_changed(CHILD, summary=summary) is None
            assert [e["reason"] for e in logs if e["event"] == "signal_backlog_dropped"] == [
                "backlog full"
            ]
            own_cluster.start()
            assert wait_until(svc.flush_signals, timeout=NO_HANG)
            events = svc.session_status(CHILD, changes_since=1)["stateChanges"]["events"]
            assert [e["summary"] for e in events] == ["goal updated", "goal cleared"]
            signals = svc.health()["signals"]
            assert (signals["kept"], signals["flushed"], signals["dropped"]) == (3, 2, 1)
