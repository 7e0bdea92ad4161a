"""A recording host's own metrics in Prometheus's form, under the console's names (R-O2)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from session_awareness.application import SessionAwareness
from session_awareness.infrastructure.console.host_metrics import ServiceCollector
from tests.console.scenario import MANAGER
from tests.console.test_metrics import scrape

Figures = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def exported(registry: CollectorRegistry) -> Figures:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
    }


class TestTheHostsRegistry:
    def test_a_host_serves_what_it_counted_as_it_happened(self, writer: SessionAwareness) -> None:
        """R-O2: the host's registry holds the signals it recorded by kind, the notices it
        opened and drained, its producers' latencies and the store's pending notices."""
        registry = CollectorRegistry()
        registry.register(ServiceCollector(writer))
        figures = exported(registry)
        kind = "session_awareness_signals_recorded_total"
        assert figures[kind, (("kind", "child_spawned"),)] == 2
        assert figures[kind, (("kind", "human_direct_message"),)] == 2
        assert figures[kind, (("kind", "compacted"),)] == 0
        assert figures["session_awareness_notices_opened_total", ()] == 2
        assert figures["session_awareness_pending_notices", ()] == 2
        assert figures["session_awareness_kept_signals", ()] == 0
        assert figures["session_awareness_store_errors_total", ()] == 0
        assert figures["session_awareness_record_seconds_count", ()] == 6  # the producer calls
        assert figures["session_awareness_record_seconds_bucket", (("le", "+Inf"),)] == 6

        writer.drain_notices(MANAGER)
        after = exported(registry)
        assert after["session_awareness_notices_drained_total", ()] == 2
        assert after["session_awareness_notices_opened_total", ()] == 3  # the child's reopened

    def test_the_console_serves_every_name_a_host_does(
        self, writer: SessionAwareness, client: TestClient
    ) -> None:
        """R-O2: one name for one figure: each metric a host exports, the console's
        `/metrics` exports too (from the store, or its own process's)."""
        registry = CollectorRegistry()
        registry.register(ServiceCollector(writer))
        hosts = {name for name, _ in exported(registry)} - {
            "session_awareness_spooled_signals"  # the recording host's file, not the console's
        }
        assert hosts <= {name for name, _ in scrape(client)}
