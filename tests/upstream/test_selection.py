"""Which links a scan probes: watched and idle ones, with the session's own texts (R-U2)."""

from __future__ import annotations

from session_awareness.application import SessionAwareness
from session_awareness.application.upstream.provider_ports import UpstreamActivity, UpstreamMissing
from tests.conftest import ServiceFactory
from tests.contract.helpers import CHILD, MANAGER
from tests.upstream.fakes import (
    CATALOG,
    ScriptedProvider,
    adopt,
    adopted_child,
    kinds,
    marker,
)


class TestWatchedIdleLinks:
    def test_a_link_nobody_watches_is_not_probed(
        self, usvc: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U2: only links whose session has at least one watcher are checked."""
        usvc.open_session(CHILD)
        adopt(usvc)
        assert usvc.scan_upstream_once() == []
        assert provider.batches == []

    def test_a_link_becomes_probed_once_watched(
        self, usvc: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U2: an explicit watch puts the adopted session in the scanned set."""
        usvc.open_session(MANAGER)
        usvc.open_session(CHILD)
        adopt(usvc)
        assert usvc.watch(MANAGER, CHILD)
        usvc.scan_upstream_once()
        assert [p.session_key for p in provider.batches[0]] == [CHILD]

    def test_an_active_run_defers_the_check(
        self, open_svc: ServiceFactory, provider: ScriptedProvider
    ) -> None:
        """R-U2: a session with an active run is not probed this time."""
        svc = open_svc(
            upstream_providers={CATALOG: provider}, is_run_active=lambda key, agent: key == CHILD
        )
        adopted_child(svc)
        outcomes = svc.scan_upstream_once()
        assert outcomes is not None and [o.outcome for o in outcomes] == ["deferred"]
        assert provider.batches == []

    def test_a_deferred_check_keeps_the_missing_streak(
        self, open_svc: ServiceFactory, provider: ScriptedProvider
    ) -> None:
        """R-U2, R-U4: deferral neither counts as a miss nor resets the streak."""
        running = {"now": False}
        svc = open_svc(
            upstream_providers={CATALOG: provider}, is_run_active=lambda k, a: running["now"]
        )
        adopted_child(svc)
        provider.answers[CHILD] = UpstreamMissing()
        svc.scan_upstream_once()
        svc.scan_upstream_once()
        running["now"] = True
        svc.scan_upstream_once()
        running["now"] = False
        assert "upstream_missing" not in kinds(svc)
        svc.scan_upstream_once()
        assert kinds(svc)[-1] == "upstream_missing"

    def test_a_run_that_starts_while_the_provider_reads_defers_the_outcome(
        self, open_svc: ServiceFactory, provider: ScriptedProvider
    ) -> None:
        """R-U2: run activity is checked again after the provider returns: a run started
        meanwhile means no activity recorded and the marker unchanged."""
        running = {"now": False}
        svc = open_svc(
            upstream_providers={CATALOG: provider}, is_run_active=lambda k, a: running["now"]
        )
        adopted_child(svc)
        provider.answers[CHILD] = UpstreamActivity(2, "m1", position="p1")
        provider.during = lambda: running.update(now=True)
        outcomes = svc.scan_upstream_once()
        assert outcomes is not None and [o.outcome for o in outcomes] == ["deferred"]
        assert kinds(svc) == ["child_spawned", "adopted"]
        assert marker(svc) == "m0"
        provider.during, running["now"] = None, False
        outcomes = svc.scan_upstream_once()
        assert outcomes is not None and [o.outcome for o in outcomes] == ["recorded"]
        assert marker(svc) == "m1"

    def test_a_run_that_starts_during_a_third_miss_keeps_the_link(
        self, open_svc: ServiceFactory, provider: ScriptedProvider
    ) -> None:
        """R-U2, R-U4: a miss read while a run started is not counted: the third miss waits,
        the link is kept, nothing is recorded."""
        running = {"now": False}
        svc = open_svc(
            upstream_providers={CATALOG: provider}, is_run_active=lambda k, a: running["now"]
        )
        adopted_child(svc)
        provider.answers[CHILD] = UpstreamMissing()
        svc.scan_upstream_once()
        svc.scan_upstream_once()
        provider.during = lambda: running.update(now=True)
        outcomes = svc.scan_upstream_once()
        assert outcomes is not None and [o.outcome for o in outcomes] == ["deferred"]
        assert "upstream_missing" not in kinds(svc)
        assert svc.upstream_link(CHILD) is not None
        provider.during, running["now"] = None, False
        outcomes = svc.scan_upstream_once()
        assert outcomes is not None and [o.outcome for o in outcomes] == ["missing_recorded"]

    def test_a_probe_carries_the_marker_and_the_ten_latest_own_texts_normalised(
        self, open_svc: ServiceFactory, provider: ScriptedProvider
    ) -> None:
        """R-U3, R-R3: the provider sees the ten most recent own user texts, normalised."""
        texts = [f"  text\n number   {i} " for i in range(12)]
        svc = open_svc(upstream_providers={CATALOG: provider}, own_user_texts=lambda k, a: texts)
        adopted_child(svc)
        provider.answers[CHILD] = UpstreamActivity(0, "m0")
        svc.scan_upstream_once()
        (probe,) = provider.batches[0]
        assert probe.marker == "m0"
        assert probe.source.thread_id == "thread-1"
        assert probe.own_user_texts == {f"text number {i}" for i in range(2, 12)}

    def test_a_failing_host_port_defers_only_its_link(
        self, open_svc: ServiceFactory, provider: ScriptedProvider
    ) -> None:
        """R-U2: a host port that raises defers that link; the scan goes on."""

        def broken(key: str, agent_id: str) -> list[str]:
            raise RuntimeError("host down")

        svc = open_svc(upstream_providers={CATALOG: provider}, own_user_texts=broken)
        adopted_child(svc)
        outcomes = svc.scan_upstream_once()
        assert outcomes is not None and [o.outcome for o in outcomes] == ["deferred"]
