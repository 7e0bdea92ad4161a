"""Audit: replay the event store, compare with the live read models, rebuild (R-R2, D4, D5)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import structlog.testing

from session_awareness.application import InvalidArgumentError, SessionAwareness
from session_awareness.application.audit import _Replay
from session_awareness.application.audit_report import Difference
from tests.conftest import FakeClock
from tests.contract.helpers import CHILD, MANAGER, cursor, sequences, spawn
from tests.ops.helpers import cursor_id, drop_stored_event, mixed_workload, session_id, tamper


@pytest.fixture
def tampered(svc: SessionAwareness) -> Iterator[SessionAwareness]:
    """A service whose read models a test may tamper with; rebuilt afterwards, so the
    suite's closing rebuild check (tests/conftest.py) holds again."""
    yield svc
    svc.audit(rebuild=True)


def only(report_differences: list[Difference]) -> Difference:
    [difference] = report_differences
    return difference


class TestAuditOfACleanStore:
    def test_a_mixed_workload_audits_clean_with_every_table_compared(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-R2: after spawns, messages, drains, prunes, resets and deletes, the rebuild
        equals the live read models in every table, and no recorded fact breaks a rule."""
        mixed_workload(svc, clock)
        report = svc.audit()
        assert report.clean, report.as_dict()
        assert report.events == report.last_position > 30
        assert set(report.tables) >= {
            "session_registry",
            "session_state_heads",
            "session_state_events",
            "session_watch_cursors",
        }
        for summary in report.tables.values():
            assert summary.live_rows == summary.rebuilt_rows
        assert report.tables["session_state_events"].live_rows > 0

    def test_an_empty_store_audits_clean(self, svc: SessionAwareness) -> None:
        """R-R2: nothing recorded, nothing to differ."""
        report = svc.audit()
        assert report.clean
        assert report.events == 0

    def test_the_audit_logs_its_start_and_its_outcome(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """`audit_started` and `audit_finished` carry the counts an operator needs
        (docs/operations.md)."""
        spawn(svc)
        with structlog.testing.capture_logs() as logs:
            svc.audit()
        names = [entry["event"] for entry in logs]
        assert names == ["audit_started", "audit_finished"]
        assert logs[1]["differences"] == 0
        assert logs[1]["events"] > 0

    def test_events_recorded_after_the_bulk_replay_are_caught_up_before_comparing(
        self, svc: SessionAwareness, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-R2: a store that keeps changing still audits clean: what was recorded after the
        bulk replay is replayed inside the comparison's transaction."""
        spawn(svc)
        store = svc.store.audit_store()

        class Busy:
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def __getattr__(self, name: str) -> Any:
                return getattr(self.inner, name)

            @contextmanager
            def against_live(self, *, lock: bool) -> Any:
                svc.record_human_direct_message(CHILD, channel="telegram")
                with self.inner.against_live(lock=lock) as view:
                    yield view

        original = store.scratch

        @contextmanager
        def scratch() -> Any:
            with original() as inner:
                yield Busy(inner)

        monkeypatch.setattr(store, "scratch", scratch)
        monkeypatch.setattr(svc.store, "audit_store", lambda: store)
        before = int(svc.store.recorder.max_notification_id())
        report = svc.audit()
        assert report.clean, report.as_dict()
        assert report.last_position > before


class TestTamperedReadModels:
    def test_a_deleted_changes_since_row_is_reported_missing_by_its_key(
        self, tampered: SessionAwareness
    ) -> None:
        """R-R2: a retained row the live table lost is named by table and key."""
        spawn(tampered)
        tampered.record_human_direct_message(CHILD, channel="telegram")
        tamper(tampered, "DELETE FROM {s}session_state_events WHERE sequence = 2")
        report = tampered.audit()
        assert not report.clean
        difference = only(report.differences)
        assert (difference.table, difference.problem) == ("session_state_events", "missing")
        assert difference.key == {"session_id": session_id(CHILD).hex, "sequence": 2}
        assert difference.subject == CHILD
        assert report.tables["session_state_events"].missing == 1

    def test_a_changed_head_is_reported_with_its_live_and_rebuilt_values(
        self, tampered: SessionAwareness
    ) -> None:
        """R-L4, R-R2: a head that moved is one changed row, naming the column and both values."""
        spawn(tampered)
        tamper(
            tampered,
            "UPDATE {s}session_state_heads SET state_version = 9 WHERE session_id = ?",
            session_id(CHILD),
        )
        difference = only(tampered.audit().differences)
        assert (difference.table, difference.problem) == ("session_state_heads", "changed")
        assert difference.columns == {"state_version": (9, 1)}

    def test_a_moved_cursor_is_reported_with_the_positions_that_differ(
        self, tampered: SessionAwareness
    ) -> None:
        """§4, R-R2: a cursor whose L and N were moved is reported with exactly those columns."""
        spawn(tampered)
        tampered.record_human_direct_message(CHILD, channel="telegram")
        tamper(
            tampered,
            "UPDATE {s}session_watch_cursors SET acknowledged = 2, notified = 2 WHERE watch_id = ?",
            cursor_id(MANAGER, CHILD),
        )
        difference = only(tampered.audit().differences)
        assert difference.table == "session_watch_cursors"
        assert difference.columns == {"acknowledged": (2, 1)}
        assert difference.subject == f"{MANAGER} → {CHILD}"

    def test_a_row_no_fact_explains_is_reported_unexpected(
        self, tampered: SessionAwareness
    ) -> None:
        """R-R2: a live row the rebuild does not have is `unexpected`."""
        spawn(tampered)
        tamper(tampered, "DELETE FROM {s}session_watch_cursors")
        tamper(
            tampered, "UPDATE {s}session_registry SET label = 'edited' WHERE session_key = ?", CHILD
        )
        report = tampered.audit()
        problems = sorted((d.table, d.problem) for d in report.differences)
        assert problems == [
            ("session_registry", "changed"),
            ("session_watch_cursors", "missing"),
        ]

    def test_rebuild_repairs_every_difference_and_a_second_audit_is_clean(
        self, tampered: SessionAwareness
    ) -> None:
        """R-R2, D5: `audit(rebuild=True)` swaps the rebuilt read models in; the service then
        answers from them as if nothing had happened."""
        spawn(tampered)
        tampered.record_human_direct_message(CHILD, channel="telegram")
        tamper(tampered, "DELETE FROM {s}session_state_events WHERE sequence = 2")
        tamper(tampered, "UPDATE {s}session_state_heads SET state_version = 9")
        tamper(tampered, "UPDATE {s}session_watch_cursors SET acknowledged = 0, notified = 0")
        tamper(
            tampered,
            "INSERT INTO {s}session_state_events SELECT session_id, 77, position, kind, "
            "actor_type, actor_id, run_id, occurred_at, summary, payload, recorded_at "
            "FROM {s}session_state_events",
        )
        repaired = tampered.audit(rebuild=True)
        assert repaired.rebuilt
        assert repaired.difference_count == 5
        assert tampered.audit().clean
        assert sequences(tampered, CHILD) == [1, 2]
        assert cursor(tampered, MANAGER, CHILD) == (1, 2, 2)
        assert tampered.drain_notices(MANAGER) != []

    def test_rebuild_of_a_clean_store_changes_nothing(self, tampered: SessionAwareness) -> None:
        """R-R2: with nothing to repair, nothing is swapped."""
        spawn(tampered)
        report = tampered.audit(rebuild=True)
        assert report.clean
        assert not report.rebuilt


class TestRecordedFactsBreakingRules:
    def test_a_missing_stored_signal_breaks_contiguous_sequences(
        self, svc: SessionAwareness
    ) -> None:
        """R-L4: replay checks that each session's sequences are contiguous, and says where."""
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal created")
        svc.record_goal_changed(CHILD, summary="goal updated")
        svc.record_goal_changed(CHILD, summary="goal cleared")
        position = {entry.get("sequence"): entry["position"] for entry in svc.history(CHILD)}
        drop_stored_event(svc, position[2])
        report = svc.audit(rebuild=True)  # the live read models follow the log again
        [violation] = report.violations
        assert violation.rule == "R-L4"
        assert violation.position == position[3]
        assert "recorded #3 after head 1" in violation.detail
        assert report.violation_count == 1


class TestReplayStreams:
    def test_the_replay_reads_page_by_page_and_never_holds_more_than_a_page(
        self, svc: SessionAwareness
    ) -> None:
        """R-R2: the event store is read in notification order, `page_size` at a time, and
        each page is applied before the next is read."""
        for n in range(5):
            spawn(svc, child=f"agent:main:subagent:c{n}", run=f"run-{n}")
        reads: list[tuple[int, int]] = []

        class Spy:
            def notifications(self, after: int, limit: int) -> Any:
                page = svc.store.recorder.select_notifications(
                    after, limit, inclusive_of_start=False
                )
                reads.append((after, len(page)))
                return page

            def apply(self, changes: Any) -> None:
                assert len(reads) == applied.__len__() + 1
                applied.append(len(changes))

        applied: list[int] = []
        replay = _Replay(svc.store, 4, None)
        replay.into(Spy())
        total = int(svc.store.recorder.max_notification_id())
        afters = [after for after, _ in reads]
        assert afters == sorted(set(afters))
        assert all(size <= 4 for _, size in reads)
        assert reads[-1] == (total, 0)
        assert len(applied) == len(reads) - 1
        assert replay.events == total

    def test_a_page_size_below_one_is_refused(self, svc: SessionAwareness) -> None:
        """R-R2: a replay that could read nothing would report a false clean; it is refused."""
        with pytest.raises(InvalidArgumentError, match="pageSize"):
            svc.audit(page_size=0)
