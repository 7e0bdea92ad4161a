"""The audit's replay looks ahead for the events that delete retained rows and does not write
the rows they delete (R-R2, `application/replay.py`'s `RowsAhead`).

The rebuilt tables must end exactly as without the skip, on both backends: each story here
counts the rows skipped (`audit_finished`'s `rows_unretained`) and audits the store clean;
a row that no later event deletes is never skipped, and a damaged live row is still found.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection, Sequence
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.persistence import Cipher, Notification
from structlog.testing import capture_logs

from session_awareness.application import SessionAwareness
from session_awareness.application import replay as replay_module
from session_awareness.application.audit_report import AuditReport
from session_awareness.application.replay import DELETION_TOPICS, LOOK_STEP, RowsAhead
from tests.conftest import FakeClock, ServiceFactory
from tests.contract.helpers import CHILD, MANAGER, OTHER, sequences, spawn
from tests.ops.helpers import session_id, tamper


def audited(svc: SessionAwareness, **options: Any) -> tuple[AuditReport, int]:
    """The audit's report and how many signals it replayed without their row."""
    with capture_logs() as logs:
        report = svc.audit(**options)
    [finished] = [e for e in logs if e["event"] == "audit_finished"]
    return report, int(finished["rows_unretained"])


def assert_clean(report: AuditReport) -> None:
    assert report.difference_count == 0, report.differences
    assert report.violation_count == 0


def positions(svc: SessionAwareness, key: str, topic_end: str) -> list[int]:
    """The notification ids of `key`'s stored events whose topic ends with `topic_end`."""
    sid = session_id(key)
    stored = svc.store.recorder.select_notifications(1, 10_000)
    return [n.id for n in stored if n.originator_id == sid and n.topic.endswith(topic_end)]


