"""The monitor's cadence: 15 s, then every 60 s, single-flight, stopped on close (R-U2)."""

from __future__ import annotations

from session_awareness.application import SessionAwareness
from session_awareness.application.upstream import LinkOutcome
from session_awareness.application.upstream.provider_ports import UpstreamActivity
from tests.contract.helpers import CHILD
from tests.upstream.fakes import ManualScheduler, ScriptedProvider, adopted_child


class TestCadence:
    def test_the_first_scan_runs_after_fifteen_seconds_then_every_minute(
        self, usvc: SessionAwareness, provider: ScriptedProvider, scheduler: ManualScheduler
    ) -> None:
        """R-U2: the first tick after 15 s, then one every 60 s."""
        adopted_child(usvc)
        usvc.start_upstream_monitor()
        scheduler.advance(14)
        assert provider.batches == []
        scheduler.advance(1)
        assert len(provider.batches) == 1
        scheduler.advance(59)
        assert len(provider.batches) == 1
        scheduler.advance(1)
        assert len(provider.batches) == 2
        scheduler.advance(600)
        assert len(provider.batches) == 12

    def test_starting_twice_keeps_one_cadence(
        self, usvc: SessionAwareness, provider: ScriptedProvider, scheduler: ManualScheduler
    ) -> None:
        """R-U2: a second start does not add a second scan per tick."""
        adopted_child(usvc)
        usvc.start_upstream_monitor()
        usvc.start_upstream_monitor()
        scheduler.advance(75)
        assert len(provider.batches) == 2

    def test_stopping_cancels_the_next_scan(
        self, usvc: SessionAwareness, provider: ScriptedProvider, scheduler: ManualScheduler
    ) -> None:
        """R-U2: after stop, no scan runs."""
        adopted_child(usvc)
        usvc.start_upstream_monitor()
        scheduler.advance(15)
        usvc.stop_upstream_monitor()
        scheduler.advance(600)
        assert len(provider.batches) == 1

    def test_closing_the_service_stops_the_monitor(
        self, usvc: SessionAwareness, provider: ScriptedProvider, scheduler: ManualScheduler
    ) -> None:
        """R-U2: closing the service ends the cadence."""
        adopted_child(usvc)
        usvc.start_upstream_monitor()
        usvc.close()
        scheduler.advance(600)
        assert provider.batches == []

    def test_a_scan_asked_for_while_one_is_in_flight_is_skipped(
        self, usvc: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U2: scans are single-flight; the second one returns None and probes nothing."""
        adopted_child(usvc)
        inner: list[list[LinkOutcome] | None] = []
        provider.during = lambda: inner.append(usvc.scan_upstream_once())
        provider.answers[CHILD] = UpstreamActivity(0, "m0")
        outer = usvc.scan_upstream_once()
        assert inner == [None]
        assert outer is not None and [o.outcome for o in outer] == ["idle"]
        assert len(provider.batches) == 1
