"""`/metrics`: the store's figures in Prometheus text format, read on each scrape (R-O1)."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from session_awareness.application import SessionAwareness
from session_awareness.infrastructure.console.metrics import StoreCollector
from tests.console.scenario import GROUP, MANAGER


def scrape(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    page = client.get("/metrics")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(page.text)
        for sample in family.samples
    }


def signals(figures: dict, kind: str) -> float:  # type: ignore[type-arg]
    return figures["session_awareness_signals_recorded_total", (("kind", kind),)]


class TestMetrics:
    def test_counts_signals_notices_and_drains_from_the_store(
        self, client: TestClient, writer: SessionAwareness
    ) -> None:
        """R-O1: signals by kind, notices opened and drained, pending notices and cursors,
        as another process recorded them; the counters grow as it records more."""
        before = scrape(client)
        assert signals(before, "child_spawned") == 2
        assert signals(before, "human_direct_message") == 2
        assert signals(before, "goal_changed") == 1
        assert signals(before, "run_failed") == 1
        assert signals(before, "compacted") == 0
        assert before["session_awareness_notices_opened_total", ()] == 2  # child's, group's
        assert before["session_awareness_notices_drained_total", ()] == 0
        assert before["session_awareness_pending_notices", ()] == 2
        assert before["session_awareness_cursors", ()] == 3
        assert before["session_awareness_store_up", ()] == 1
        assert before["session_awareness_store_errors_total", ()] == 0

        assert len(writer.drain_notices(MANAGER)) == 2  # the child's reopens (M 3 > N 2)
        writer.record_human_direct_message(GROUP, channel="slack")
        after = scrape(client)
        assert signals(after, "human_direct_message") == 3
        assert after["session_awareness_notices_drained_total", ()] == 2
        assert after["session_awareness_notices_opened_total", ()] == 4  # + reopen + group's
        assert after["session_awareness_pending_notices", ()] == 2
        assert (
            after["session_awareness_event_store_head", ()]
            > before["session_awareness_event_store_head", ()]
        )

    def test_a_scrape_counts_the_cursors_in_the_store_without_reading_them(
        self, client: TestClient, reader: SessionAwareness, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-O1 (issue 39, item 6): the cursor gauges are counted by the store; a scrape
        read every cursor's row, which at a million sessions is 800,000 rows each time."""

        def every_row(before: int) -> Any:
            raise AssertionError(f"a scrape read every cursor updated before {before}")

        monkeypatch.setattr(reader.store.read_model, "cursors_updated_before", every_row)
        figures = scrape(client)
        assert figures["session_awareness_cursors", ()] == 3
        assert figures["session_awareness_pending_notices", ()] == 2
        assert reader.read_model.cursor_counts() == (3, 2)

    def test_a_scrape_counts_the_waiting_watchers_without_listing_them(
        self, client: TestClient, reader: SessionAwareness, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-O1 (issue 39, item 6): the gauge of watchers with a pending notice is counted by
        the store; a scrape listed every such watcher, 200,000 keys at a million sessions."""
        waiting = len(reader.read_model.watchers_with_pending())
        assert waiting == 1  # the manager, for the child's notice and the group's

        def every_watcher() -> Any:
            raise AssertionError("a scrape listed every watcher with a pending notice")

        monkeypatch.setattr(reader.store.read_model, "watchers_with_pending", every_watcher)
        figures = scrape(client)
        assert figures["session_awareness_watchers_pending", ()] == waiting
        assert reader.read_model.watchers_pending_count() == waiting

    def test_a_closed_store_is_reported_down_not_as_an_error_page(
        self, client: TestClient, reader: SessionAwareness
    ) -> None:
        """R-O1: a scrape the store cannot answer reports `store_up 0` and counts the error."""
        reader.close()
        figures = scrape(client)
        assert figures["session_awareness_store_up", ()] == 0
        assert figures["session_awareness_store_errors_total", ()] == 1


class TestInAHostsRegistry:
    def test_a_host_exports_the_same_figures_from_its_own_registry(
        self, writer: SessionAwareness
    ) -> None:
        """R-O1: an embedding host registers the collector in the registry it serves."""
        registry = CollectorRegistry()
        registry.register(StoreCollector(writer))
        figures = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(generate_latest(registry).decode())
            for s in family.samples
        }
        assert signals(figures, "goal_changed") == 1
        assert figures["session_awareness_pending_notices", ()] == 2
