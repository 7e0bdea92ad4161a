"""Storage and limits: retention, exact watermarks, and rebuilds (R-R1–R-R3)."""

from __future__ import annotations

import pytest

from session_awareness.application import SessionAwareness
from session_awareness.testing.read_models import replace_read_models, replayed_changes
from tests.conftest import FakeClock, ServiceFactory, assert_rebuild_matches
from tests.contract.helpers import CHILD, MANAGER, OTHER, restart, sequences, spawn


def gap(svc: SessionAwareness, key: str, since: int) -> bool:
    return bool(svc.session_status(key, changes_since=since)["stateChanges"]["historyGap"])


def earliest(svc: SessionAwareness, key: str) -> int:
    return int(
        svc.session_status(key, changes_since=0)["stateChanges"]["earliestAvailableSequence"]
    )


class TestPruneByAge:
    def test_rows_older_than_the_age_limit_go_and_the_watermark_is_exact(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-R1, R-S3: old rows go; historyGap is true exactly below the watermark."""
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal created")  # 2
        clock.advance(days=20)
        svc.record_goal_changed(CHILD, summary="goal updated")  # 3
        clock.advance(days=11)
        result = svc.prune()
        assert result["removedRows"] == 2
        assert result["watermarks"] == [{"sessionKey": CHILD, "agentId": "main", "watermark": 2}]
        assert sequences(svc, CHILD) == [3]
        assert gap(svc, CHILD, 1) is True
        assert gap(svc, CHILD, 2) is False  # v equal to the watermark is no gap
        assert earliest(svc, CHILD) == 3
        assert svc.session_status(CHILD)["stateVersion"] == 3

    def test_pruning_everything_keeps_the_head_and_reports_head_plus_one(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-R1, R-S1: heads are never lowered; none retained → earliest = head + 1."""
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal created")
        clock.advance(days=31)
        svc.prune()
        changes = svc.session_status(CHILD, changes_since=0)["stateChanges"]
        assert changes["events"] == []
        assert changes["earliestAvailableSequence"] == 3
        assert changes["historyGap"] is True
        assert svc.session_status(CHILD)["stateVersion"] == 2
        assert svc.record_goal_changed(CHILD, summary="goal updated") == 3

    def test_an_empty_session_reports_earliest_zero(self, svc: SessionAwareness) -> None:
        """R-S1: earliestAvailableSequence is 0 when the head is 0."""
        svc.open_session(MANAGER)
        assert earliest(svc, MANAGER) == 0
        assert gap(svc, MANAGER, 0) is False

    def test_pruning_twice_changes_nothing_more(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-R1: a second prune with nothing old removes nothing and raises no watermark."""
        spawn(svc)
        clock.advance(days=31)
        assert svc.prune()["removedRows"] == 1
        assert svc.prune() == {"removedRows": 0, "watermarks": [], "expiredCursors": 0}


class TestPruneByRowCap:
    def test_only_the_newest_rows_across_sessions_are_kept(self, open_svc: ServiceFactory) -> None:
        """R-R1: after the age limit, only the newest N rows across all sessions stay, and
        each session loses a prefix with an exact watermark."""
        svc = open_svc(retention_rows=4)
        spawn(svc)  # CHILD 1
        spawn(svc, child=OTHER, run="run-2")  # OTHER 1
        svc.record_goal_changed(CHILD, summary="goal created")  # CHILD 2
        svc.record_goal_changed(OTHER, summary="goal created")  # OTHER 2
        svc.record_goal_changed(CHILD, summary="goal updated")  # CHILD 3
        svc.record_goal_changed(OTHER, summary="goal updated")  # OTHER 3
        result = svc.prune()
        assert result["removedRows"] == 2
        assert sequences(svc, CHILD) == [2, 3]
        assert sequences(svc, OTHER) == [2, 3]
        assert (gap(svc, CHILD, 0), gap(svc, CHILD, 1)) == (True, False)

    def test_the_row_cap_follows_recording_order_not_session_order(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-R1: the newest rows are kept whichever session they belong to."""
        svc = open_svc(retention_rows=3)
        spawn(svc)
        for _ in range(3):
            svc.record_goal_changed(CHILD, summary="goal updated")
        spawn(svc, child=OTHER, run="run-2")
        svc.prune()
        assert sequences(svc, CHILD) == [3, 4]
        assert sequences(svc, OTHER) == [1]


class TestPruneSchedule:
    def test_the_record_path_never_prunes_and_maintenance_prunes_at_most_hourly(
        self, open_svc: ServiceFactory, clock: FakeClock
    ) -> None:
        """R-R1 (ADR 038): a producer call never prunes, however long since the last prune;
        the maintenance prunes at start-up and then at most hourly by the service clock."""
        svc = open_svc(retention_rows=2)
        svc.maintain()  # the start-up prune: nothing to remove yet
        spawn(svc)
        for _ in range(3):
            svc.record_goal_changed(CHILD, summary="goal updated")
        svc.maintain()
        assert sequences(svc, CHILD) == [1, 2, 3, 4]  # pruned at start-up, not again yet
        clock.advance(minutes=61)
        svc.record_goal_changed(CHILD, summary="goal updated")
        assert sequences(svc, CHILD) == [1, 2, 3, 4, 5]  # not inside the producer's call
        assert svc.maintenance_idle is False  # a prune is due
        svc.maintain()
        assert sequences(svc, CHILD) == [4, 5]
        assert svc.maintenance_idle is True

    def test_startup_prunes(self, open_svc: ServiceFactory, clock: FakeClock) -> None:
        """R-R1: pruning runs at startup."""
        svc = open_svc()
        spawn(svc)
        svc.close()
        clock.advance(days=31)
        again = restart(open_svc)
        assert sequences(again, CHILD) == []
        assert gap(again, CHILD, 0) is True


class TestAuditTrail:
    def test_the_event_store_keeps_what_retention_removed(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-R2: the event store is not pruned; a rebuild reproduces the pruned state."""
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal created")
        clock.advance(days=31)
        svc.prune()
        stored = list(svc.store.recorder.select_notifications(1, 1000))
        assert len([n for n in stored if n.topic.endswith(".GoalChanged")]) == 1
        assert_rebuild_matches(svc)

    def test_a_tampered_read_model_is_caught_and_repaired_by_a_rebuild(
        self, svc: SessionAwareness
    ) -> None:
        """R-R2: the rebuild comparison sees a read model that drifted from the events, and
        replacing the read models with the replay repairs it."""
        spawn(svc)
        recorder = svc.store.recorder
        with recorder.datastore.transaction(commit=True) as c:  # type: ignore[attr-defined]
            c.execute(
                recorder.read_models.sql("UPDATE {s}session_state_heads SET state_version = 7")
            )  # type: ignore[attr-defined]
        with pytest.raises(AssertionError, match="session_state_heads"):
            assert_rebuild_matches(svc)
        replace_read_models(recorder, replayed_changes(svc.store))
        assert_rebuild_matches(svc)
        assert svc.session_status(CHILD)["stateVersion"] == 1
