"""`svc.metrics`: what this process did, counted where it happens (R-O2)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest
from eventsourcing.persistence import OperationalError

from session_awareness.application import SessionAwareness, StoreUnavailableError
from session_awareness.application.process_metrics import Metrics
from session_awareness.testing import wait_until
from tests.conftest import ServiceFactory
from tests.contract.helpers import CHILD, MANAGER, spawn


def unreachable(*_: object, **__: object) -> None:
    raise OperationalError("database is unreachable")


class TestCounters:
    def test_signals_are_counted_by_kind_once_recorded(self, svc: SessionAwareness) -> None:
        """R-O2: each recorded signal counts once under its kind; a repeat the rules skip
        and a caller's mistake count nothing."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="slack", idempotency_key="k1")
        svc.record_human_direct_message(CHILD, channel="slack", idempotency_key="k1")  # repeat
        svc.record_run_terminal(CHILD, run_id="run-1", outcome="failed")
        svc.record_goal_changed("agent:main:subagent:nobody", summary="goal created")
        figures = svc.metrics.figures()
        assert figures.signals_recorded == {
            "child_spawned": 1, "human_direct_message": 1, "run_failed": 1,
        }  # fmt: skip

    def test_notices_opened_and_drained_are_counted_a_reopened_one_as_opened(
        self, svc: SessionAwareness
    ) -> None:
        """R-O2: a notice opening counts once (newer material on a pending cursor opens
        none); a drain counts what it acknowledged, and a notice it reopened as opened."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="slack")
        svc.record_goal_changed(CHILD, summary="goal updated", actor_type="human")
        assert svc.metrics.figures().notices_opened == 1
        assert len(svc.drain_notices(MANAGER)) == 1  # M 3 > N 2: reopened at once
        figures = svc.metrics.figures()
        assert (figures.notices_drained, figures.notices_opened) == (1, 2)

    def test_the_pending_gauge_reads_every_processs_notices_from_the_store(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-O2: pending notices are the store's, whoever opened them; the counters are
        this process's own."""
        host, other = open_svc(), open_svc()
        spawn(other)
        other.record_human_direct_message(CHILD, channel="slack")
        figures = host.metrics.figures()
        assert figures.gauges["pending_notices"] == 1
        assert figures.notices_opened == 0 and figures.signals_recorded == {}


class TestRecordLatency:
    def test_each_producer_call_is_timed_with_the_services_timer(
        self, svc: SessionAwareness
    ) -> None:
        """R-O2: the histogram holds one observation per producer call, timed by the
        application's monotonic timer (here a fake that moves 3 ms a reading)."""
        readings = iter(0.003 * n for n in range(100))
        svc.metrics.timer = lambda: next(readings)
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="slack")
        svc.record_compacted(CHILD, operation_id="op-1")
        latencies = svc.metrics.figures().record_seconds
        cumulative = dict(latencies.cumulative())
        assert (cumulative[0.0025], cumulative[0.005], cumulative[float("inf")]) == (0, 3, 3)
        assert latencies.sum == pytest.approx(0.009)


class TestStoreErrors:
    def test_a_failed_read_counts_once_inside_a_command_too(
        self, svc: SessionAwareness, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-O2: a query the store cannot answer counts one store error; a drain whose read
        fails counts one, not one for the read and one for the command."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="slack")
        read_models = svc.store.recorder.read_models  # type: ignore[attr-defined]
        for name in ("fetch", "fetch_tuples"):
            monkeypatch.setattr(read_models, name, unreachable)
        with pytest.raises(StoreUnavailableError):
            svc.pending_notices(MANAGER)
        assert svc.metrics.figures(gauges=False).store_errors == 1
        with pytest.raises(StoreUnavailableError):
            svc.drain_notices(MANAGER)
        assert svc.metrics.figures(gauges=False).store_errors == 2
        monkeypatch.undo()
        assert svc.metrics.figures().gauges["pending_notices"] == 1

    def test_a_kept_signal_counts_a_store_error_and_is_counted_when_it_lands(
        self, svc: SessionAwareness, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-O2: a producer whose save fails counts a store error and keeps the signal
        (the kept gauge); once the store answers and it lands, it counts as recorded."""
        spawn(svc)
        monkeypatch.setattr(svc.store.recorder, "insert_events", unreachable)
        assert svc.record_goal_changed(CHILD, summary="goal created") is None
        figures = svc.metrics.figures()
        assert figures.store_errors >= 1
        assert figures.gauges["kept_signals"] == 1
        assert "goal_changed" not in figures.signals_recorded
        monkeypatch.undo()
        wait_until(svc.flush_signals, timeout=10)
        figures = svc.metrics.figures()
        assert figures.gauges["kept_signals"] == 0
        assert figures.signals_recorded["goal_changed"] == 1

    def test_a_closed_service_is_not_a_store_error(self, svc: SessionAwareness) -> None:
        """R-O2: calls after `close()` are the caller's, not the store's failures."""
        svc.close()
        with pytest.raises(StoreUnavailableError):
            svc.pending_notices(MANAGER)
        assert svc.metrics.figures(gauges=False).store_errors == 0


class TestWithoutPrometheus:
    def test_the_core_counts_without_importing_prometheus_client(self) -> None:
        """R-O2: recording and `svc.metrics` need no metrics library."""
        code = (
            "import sys\n"
            "from session_awareness.application import open_service\n"
            "svc = open_service('sqlite:///:memory:')\n"
            "svc.open_session('agent:a:main')\n"
            "svc.record_compacted('agent:a:main', operation_id='op')\n"
            "assert svc.metrics.figures().signals_recorded == {'compacted': 1}\n"
            "assert 'prometheus_client' not in sys.modules, 'imported'\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr


class TestHistogram:
    @pytest.mark.parametrize(
        ("seconds", "bucket"), [(0.0005, 0.0005), (0.0006, 0.001), (20.0, float("inf"))]
    )
    def test_an_observation_falls_in_the_first_bucket_that_holds_it(
        self, seconds: float, bucket: float
    ) -> None:
        """R-O2: buckets are upper bounds, inclusive, as Prometheus's `le`."""
        metrics = Metrics()
        metrics.record_took(seconds)
        first: Callable[[], float] = lambda: next(  # noqa: E731
            le for le, n in metrics.figures().record_seconds.cumulative() if n
        )
        assert first() == bucket
