"""Human turns found upstream: one `human_direct_message` per scan, then the marker (R-U3)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from session_awareness.application import SessionAwareness, StoreUnavailableError
from session_awareness.application.projection import to_ms
from session_awareness.application.upstream.provider_ports import UpstreamActivity
from tests.conftest import FakeClock, RecordingWaker
from tests.contract.helpers import CHILD, MANAGER, notice
from tests.upstream.fakes import ScriptedProvider, adopt, adopted_child, events, kinds, marker


def outcomes(svc: SessionAwareness) -> list[str]:
    found = svc.scan_upstream_once()
    assert found is not None
    return [o.outcome for o in found]


class TestActivity:
    def test_activity_is_recorded_once_and_the_marker_advances(
        self, usvc: SessionAwareness, provider: ScriptedProvider, waker: RecordingWaker
    ) -> None:
        """R-U3: a human turn upstream is one `human_direct_message` via the catalog id,
        notifying the watcher; the marker moves past it."""
        adopted_child(usvc)
        provider.answers[CHILD] = UpstreamActivity(1, "m1", position="turn-1")
        assert outcomes(usvc) == ["recorded"]
        event = events(usvc)[-1]
        assert event["kind"] == "human_direct_message"
        assert event["actorType"] == "human"
        assert event["summary"] == "human message via fake"
        assert event["payload"] == {"channel": "fake"}
        assert marker(usvc) == "m1"
        assert usvc.pending_notices(MANAGER) == [notice(CHILD, 1)]
        assert waker.woken == [MANAGER]

    def test_the_same_upstream_position_is_recorded_only_once(
        self, usvc: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U3: recording is idempotent per upstream position."""
        adopted_child(usvc)
        provider.answers[CHILD] = UpstreamActivity(1, "m1", position="turn-1")
        usvc.scan_upstream_once()
        assert outcomes(usvc) == ["skipped"]
        assert kinds(usvc).count("human_direct_message") == 1

    def test_a_burst_is_one_event_counting_its_turns(
        self, usvc: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U3, R-L2: several turns in one scan give one event with `payload.turns`."""
        adopted_child(usvc)
        provider.answers[CHILD] = UpstreamActivity(4, "m1", position="turn-4")
        usvc.scan_upstream_once()
        assert events(usvc)[-1]["payload"] == {"channel": "fake", "turns": 4}
        assert kinds(usvc).count("human_direct_message") == 1

    @pytest.mark.parametrize(
        ("skew", "expected"),
        [(timedelta(hours=2), timedelta(0)), (timedelta(hours=-30), timedelta(hours=-24))],
    )
    def test_a_skewed_upstream_time_is_clamped(
        self,
        usvc: SessionAwareness,
        provider: ScriptedProvider,
        clock: FakeClock,
        skew: timedelta,
        expected: timedelta,
    ) -> None:
        """R-L7: the upstream's time is clamped into [now − 24 h, now]."""
        adopted_child(usvc)
        at = to_ms(clock.now + skew)
        provider.answers[CHILD] = UpstreamActivity(1, "m1", occurred_at=at, position="t")
        usvc.scan_upstream_once()
        assert events(usvc)[-1]["occurredAt"] == to_ms(clock.now + expected)

    def test_a_time_within_the_window_is_kept(
        self, usvc: SessionAwareness, provider: ScriptedProvider, clock: FakeClock
    ) -> None:
        """R-L7: an upstream time inside the window is the event's `occurredAt`."""
        adopted_child(usvc)
        at = to_ms(clock.now - timedelta(minutes=5))
        provider.answers[CHILD] = UpstreamActivity(1, "m1", occurred_at=at, position="t")
        usvc.scan_upstream_once()
        assert events(usvc)[-1]["occurredAt"] == at

    def test_zero_turns_advance_the_marker_without_an_event(
        self, usvc: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U3: reading only non-human rows moves the marker and records nothing."""
        adopted_child(usvc)
        provider.answers[CHILD] = UpstreamActivity(0, "m2")
        assert outcomes(usvc) == ["advanced"]
        assert marker(usvc) == "m2"
        assert kinds(usvc) == ["child_spawned", "adopted"]

    def test_an_idle_scan_writes_nothing(
        self, usvc: SessionAwareness, provider: ScriptedProvider, clock: FakeClock
    ) -> None:
        """R-U3: nothing new upstream and an unmoved marker leave the link untouched."""
        adopted_child(usvc)
        before = usvc.upstream_link(CHILD)
        clock.advance(seconds=60)
        provider.answers[CHILD] = UpstreamActivity(0, "m0")
        assert outcomes(usvc) == ["idle"]
        assert usvc.upstream_link(CHILD) == before

    def test_the_marker_stays_when_the_record_fails(
        self, usvc: SessionAwareness, provider: ScriptedProvider, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-U3, R-L8: the marker advances only after the record succeeds; the next scan
        records the same turns."""
        adopted_child(usvc)
        record_once = usvc._intake.record_once

        def unreachable(*args: Any, **kwargs: Any) -> int | None:
            raise StoreUnavailableError("down for the test")

        monkeypatch.setattr(usvc._intake, "record_once", unreachable)
        provider.answers[CHILD] = UpstreamActivity(2, "m1", position="turn-2")
        assert outcomes(usvc) == ["failed"]
        assert marker(usvc) == "m0"
        assert "human_direct_message" not in kinds(usvc)
        monkeypatch.setattr(usvc._intake, "record_once", record_once)
        assert outcomes(usvc) == ["recorded"]
        assert marker(usvc) == "m1"

    def test_a_link_refreshed_mid_scan_gets_nothing_written(
        self, usvc: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U3: after the provider's I/O the link is re-checked; a changed one is left alone."""
        adopted_child(usvc)
        provider.during = lambda: adopt(usvc, thread_id="thread-2", marker=None)
        provider.answers[CHILD] = UpstreamActivity(1, "m1", position="turn-1")
        assert outcomes(usvc) == ["changed"]
        assert "human_direct_message" not in kinds(usvc)
        link = usvc.upstream_link(CHILD)
        assert link is not None and (link["threadId"], link["marker"]) == ("thread-2", None)

    def test_a_session_deleted_mid_scan_gets_nothing_written(
        self, usvc: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U3: a session deleted during the provider's I/O gets no record."""
        adopted_child(usvc)
        provider.during = lambda: usvc.delete_session(CHILD)
        provider.answers[CHILD] = UpstreamActivity(1, "m1", position="turn-1")
        assert outcomes(usvc) == ["changed"]
        usvc.open_session(CHILD)
        assert "human_direct_message" not in kinds(usvc)

    def test_activity_without_any_position_is_refused(
        self, usvc: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U3: a turn that cannot be made idempotent is not recorded, and the marker stays."""
        adopted_child(usvc)
        provider.answers[CHILD] = UpstreamActivity(1, None)
        assert outcomes(usvc) == ["rejected"]
        assert marker(usvc) == "m0"
