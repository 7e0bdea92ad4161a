"""Providers are isolated: one failing, hanging or stopped never stops the others (R-U2)."""

from __future__ import annotations

import threading

import pytest
from structlog.testing import capture_logs

from session_awareness.application import SessionAwareness
from session_awareness.application.upstream.provider_ports import UpstreamActivity, UpstreamMissing
from tests.conftest import ServiceFactory
from tests.contract.helpers import CHILD, OTHER, spawn
from tests.upstream.fakes import CATALOG, ScriptedProvider, adopt, kinds

SECOND = "second"


@pytest.fixture
def second() -> ScriptedProvider:
    return ScriptedProvider()


@pytest.fixture
def two(
    open_svc: ServiceFactory, provider: ScriptedProvider, second: ScriptedProvider
) -> SessionAwareness:
    """The child adopted from the fake catalog, the other child from a second catalog."""
    svc = open_svc(upstream_providers={CATALOG: provider, SECOND: second}, upstream_timeout=0.2)
    spawn(svc)
    spawn(svc, child=OTHER, run="run-2")
    adopt(svc)
    adopt(svc, key=OTHER, catalog_id=SECOND)
    provider.answers[CHILD] = UpstreamActivity(1, "m1", position="p1")
    second.answers[OTHER] = UpstreamActivity(1, "m1", position="p1")
    return svc


def outcomes(svc: SessionAwareness) -> dict[str, str]:
    found = svc.scan_upstream_once()
    assert found is not None
    return {o.session_key: o.outcome for o in found}


class TestProviderIsolation:
    def test_a_failing_provider_does_not_stop_the_others(
        self, two: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U2: a provider that raises fails its own links only, and is logged."""
        provider.error = OSError("catalog unreachable")
        with capture_logs() as logs:
            assert outcomes(two) == {CHILD: "failed", OTHER: "recorded"}
        assert [e["catalog_id"] for e in logs if e["event"] == "upstream_provider_failed"] == [
            CATALOG
        ]
        assert "human_direct_message" in kinds(two, OTHER)

    def test_a_provider_that_times_out_does_not_stop_the_others(
        self, two: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U2: each provider call is bounded; a hung one times out, the others record, and
        it is not called again until it returns."""
        provider.gate = threading.Event()
        with capture_logs() as logs:
            assert outcomes(two) == {CHILD: "timed_out", OTHER: "recorded"}
        assert any(e["event"] == "upstream_provider_timed_out" for e in logs)
        assert outcomes(two)[CHILD] == "busy"
        assert len(provider.batches) == 1
        provider.release()

    def test_a_provider_answering_garbage_counts_as_failed(
        self, two: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U2: an answer that is not a mapping fails that provider's links only."""
        provider.reply = ["not", "a", "mapping"]
        assert outcomes(two) == {CHILD: "failed", OTHER: "recorded"}

    def test_a_failure_keeps_the_missing_streak(
        self, two: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U4: a failed provider call is no successful scan, so the count goes on."""
        provider.answers[CHILD] = UpstreamMissing()
        outcomes(two)
        outcomes(two)
        provider.error = OSError("flaky")
        assert outcomes(two)[CHILD] == "failed"
        provider.error = None
        assert outcomes(two)[CHILD] == "missing_recorded"

    def test_a_link_whose_catalog_has_no_provider_is_reported(self, two: SessionAwareness) -> None:
        """R-U2: a link of an unregistered catalog is left alone and said so."""
        adopt(two, key=OTHER, catalog_id="unknown-catalog")
        assert outcomes(two)[OTHER] == "no_provider"

    def test_stopping_mid_scan_writes_nothing(
        self, two: SessionAwareness, provider: ScriptedProvider, second: ScriptedProvider
    ) -> None:
        """R-U2: a monitor stopped while its providers run records nothing afterwards."""
        provider.during = two.stop_upstream_monitor
        assert outcomes(two) == {CHILD: "stopped", OTHER: "stopped"}
        assert "human_direct_message" not in kinds(two) + kinds(two, OTHER)
