"""The signal log: kinds, fields, producers, gating, time and best effort (R-L1–R-L8)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from eventsourcing.persistence import OperationalError
from structlog.testing import capture_logs

from session_awareness.application import SessionAwareness
from tests.conftest import FakeClock
from tests.contract.helpers import CHILD, MANAGER, PEER, sequences, spawn


def events(svc: SessionAwareness, key: str, since: int = 0) -> list[dict[str, object]]:
    return list(svc.session_status(key, changes_since=since)["stateChanges"]["events"])


class TestSequences:
    def test_sequences_are_contiguous_from_one_across_every_kind(
        self, svc: SessionAwareness
    ) -> None:
        """R-L1, R-L4: every kind takes the next per-session sequence, starting at 1."""
        spawn(svc)
        assert svc.record_human_direct_message(CHILD, channel="telegram") == 2
        assert svc.record_goal_changed(CHILD, summary="goal created") == 3
        assert svc.record_run_terminal(CHILD, run_id="run-1", outcome="ok") == 4
        assert svc.record_compacted(CHILD, operation_id="op-1") == 5
        assert sequences(svc, CHILD) == [1, 2, 3, 4, 5]
        assert [e["kind"] for e in events(svc, CHILD)] == [
            "child_spawned",
            "human_direct_message",
            "goal_changed",
            "run_completed",
            "compacted",
        ]

    def test_sessions_count_their_own_sequences(self, svc: SessionAwareness) -> None:
        """R-L4: sequences are per session."""
        spawn(svc)
        spawn(svc, child="agent:main:subagent:b", run="run-2")
        assert svc.record_goal_changed("agent:main:subagent:b", summary="goal created") == 2
        assert svc.session_status(CHILD)["stateVersion"] == 1

    def test_a_deleted_and_reopened_key_never_reuses_a_sequence(
        self, svc: SessionAwareness
    ) -> None:
        """R-L4: sequences are never reused, not after the session is deleted and reopened."""
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal created")
        svc.delete_session(CHILD)
        svc.open_session(CHILD, kind="subagent", parent=MANAGER)
        assert svc.session_status(CHILD)["stateVersion"] == 2
        assert svc.record_goal_changed(CHILD, summary="goal created") == 3
        changes = svc.session_status(CHILD, changes_since=0)["stateChanges"]
        assert [e["sequence"] for e in changes["events"]] == [3]
        assert changes["historyGap"] is True
        assert svc.session_status(CHILD, changes_since=2)["stateChanges"]["historyGap"] is False


class TestProducers:
    @pytest.mark.parametrize(
        ("outcome", "kind", "summary", "payload"),
        [
            ("ok", "run_completed", "child run completed", None),
            ("error", "run_failed", "child run failed", {"outcome": "error"}),
            ("timeout", "run_failed", "child run timed out", {"outcome": "timeout"}),
            ("cancelled", "run_failed", "child run cancelled", {"outcome": "cancelled"}),
        ],
    )
    def test_a_run_terminal_keeps_its_precise_outcome(
        self,
        svc: SessionAwareness,
        outcome: str,
        kind: str,
        summary: str,
        payload: dict[str, str] | None,
    ) -> None:
        """R-L3, R-L5: run terminal → run_completed or run_failed with payload.outcome."""
        spawn(svc)
        assert svc.record_run_terminal(CHILD, run_id="run-1", outcome=outcome) == 2
        event = events(svc, CHILD, 1)[0]
        assert (event["kind"], event["summary"], event["actorType"]) == (kind, summary, "system")
        assert event.get("payload") == payload

    def test_a_second_terminal_report_for_the_same_run_records_nothing(
        self, svc: SessionAwareness
    ) -> None:
        """R-L5: run terminal is idempotent per run id, whatever the second outcome."""
        spawn(svc)
        assert svc.record_run_terminal(CHILD, run_id="run-1", outcome="error") == 2
        assert svc.record_run_terminal(CHILD, run_id="run-1", outcome="ok") is None
        assert sequences(svc, CHILD) == [1, 2]

    def test_a_compaction_is_recorded_once_per_operation(self, svc: SessionAwareness) -> None:
        """R-L5: compacted is idempotent per compaction operation id."""
        spawn(svc)
        assert svc.record_compacted(CHILD, operation_id="op-1") == 2
        assert svc.record_compacted(CHILD, operation_id="op-1") is None
        assert svc.record_compacted(CHILD, operation_id="op-2") == 3
        assert events(svc, CHILD, 1)[0]["summary"] == "session compacted"

    def test_a_human_message_with_an_idempotency_key_is_recorded_once(
        self, svc: SessionAwareness
    ) -> None:
        """R-L5: a human direct message may carry an idempotency key."""
        spawn(svc)
        assert svc.record_human_direct_message(CHILD, channel="x", idempotency_key="m1") == 2
        assert svc.record_human_direct_message(CHILD, channel="x", idempotency_key="m1") is None
        assert svc.record_human_direct_message(CHILD, channel="x") == 3

    def test_a_blank_channel_is_unknown_and_turns_are_kept_when_above_one(
        self, svc: SessionAwareness
    ) -> None:
        """R-L2, R-L3: `human message via unknown`; payload.turns only when > 1."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="  ", turns=3, actor_id="human:ana")
        svc.record_human_direct_message(CHILD, channel="slack", turns=1)
        first, second = events(svc, CHILD, 1)
        assert first["summary"] == "human message via unknown"
        assert first["payload"] == {"channel": "unknown", "turns": 3}
        assert first["actorId"] == "human:ana"
        assert second["payload"] == {"channel": "slack"}

    @pytest.mark.parametrize(
        "summary",
        [
            "goal created",
            "goal updated",
            "goal status changed to done",
            "goal objective changed",
            "goal cleared",
        ],
    )
    def test_goal_summaries_are_the_fixed_ones(self, svc: SessionAwareness, summary: str) -> None:
        """R-L3: the goal producer's summaries are fixed."""
        spawn(svc)
        assert svc.record_goal_changed(CHILD, summary=summary) == 2
        assert events(svc, CHILD, 1)[0]["summary"] == summary

    @pytest.mark.parametrize(
        "call",
        [
            lambda s: s.record_goal_changed(CHILD, summary="ship the secret plan by friday"),
            lambda s: s.record_goal_changed(CHILD, summary="goal updated", actor_type="robot"),
            lambda s: s.record_human_direct_message(CHILD, channel="tele\ngram" * 40),
            lambda s: s.record_human_direct_message(CHILD, channel="x", turns=0),
            lambda s: s.record_human_direct_message(CHILD, channel="x", turns=2.5),
            lambda s: s.record_run_terminal(CHILD, run_id="run-9", outcome="exploded"),
            lambda s: s.record_compacted(CHILD, operation_id=""),
        ],
    )
    def test_bad_producer_input_records_nothing_and_does_not_raise(
        self, svc: SessionAwareness, call: object
    ) -> None:
        """R-L2, R-L8: content-like or malformed input is refused; the caller gets None."""
        spawn(svc)
        with capture_logs() as logs:
            assert call(svc) is None  # type: ignore[operator]
        assert sequences(svc, CHILD) == [1]
        assert [entry["event"] for entry in logs] == ["signal_rejected"]

    def test_a_multi_line_channel_collapses_to_one_line(self, svc: SessionAwareness) -> None:
        """R-L2: newlines in a summary are collapsed."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="tele\n gram")
        assert events(svc, CHILD, 1)[0]["summary"] == "human message via tele gram"


class TestAudienceGate:
    def test_a_human_message_to_an_unwatched_orphan_records_nothing(
        self, svc: SessionAwareness
    ) -> None:
        """R-L6: recorded only when the session has a parent or a watcher; not an error."""
        svc.open_session(PEER)
        with capture_logs() as logs:
            assert svc.record_human_direct_message(PEER, channel="telegram") is None
        assert svc.session_status(PEER)["stateVersion"] == 0
        assert logs[-1]["event"] == "signal_skipped"

    def test_a_watcher_is_enough_for_a_human_message(self, svc: SessionAwareness) -> None:
        """R-L6: a watched session without a parent records human messages."""
        svc.open_session(PEER)
        svc.open_session(MANAGER)
        svc.watch(MANAGER, PEER)
        assert svc.record_human_direct_message(PEER, channel="telegram") == 1

    def test_other_kinds_are_recorded_without_an_audience(self, svc: SessionAwareness) -> None:
        """R-L6: the gate applies to human direct messages only."""
        svc.open_session(PEER)
        assert svc.record_goal_changed(PEER, summary="goal created") == 1

    def test_an_unknown_session_records_nothing(self, svc: SessionAwareness) -> None:
        """R-L8: a producer on an unknown session reports nothing recorded, no error."""
        assert svc.record_goal_changed("agent:main:ghost", summary="goal created") is None
        assert svc.record_run_terminal("ghost", run_id="r", outcome="ok") is None


class TestTime:
    def test_a_producer_time_is_clamped_into_the_last_day(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-L7: occurredAt is clamped into [now − 24 h, now]; missing → now."""
        now_ms = int(clock.now.timestamp() * 1000)
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="a", occurred_at=now_ms + 3_600_000)
        svc.record_human_direct_message(CHILD, channel="b", occurred_at=0)
        svc.record_human_direct_message(
            CHILD, channel="c", occurred_at=clock.now - timedelta(hours=2)
        )
        svc.record_human_direct_message(CHILD, channel="d")
        times = [e["occurredAt"] for e in events(svc, CHILD, 1)]
        assert times == [now_ms, now_ms - 86_400_000, now_ms - 7_200_000, now_ms]


class TestBestEffort:
    def test_a_storage_failure_is_logged_and_never_raises(
        self, svc: SessionAwareness, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-L8: a failure to append is logged with the session and kind; nothing recorded."""
        spawn(svc)

        def unreachable(*_: object, **__: object) -> None:
            raise OperationalError("database is unreachable")

        monkeypatch.setattr(svc.store.recorder, "insert_events", unreachable)
        with capture_logs() as logs:
            assert svc.record_goal_changed(CHILD, summary="goal created") is None
        failure = next(entry for entry in logs if entry["event"] == "signal_record_failed")
        assert (failure["session_key"], failure["kind"]) == (CHILD, "goal_changed")
        monkeypatch.undo()
        assert sequences(svc, CHILD) == [1]
        assert svc.pending_notices(MANAGER) == []
