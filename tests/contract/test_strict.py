"""The caller's mistakes are loud, and raise on a strict service (R-L9); commands and queries
refuse a key the service has never seen (R-L9); one vocabulary for a run's end (R-L5)."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from session_awareness.application import (
    InvalidArgumentError,
    ServiceClosedError,
    SessionAwareness,
    UnknownSessionError,
)
from tests.conftest import ServiceFactory
from tests.contract.helpers import CHILD, MANAGER, PEER, cursor, notice, spawn

TYPO = "agent:main:mian"


def warnings_of(logs: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == event and e["log_level"] == "warning"]


@pytest.fixture
def strict(open_svc: ServiceFactory) -> SessionAwareness:
    return open_svc(strict=True)


class TestLoudByDefault:
    def test_a_producer_on_a_misspelt_key_warns_naming_the_key(self, svc: SessionAwareness) -> None:
        """R-L9: a key that names no session is a WARNING naming it; nothing is recorded."""
        spawn(svc)
        with capture_logs() as logs:
            assert svc.record_goal_changed(TYPO, summary="goal updated") is None
        [warning] = warnings_of(logs, "signal_rejected")
        assert (warning["session_key"], warning["field"]) == (TYPO, "key")
        assert warning["reason"] == "unknown_session"

    def test_a_value_outside_the_vocabulary_warns_naming_the_field(
        self, svc: SessionAwareness
    ) -> None:
        """R-L9: `outcome`, `actor_type`, `occurred_at`: each refusal names its field."""
        spawn(svc)
        with capture_logs() as logs:
            assert svc.record_run_terminal(CHILD, run_id="r", outcome="finished") is None  # type: ignore[arg-type]
            assert (
                svc.record_goal_changed(CHILD, summary="goal updated", actor_type="robot")  # type: ignore[arg-type]
                is None
            )
            assert svc.record_human_direct_message(CHILD, channel="x", occurred_at="now") is None  # type: ignore[arg-type]
        fields = [e["field"] for e in warnings_of(logs, "signal_rejected")]
        assert fields == ["outcome", "actor_type", "occurred_at"]

    def test_a_spawn_on_a_parent_never_opened_is_recorded_with_a_warning(
        self, svc: SessionAwareness
    ) -> None:
        """R-L9: a host that records the spawn before opening the parent keeps working (the
        parent's cursor is seeded), and is told, since the same call with a typo would leave
        the real parent without a cursor."""
        with capture_logs() as logs:
            assert svc.record_child_spawned(CHILD, parent=TYPO, run_id="r1") == 1
        [warning] = warnings_of(logs, "spawn_parent_unknown")
        assert (warning["field"], warning["parent"]) == ("parent", TYPO)
        assert cursor(svc, TYPO, CHILD) == (1, 1, 1)

    def test_an_opened_parent_gives_no_warning(self, svc: SessionAwareness) -> None:
        """R-L9: the parent is known once opened: the spawn is quiet."""
        with capture_logs() as logs:
            spawn(svc)
        assert [e for e in logs if e["log_level"] == "warning"] == []

    def test_a_producer_after_close_warns_and_returns_none(self, svc: SessionAwareness) -> None:
        """R-L9: a service that is not strict logs the call and returns None."""
        spawn(svc)
        svc.close()
        with capture_logs() as logs:
            assert svc.record_goal_changed(CHILD, summary="goal updated") is None
        [warning] = warnings_of(logs, "signal_rejected")
        assert warning["reason"] == "closed"


class TestStrict:
    def test_an_unknown_key_raises(self, strict: SessionAwareness) -> None:
        """R-L9: on a strict service a producer on an unknown key raises, naming it."""
        with pytest.raises(UnknownSessionError) as raised:
            strict.record_goal_changed(TYPO, summary="goal updated")
        assert raised.value.key == TYPO

    def test_a_value_outside_the_vocabulary_raises_naming_the_field(
        self, strict: SessionAwareness
    ) -> None:
        """R-L9: `InvalidArgumentError.field` names the producer's argument."""
        spawn(strict)
        cases = [
            lambda: strict.record_run_terminal(CHILD, run_id="r", outcome="finished"),  # type: ignore[arg-type]
            lambda: strict.record_run_terminal(CHILD, run_id=" ", outcome="completed"),
            lambda: strict.record_goal_changed(CHILD, summary="my secret plan"),
            lambda: strict.record_human_direct_message(CHILD, channel="x", turns=0),
            lambda: strict.record_compacted(CHILD, operation_id=7),  # type: ignore[arg-type]
        ]
        fields = []
        for call in cases:
            with pytest.raises(InvalidArgumentError) as raised:
                call()
            fields.append(raised.value.field)
        assert fields == ["outcome", "run_id", "summary", "turns", "operation_id"]

    def test_a_spawn_on_a_parent_never_opened_raises_and_records_nothing(
        self, strict: SessionAwareness
    ) -> None:
        """R-L9: a strict service knows a parent once it is opened; a spawn before that (or
        on a typo) raises `UnknownSessionError` naming the parent, and the child is not
        opened."""
        strict.open_session(MANAGER)
        with pytest.raises(UnknownSessionError) as raised:
            strict.record_child_spawned(CHILD, parent=TYPO, run_id="r1")
        assert raised.value.key == TYPO
        with pytest.raises(UnknownSessionError):
            strict.session_status(CHILD)
        assert strict.read_model.cursors_of_watcher(TYPO, pending_only=False) == []
        assert strict.record_child_spawned(CHILD, parent=MANAGER, run_id="r1") == 1
        assert cursor(strict, MANAGER, CHILD) == (1, 1, 1)

    def test_a_parent_refused_by_the_rules_raises_naming_the_parent(
        self, strict: SessionAwareness
    ) -> None:
        """R-L9, R-T3: a spawn that would replace the child's parent raises."""
        spawn(strict)
        strict.open_session(PEER)
        with pytest.raises(InvalidArgumentError) as raised:
            strict.record_child_spawned(CHILD, parent=PEER, run_id="r2")
        assert raised.value.field == "parent"

    def test_the_gate_and_repeats_still_return_none(self, strict: SessionAwareness) -> None:
        """R-L9, R-L6, R-L5: expected skips are not mistakes: None, at INFO."""
        strict.open_session(PEER)
        with capture_logs() as logs:
            assert strict.record_human_direct_message(PEER, channel="chat") is None
            spawn(strict)
            assert strict.record_child_spawned(CHILD, parent=MANAGER, run_id="run-1") is None
            assert strict.record_run_terminal(CHILD, run_id="x", outcome="completed") == 2
            assert strict.record_run_terminal(CHILD, run_id="x", outcome="completed") is None
        skipped = [e["reason"] for e in logs if e["event"] == "signal_skipped"]
        assert skipped == ["no_parent_or_watcher", "duplicate", "duplicate"]
        assert [e for e in logs if e["log_level"] == "warning"] == []

    def test_a_producer_after_close_raises(self, strict: SessionAwareness) -> None:
        """R-L9: on a strict service, a producer after `close()` raises."""
        spawn(strict)
        strict.close()
        with pytest.raises(ServiceClosedError):
            strict.record_goal_changed(CHILD, summary="goal updated")

    def test_a_storage_failure_never_raises(self, tmp_path: Any, clock: Any) -> None:
        """R-L9, R-L8: strict is about the caller's mistakes: a store that refuses the write
        (a read-only SQLite file) still answers None."""
        from session_awareness.application import open_service  # noqa: PLC0415

        url = "sqlite:///" + str(tmp_path / "ro.db")
        with open_service(url, clock=clock) as svc:
            spawn(svc)
        with open_service(url + "?mode=ro", clock=clock, strict=True) as svc:
            assert svc.strict
            assert svc.record_goal_changed(CHILD, summary="goal updated") is None


class TestUnknownKeys:
    def test_watch_and_unwatch_by_an_unknown_watcher_raise(self, svc: SessionAwareness) -> None:
        """R-L9: a watcher the service has never seen is refused as the CLI refuses it."""
        spawn(svc)
        with pytest.raises(UnknownSessionError):
            svc.watch(TYPO, CHILD)
        with pytest.raises(UnknownSessionError):
            svc.unwatch(TYPO, CHILD)
        assert cursor(svc, TYPO, CHILD) is None

    def test_notices_of_a_key_never_seen_raise(self, svc: SessionAwareness) -> None:
        """R-L9: `pending_notices`/`drain_notices` of a key with no session and no cursor
        raise; a known one with nothing pending answers `[]`."""
        spawn(svc)
        for call in (svc.pending_notices, svc.drain_notices):
            with pytest.raises(UnknownSessionError):
                call(TYPO)
            with pytest.raises(UnknownSessionError):
                call("not a key\n")
            assert call(MANAGER) == []

    def test_a_cursor_makes_a_watcher_known(self, svc: SessionAwareness) -> None:
        """R-L9: a parent whose child was recorded before it was opened holds a cursor, so
        it is known: its notices answer."""
        svc.record_child_spawned(CHILD, parent=MANAGER, run_id="r1")
        assert svc.pending_notices(MANAGER) == []
        svc.record_goal_changed(CHILD, summary="goal created")
        assert svc.drain_notices(MANAGER) == [notice(CHILD, 1)]

    def test_a_deleted_session_is_still_known(self, svc: SessionAwareness) -> None:
        """R-L9: a key the service has seen answers `[]` after its session was deleted."""
        svc.open_session(PEER)
        svc.delete_session(PEER)
        assert svc.pending_notices(PEER) == []

    def test_a_refused_watch_warns_naming_the_field(self, svc: SessionAwareness) -> None:
        """R-L9, R-W3: an unknown target is still `False` (R-W3), at WARNING."""
        svc.open_session(MANAGER)
        with capture_logs() as logs:
            assert svc.watch(MANAGER, TYPO) is False
            assert svc.watch(MANAGER, MANAGER) is False
        found = [(e["field"], e["reason"]) for e in warnings_of(logs, "watch_refused")]
        assert found == [("target", "unknown_target"), ("target", "self")]


class TestOneVocabulary:
    def test_a_run_end_is_recorded_in_the_rows_words(self, svc: SessionAwareness) -> None:
        """R-L5: `completed`, `failed`, `timeout`, `cancelled` are what `runStatus` shows."""
        svc.open_session(MANAGER)
        for word in ("completed", "failed", "timeout", "cancelled"):
            child = f"agent:main:subagent:{word}"
            svc.record_child_spawned(child, parent=MANAGER, run_id=word)
            assert svc.record_run_terminal(child, run_id=word, outcome=word) == 2  # type: ignore[arg-type]
            assert svc.sessions_list(search=word)[0]["runStatus"] == word

    def test_the_old_words_record_the_same_events(self, svc: SessionAwareness) -> None:
        """R-L5: `ok` and `error` stay accepted; what is stored does not depend on the word."""
        svc.open_session(MANAGER)
        events = []
        for number, (old, new) in enumerate([("ok", "completed"), ("error", "failed")]):
            for word in (old, new):
                child = f"agent:main:subagent:{word}"
                svc.record_child_spawned(child, parent=MANAGER, run_id=f"r{number}")
                svc.record_run_terminal(child, run_id=f"r{number}", outcome=word)  # type: ignore[arg-type]
                [event] = svc.session_status(child, changes_since=1)["stateChanges"]["events"]
                event.pop("occurredAt")
                events.append(event)
        assert events[0] == events[1] and events[2] == events[3]
        assert events[2]["kind"] == "run_failed"

    def test_changes_since_beyond_the_head_answers_no_events(self, svc: SessionAwareness) -> None:
        """R-S1, R-R3: as `session_status`'s docstring says, a `changesSince` at or beyond
        the head is an empty page, not an error."""
        spawn(svc)
        for since in (1, 99):
            changes = svc.session_status(CHILD, changes_since=since)["stateChanges"]
            assert (changes["events"], changes["truncated"]) == ([], False)
