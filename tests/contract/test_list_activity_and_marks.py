"""What `sessions_list` rows know from the log (channel, run status, aborted runs) and the
host's marks (label, pin, archive), on both backends; every test ends with the rebuild check
of `open_svc`, so the new columns are rebuilt exactly (R-T1, R-R2)."""

from __future__ import annotations

from typing import Any

import pytest

from session_awareness.application import (
    InvalidArgumentError,
    SessionAwareness,
    UnknownSessionError,
)
from tests.conftest import FakeClock
from tests.contract.helpers import CHILD, MANAGER, OTHER, notice, spawn


def row(svc: SessionAwareness, key: str, **filters: Any) -> dict[str, Any]:
    [found] = [r for r in svc.sessions_list(**filters) if r["sessionKey"] == key]
    return found


def keys(svc: SessionAwareness, **filters: Any) -> list[str]:
    return [r["sessionKey"] for r in svc.sessions_list(**filters)]


class TestChannel:
    def test_a_row_shows_the_channel_of_the_latest_human_turn(self, svc: SessionAwareness) -> None:
        """R-T1: `channel` is the latest human turn's; a session without one has none."""
        spawn(svc)
        assert "channel" not in row(svc, CHILD)
        svc.record_human_direct_message(CHILD, channel="telegram")
        svc.record_human_direct_message(CHILD, channel="slack")
        assert row(svc, CHILD)["channel"] == "slack"
        assert "channel" not in row(svc, MANAGER)


class TestRunStatus:
    def test_a_spawned_child_is_running_until_its_run_ends(self, svc: SessionAwareness) -> None:
        """R-T1: `running` while the spawned run has no terminal event, then its outcome."""
        spawn(svc)
        assert (row(svc, CHILD)["runStatus"], row(svc, CHILD)["lastRunAborted"]) == (
            "running",
            False,
        )
        svc.record_run_terminal(CHILD, run_id="run-1", outcome="ok")
        assert (row(svc, CHILD)["runStatus"], row(svc, CHILD)["lastRunAborted"]) == (
            "completed",
            False,
        )

    @pytest.mark.parametrize(
        ("outcome", "status", "aborted"),
        [
            ("error", "failed", False),
            ("timeout", "timeout", True),
            ("cancelled", "cancelled", True),
        ],
    )
    def test_a_failed_run_shows_its_precise_outcome(
        self, svc: SessionAwareness, outcome: str, status: str, aborted: bool
    ) -> None:
        """R-T1, R-L5: failed, timeout or cancelled; aborted when cancelled or timed out."""
        spawn(svc)
        svc.record_run_terminal(CHILD, run_id="run-1", outcome=outcome)
        assert (row(svc, CHILD)["runStatus"], row(svc, CHILD)["lastRunAborted"]) == (
            status,
            aborted,
        )

    def test_a_session_that_never_ran_as_a_child_has_no_run_fields(
        self, svc: SessionAwareness
    ) -> None:
        """R-T1: `runStatus` and `lastRunAborted` are absent for a session never spawned."""
        spawn(svc)
        assert {"runStatus", "lastRunAborted"}.isdisjoint(row(svc, MANAGER))

    def test_a_report_for_another_run_does_not_end_the_running_one(
        self, svc: SessionAwareness
    ) -> None:
        """A terminal report naming a run other than the running one leaves it running."""
        spawn(svc)
        svc.record_run_terminal(CHILD, run_id="run-elsewhere", outcome="error")
        assert row(svc, CHILD)["runStatus"] == "running"
        svc.record_run_terminal(CHILD, run_id="run-1", outcome="timeout")
        assert row(svc, CHILD)["runStatus"] == "timeout"

    def test_a_new_spawn_of_the_same_child_runs_again(self, svc: SessionAwareness) -> None:
        """The latest run counts: a second spawn after an ended run is running."""
        spawn(svc)
        svc.record_run_terminal(CHILD, run_id="run-1", outcome="cancelled")
        svc.record_child_spawned(CHILD, parent=MANAGER, run_id="run-2")
        assert (row(svc, CHILD)["runStatus"], row(svc, CHILD)["lastRunAborted"]) == (
            "running",
            False,
        )