class TestRowsALaterEventDeletesAreSkipped:
    def test_a_row_a_prune_in_a_later_page_deletes_is_skipped_and_the_audit_is_clean(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-R2: rows pruned by age in a later page are not written by the replay; the
        rebuilt tables still equal the live ones."""
        spawn(svc)  # 1: the spawn
        svc.record_goal_changed(CHILD, summary="goal created")  # 2
        svc.open_session(OTHER)
        for _ in range(5):  # later pages
            svc.record_goal_changed(OTHER, summary="goal updated")
        clock.advance(days=31)
        assert svc.prune()["removedRows"] == 2 + 5
        report, skipped = audited(svc, page_size=2)
        assert_clean(report)
        assert skipped == 2 + 5

    def test_a_row_above_the_prunes_watermark_is_written(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-R2, R-R1: a prune deletes rows up to its watermark only; the row above it is
        replayed and kept, so a skip that ignored the watermark would show as missing."""
        spawn(svc)  # 1
        svc.record_goal_changed(CHILD, summary="goal created")  # 2
        clock.advance(days=20)
        svc.record_goal_changed(CHILD, summary="goal updated")  # 3
        clock.advance(days=11)
        assert svc.prune()["watermarks"][0]["watermark"] == 2
        report, skipped = audited(svc, page_size=1)
        assert_clean(report)
        assert report.tables["session_state_events"].rebuilt_rows == 1
        assert skipped == 2
        assert sequences(svc, CHILD) == [3]

    def test_a_deleted_session_opened_again_keeps_the_rows_of_its_new_life(
        self, svc: SessionAwareness
    ) -> None:
        """R-R2, R-L4: a delete removes the rows of the life before it; the session opened
        again records on from its head, and those rows are replayed and kept."""
        spawn(svc)  # 1
        svc.record_goal_changed(CHILD, summary="goal created")  # 2
        svc.delete_session(CHILD)
        svc.open_session(CHILD, kind="subagent")
        svc.record_goal_changed(CHILD, summary="goal updated")  # 3
        svc.record_goal_changed(CHILD, summary="goal updated")  # 4
        report, skipped = audited(svc, page_size=2)
        assert_clean(report)
        assert skipped == 2
        assert sequences(svc, CHILD) == [3, 4]
        assert report.tables["session_state_events"].rebuilt_rows == 2

    def test_a_reset_deletes_no_row_and_none_is_skipped(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-R2: a reset is not a deletion; only the later prune's rows are skipped."""
        spawn(svc)  # 1
        svc.record_goal_changed(CHILD, summary="goal created")  # 2
        svc.reset_session(CHILD)
        svc.record_goal_changed(CHILD, summary="goal updated")  # 3
        report, skipped = audited(svc, page_size=1)
        assert_clean(report)
        assert skipped == 0
        clock.advance(days=31)
        svc.record_goal_changed(CHILD, summary="goal updated")  # 4
        svc.prune()
        report, skipped = audited(svc, page_size=1)
        assert_clean(report)
        assert skipped == 3
        assert sequences(svc, CHILD) == [4]

    def test_rows_the_row_cap_deletes_are_skipped(self, open_svc: ServiceFactory) -> None:
        """R-R2, R-R1: the prune's row cap (newest rows across sessions) raises watermarks
        a replay sees ahead, as the age limit's do."""
        svc = open_svc(retention_rows=2)
        spawn(svc)
        spawn(svc, child=OTHER, run="run-2")
        for _ in range(3):
            svc.record_goal_changed(CHILD, summary="goal updated")
            svc.record_goal_changed(OTHER, summary="goal updated")
        svc.prune()
        report, skipped = audited(svc, page_size=3)
        assert_clean(report)
        assert report.tables["session_state_events"].rebuilt_rows == 2
        assert skipped == 8 - 2


class TestTheWindowsEdge:
    @pytest.mark.parametrize(("beyond", "expected"), [(0, 1), (1, 0)])
    def test_a_deletion_exactly_at_the_windows_end_counts_and_one_past_it_does_not(
        self,
        svc: SessionAwareness,
        monkeypatch: pytest.MonkeyPatch,
        beyond: int,
        expected: int,
    ) -> None:
        """R-R2: a signal's row is skipped when its deletion is at most the window's length
        of positions after it; one position further, the row is written and deleted by the
        replay as any other. The audit is clean either way."""
        svc.open_session(MANAGER)
        svc.open_session(CHILD)
        svc.record_goal_changed(CHILD, summary="goal created")
        svc.open_session(OTHER)
        for _ in range(4):
            svc.record_goal_changed(OTHER, summary="goal updated")
        svc.delete_session(CHILD)
        [signal] = positions(svc, CHILD, ".GoalChanged")
        [deletion] = positions(svc, CHILD, ".Deleted")
        monkeypatch.setattr(replay_module, "LOOK_AHEAD", deletion - signal - beyond)
        report, skipped = audited(svc, page_size=1)
        assert_clean(report)
        assert skipped == expected


class TestADamagedStoreIsStillReported:
    @pytest.fixture
    def pruned(self, svc: SessionAwareness, clock: FakeClock) -> SessionAwareness:
        """CHILD's rows 1-2 pruned (skipped by the replay), its row 3 retained."""
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal created")
        clock.advance(days=20)
        svc.record_goal_changed(CHILD, summary="goal updated")
        clock.advance(days=11)
        svc.prune()
        return svc

    def test_a_live_row_a_prune_should_have_deleted_is_reported_and_repaired(
        self, pruned: SessionAwareness
    ) -> None:
        """R-R2: the row the replay skips is the row the live table must not have: left
        behind by a prune that failed, it is reported as unexpected, and a rebuild
        removes it."""
        tamper(
            pruned,
            "INSERT INTO {s}session_state_events (session_id, sequence, position, kind, "
            "actor_type, occurred_at, summary, recorded_at) VALUES (?, 2, 3, 'goal_changed', "
            "'agent', 0, 'goal created', 0)",
            session_id(CHILD),
        )
        report, skipped = audited(pruned)
        assert skipped == 2
        [difference] = report.differences
        assert (difference.table, difference.problem) == ("session_state_events", "unexpected")
        assert difference.key["sequence"] == 2
        assert audited(pruned, rebuild=True)[0].rebuilt
        assert_clean(audited(pruned)[0])

    def test_a_retained_live_row_changed_or_lost_is_reported(
        self, pruned: SessionAwareness
    ) -> None:
        """R-R2: the retained row beside the skipped ones is compared as before: changed,
        then lost, each is reported."""
        sid = session_id(CHILD)
        tamper(
            pruned,
            "UPDATE {s}session_state_events SET summary = 'forged' WHERE session_id = ?",
            sid,
        )
        [changed] = audited(pruned)[0].differences
        assert (changed.problem, changed.key["sequence"]) == ("changed", 3)
        tamper(pruned, "DELETE FROM {s}session_state_events WHERE session_id = ?", sid)
        [missing] = audited(pruned)[0].differences
        assert (missing.problem, missing.key["sequence"]) == ("missing", 3)
        pruned.audit(rebuild=True)
        assert sequences(pruned, CHILD) == [3]


class _ReversingCipher(Cipher):
    """A stand-in cipher (the library's needs a package this project does not ship): the
    stored state is not JSON until it is deciphered."""

    def __init__(self, environment: Any = None) -> None:
        pass

    def encrypt(self, plaintext: bytes) -> bytes:
        return plaintext[::-1]

    def decrypt(self, ciphertext: bytes) -> bytes:
        return ciphertext[::-1]


class TestACipheredAndCompressedStore:
    def test_its_deletions_are_deciphered_and_decompressed_before_their_rows_are_skipped(
        self, open_svc: ServiceFactory, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-R2: the look-ahead decodes the deletions as the page's events are decoded (a
        cipher, a compressor: the library's settings), so it finds their watermarks in
        such a store too."""
        monkeypatch.setenv("COMPRESSOR_TOPIC", "eventsourcing.compressor:ZlibCompressor")
        monkeypatch.setenv("CIPHER_TOPIC", f"{__name__}:_ReversingCipher")
        svc = open_svc()
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal created")
        clock.advance(days=31)
        svc.prune()
        [deletion] = positions(svc, CHILD, ".HistoryPruned")
        [stored] = svc.store.recorder.select_notifications(deletion, 1)
        assert zlib.decompress(stored.state[::-1]).startswith(b"{")
        report, skipped = audited(svc, page_size=1)
        assert_clean(report)
        assert skipped == 2


class _Deletions:
    """A `LookAhead` over a made-up log where every position is a deletion of one of a few
    sessions; it keeps the ranges it was asked for."""

    def __init__(self, last: int) -> None:
        self.last, self.asked = last, list[tuple[int, int]]()

    def notifications_of(
        self, topics: Collection[str], after: int, upto: int
    ) -> Sequence[Notification]:
        self.asked.append((after, upto))
        return [
            Notification(
                id=n, originator_id=UUID(int=n % 7), originator_version=n,
                topic=DELETION_TOPICS[0], state=b"",
            )
            for n in range(after + 1, min(upto, self.last) + 1)
        ]  # fmt: skip


class TestTheLookAheadIsBounded:
    def test_it_reads_each_position_once_and_keeps_no_more_than_a_window(self) -> None:
        """R-R2: the look-ahead's memory does not grow with the store: it keeps the
        deletions past the page and within its reach, and reads each position once."""
        from session_awareness.domain.session import Session  # noqa: PLC0415

        def decode(n: Notification) -> Any:
            event: Any = object.__new__(Session.HistoryPruned)
            object.__setattr__(
                event, "__dict__", {"originator_id": n.originator_id, "watermark": n.id}
            )
            return event

        window, page, last = 500, 50, 20_000
        source = _Deletions(last)
        rows = RowsAhead(source, decode, window)
        for first in range(0, last, page):
            rows.reach(first, first + page)
            kept = [at for deletions in rows.ahead.values() for at, _ in deletions]
            assert all(first - LOOK_STEP - page < at <= first + page + window + LOOK_STEP
                       for at in kept)  # fmt: skip
            assert len(kept) <= window + LOOK_STEP + page
        reads = [after for after, _ in source.asked]
        assert reads == [0, *(upto for _, upto in source.asked[:-1])]
