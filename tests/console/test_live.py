"""Live updates: `/events` tells a page when the store moved, whoever recorded (R-O1)."""

from __future__ import annotations

import re

from starlette.testclient import TestClient

from session_awareness.application import SessionAwareness
from session_awareness.infrastructure.console.views import store_head
from tests.console.scenario import CHILD


def changes(client: TestClient, **headers: str) -> list[int]:
    """The heads announced by `change` events in one stream (the test app's streams last
    0.3 s), after the `since` the request gives."""
    stream = client.get(headers.pop("path"), headers=headers)
    assert stream.status_code == 200
    assert stream.headers["content-type"].startswith("text/event-stream")
    return [int(n) for n in re.findall(r"id: (\d+)\nevent: change\n", stream.text)]


class TestLiveUpdates:
    def test_a_stream_announces_a_record_made_by_another_process(
        self, client: TestClient, writer: SessionAwareness, reader: SessionAwareness
    ) -> None:
        """R-O1: a page that rendered at head h is told of anything recorded after h, with
        the new head, on SQLite and PostgreSQL alike (a poll of the event store's head)."""
        rendered = int(re.findall(r'data-head="(\d+)"', client.get("/").text)[0])
        assert changes(client, path=f"/events?since={rendered}") == []
        writer.record_goal_changed(CHILD, summary="goal updated", actor_type="human")
        moved = store_head(reader)
        assert moved > rendered
        assert changes(client, path=f"/events?since={rendered}") == [moved]

    def test_a_reconnecting_stream_resumes_from_the_last_head_it_saw(
        self, client: TestClient, writer: SessionAwareness, reader: SessionAwareness
    ) -> None:
        """R-O1: the browser's `Last-Event-ID` wins over the page's `since`, so a stream
        that reconnects announces only what is new."""
        writer.record_goal_changed(CHILD, summary="goal updated", actor_type="human")
        head = store_head(reader)
        assert changes(client, path="/events?since=0", **{"Last-Event-ID": str(head)}) == []

    def test_a_stream_without_a_since_starts_from_the_current_head(
        self, client: TestClient, reader: SessionAwareness
    ) -> None:
        """R-O1: the first event names the head it started from, as `head`, not `change`."""
        stream = client.get("/events").text
        assert f"id: {store_head(reader)}\nevent: head\n" in stream
        assert "event: change" not in stream
