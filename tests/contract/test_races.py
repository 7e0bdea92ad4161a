"""Commands that race other writers of the same store (ADR 004, ADR 027; R-T3)."""

from __future__ import annotations

from typing import Any

import pytest
from eventsourcing.persistence import RecordConflictError
from structlog.testing import capture_logs

from session_awareness.application import ContentionError, SessionAwarenessError
from session_awareness.application import store as store_module
from session_awareness.application.unit_of_work import UnitOfWork
from tests.conftest import ServiceFactory
from tests.contract.helpers import CHILD, spawn


class TestACommandThatKeepsLosing:
    def test_it_ends_in_a_typed_error_and_saves_nothing(
        self, open_svc: ServiceFactory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """ADR 004, ADR 027: a command whose every attempt loses its race to a writer of
        another process raises `ContentionError` (a `SessionAwarenessError`), never the
        library's `RecordConflictError`; it is logged, and nothing it decided is saved."""
        svc, rival = open_svc(), open_svc()
        spawn(svc)
        monkeypatch.setattr(store_module, "MAX_ATTEMPTS", 4)
        save = UnitOfWork.save

        def loses(uow: Any) -> None:
            if uow._app is svc.store:  # the rival saves first, each time: a genuine lost race
                rival.record_goal_changed(CHILD, summary="goal updated")
            save(uow)

        monkeypatch.setattr(UnitOfWork, "save", loses)
        with capture_logs() as logs, pytest.raises(ContentionError) as raised:
            svc.pin_session(CHILD)
        monkeypatch.undo()
        assert isinstance(raised.value, SessionAwarenessError)
        assert not isinstance(raised.value, RecordConflictError)
        assert raised.value.attempts == 4
        assert [e["attempts"] for e in logs if e["event"] == "command_contended"] == [4]
        rows = {row["sessionKey"]: row for row in svc.sessions_list()}
        assert rows[CHILD]["pinned"] is False
        assert svc.session_status(CHILD)["stateVersion"] == 5
        assert svc.pin_session(CHILD) is True


A, B = "agent:main:subagent:a", "agent:main:subagent:b"


def parents(svc: Any) -> dict[str, str | None]:
    return {row["sessionKey"]: row.get("parentSessionKey") for row in svc.sessions_list()}


class TestSpawnEdgesRacing:
    def test_two_processes_never_close_a_parent_cycle(
        self, open_svc: ServiceFactory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-T3, on both backends: one process records A as B's parent while another, between
        its read and its save, records B as A's parent. Each checked its own edge against
        the ancestry it read; the first to save wins and the other is refused on fresh state
        (logged `signal_rejected`, `parent_cycle`): the sessions never form a cycle."""
        first, second = open_svc(), open_svc()
        first.open_session(A)
        first.open_session(B)
        save, raced = UnitOfWork.save, []

        def racing(uow: Any) -> None:
            if uow._app is first.store and not raced:  # once, between read and save
                raced.append(second.record_child_spawned(A, parent=B, run_id="run-a"))
            save(uow)

        monkeypatch.setattr(UnitOfWork, "save", racing)
        with capture_logs() as logs:
            recorded = first.record_child_spawned(B, parent=A, run_id="run-b")
        monkeypatch.undo()
        assert raced == [1]  # the other process's edge landed first
        assert recorded is None
        refused = [e for e in logs if e["event"] == "signal_rejected"]
        assert [(e["session_key"], e["reason"]) for e in refused] == [(B, "parent_cycle")]
        assert parents(first)[A] == B
        assert parents(first)[B] is None
        assert first.audit().clean