class TestMarks:
    def test_a_label_is_set_and_cleared_and_the_label_filter_follows(
        self, svc: SessionAwareness
    ) -> None:
        """The host labels a session through the embedding API; None clears it."""
        spawn(svc)
        assert svc.set_session_label(CHILD, "researcher") is True
        assert svc.set_session_label(CHILD, "researcher") is False
        assert keys(svc, label="researcher") == [CHILD]
        assert svc.set_session_label(CHILD, None) is True
        assert row(svc, CHILD)["label"] is None

    def test_a_pin_is_shown_on_the_row_and_can_be_lifted(self, svc: SessionAwareness) -> None:
        """`pin_session` / `unpin_session`: `pinned` on the row; True only when it changed."""
        spawn(svc)
        assert row(svc, CHILD)["pinned"] is False
        assert svc.pin_session(CHILD) is True
        assert svc.pin_session(CHILD) is False
        assert row(svc, CHILD)["pinned"] is True
        assert svc.unpin_session(CHILD) is True
        assert row(svc, CHILD)["pinned"] is False

    def test_an_archived_session_is_listed_only_when_archived_ones_are_asked_for(
        self, svc: SessionAwareness
    ) -> None:
        """`archived`: active sessions by default, `archived=True` lists the archived ones."""
        spawn(svc)
        svc.archive_session(CHILD)
        assert keys(svc) == [MANAGER]
        assert keys(svc, archived=True) == [CHILD]
        assert row(svc, CHILD, archived=True)["archived"] is True
        svc.unarchive_session(CHILD)
        assert set(keys(svc)) == {MANAGER, CHILD}
        assert keys(svc, archived=True) == []

    def test_an_archived_session_keeps_its_log_and_its_watchers_cursors(
        self, svc: SessionAwareness
    ) -> None:
        """An archived session keeps its log and cursors: a change still notifies its parent
        and `session_status` still answers."""
        since = spawn(svc)
        svc.archive_session(CHILD)
        svc.record_human_direct_message(CHILD, channel="telegram")
        assert svc.pending_notices(MANAGER) == [notice(CHILD, since)]
        assert svc.session_status(CHILD, changes_since=0)["stateVersion"] == 2
        assert row(svc, MANAGER)["childSessionKeys"] == [CHILD]

    def test_marks_are_in_the_history_and_do_not_move_the_update_time(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """Marks are Session events (visible in `history`); pins and archives are host
        bookkeeping, so `updatedAt` stays; a label is a described change and moves it."""
        spawn(svc)
        before = row(svc, CHILD)["updatedAt"]
        clock.advance(minutes=1)
        svc.pin_session(CHILD)
        svc.archive_session(CHILD)
        svc.unarchive_session(CHILD)
        assert row(svc, CHILD)["updatedAt"] == before
        svc.set_session_label(CHILD, "researcher")
        events = [(e["event"], e.get("pinned", e.get("archived"))) for e in svc.history(CHILD)]
        assert events[-4:] == [
            ("pin_set", True),
            ("archive_set", True),
            ("archive_set", False),
            ("described", None),
        ]

    def test_a_reopened_session_starts_unmarked_and_without_a_run(
        self, svc: SessionAwareness
    ) -> None:
        """A deleted session's key opened again is a new life: no pin, no archive, no run."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")
        svc.pin_session(CHILD)
        svc.archive_session(CHILD)
        svc.delete_session(CHILD)
        svc.open_session(CHILD)
        reopened = row(svc, CHILD)
        assert (reopened["pinned"], reopened["archived"]) == (False, False)
        assert {"channel", "runStatus", "lastRunAborted"}.isdisjoint(reopened)

    def test_marking_an_unknown_or_deleted_session_is_refused(self, svc: SessionAwareness) -> None:
        """An unknown or deleted session is `UnknownSessionError`; a bad label names the
        field."""
        spawn(svc)
        svc.open_session(OTHER)
        svc.delete_session(OTHER)
        for mark in (svc.pin_session, svc.archive_session, svc.unpin_session):
            with pytest.raises(UnknownSessionError):
                mark(OTHER)
        with pytest.raises(UnknownSessionError):
            svc.pin_session("agent:main:subagent:never")
        with pytest.raises(InvalidArgumentError) as refused:
            svc.set_session_label(CHILD, "two\nlines")
        assert refused.value.field == "label"

    def test_the_archived_filter_must_be_a_boolean(self, svc: SessionAwareness) -> None:
        with pytest.raises(InvalidArgumentError) as refused:
            svc.sessions_list(archived="yes")  # type: ignore[arg-type]
        assert refused.value.field == "archived"


class TestAuditOfTheNewColumns:
    def test_an_audit_of_runs_channels_and_marks_is_clean(self, svc: SessionAwareness) -> None:
        """R-R2: the rebuilt `session_activity` equals the live one, row for row."""
        spawn(svc)
        spawn(svc, OTHER, run="run-2")
        svc.record_run_terminal(OTHER, run_id="run-2", outcome="cancelled")
        svc.record_human_direct_message(CHILD, channel="telegram")
        svc.pin_session(CHILD)
        svc.archive_session(OTHER)
        report = svc.audit()
        assert report.clean, report.as_dict()
        summary = report.tables["session_activity"]
        assert summary.live_rows == summary.rebuilt_rows == 3

    def test_a_rebuild_keeps_the_order_of_each_column_group_of_one_session(
        self, svc: SessionAwareness
    ) -> None:
        """R-R2: one session's channel, runs and marks interleaved, and another's reopening
        between its channels, rebuild in bulk (one page; the channel writes joined across
        the run reports they commute with, never across a run report of their own group or
        a reopening) to the rows the saves wrote one at a time."""
        spawn(svc)
        for number, channel in enumerate(("telegram", "slack", "chat")):
            svc.record_human_direct_message(CHILD, channel=channel)
            svc.record_run_terminal(CHILD, run_id=f"run-{number + 1}", outcome="error")
            svc.record_child_spawned(CHILD, parent=MANAGER, run_id=f"run-{number + 2}")
            svc.pin_session(CHILD)
            svc.unpin_session(CHILD)
        svc.record_run_terminal(CHILD, run_id="run-4", outcome="cancelled")
        svc.record_human_direct_message(CHILD, channel="email")
        child = row(svc, CHILD)
        assert (child["channel"], child["runStatus"], child["pinned"]) == (
            "email",
            "cancelled",
            False,
        )
        spawn(svc, OTHER, run="run-9")
        svc.record_human_direct_message(OTHER, channel="telegram")
        svc.pin_session(OTHER)
        svc.delete_session(OTHER)
        svc.open_session(OTHER)
        assert svc.watch(MANAGER, OTHER)  # an audience, or the turn is not recorded
        assert svc.record_human_direct_message(OTHER, channel="voice") is not None
        svc.archive_session(OTHER)
        reopened = row(svc, OTHER, archived=True)
        assert (reopened["channel"], reopened["pinned"], reopened["archived"]) == (
            "voice",
            False,
            True,
        )
        assert "runStatus" not in reopened
        report = svc.audit()
        assert report.clean, report.as_dict()
