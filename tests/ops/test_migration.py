"""A store written by the previous version opens, its read models are rebuilt from the event
store on start, and it audits clean (R-R2)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from session_awareness.application import SessionAwareness, open_service
from tests.conftest import FakeClock, ServiceFactory
from tests.contract.helpers import CHILD, MANAGER, spawn

#: Written by tests/ops/fixtures/make_previous_store.py with version 0.1.0 as it last landed
#: (before the registry kept channels, runs and marks, and before the sandbox, described,
#: pin and archive events).
PREVIOUS_STORE = Path(__file__).parent / "fixtures" / "previous-store.db"


def rows_by_key(svc: SessionAwareness) -> dict[str, dict[str, Any]]:
    return {row["sessionKey"]: row for row in svc.sessions_list()}


def migrations(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == "read_models_migrated"]


class TestAStoreOfThePreviousVersion:
    @pytest.fixture
    def previous(self, tmp_path: Path) -> str:
        path = tmp_path / "previous.db"
        shutil.copy(PREVIOUS_STORE, path)
        return f"sqlite:///{path}"

    def test_it_opens_with_channels_and_run_outcomes_derived_from_its_events(
        self, previous: str, clock: FakeClock
    ) -> None:
        """The rows know what the old events say: the latest human channel, each child's run
        status, and no marks."""
        with capture_logs() as logs:
            svc = open_service(previous, clock=clock)
        try:
            rows = rows_by_key(svc)
            assert len(migrations(logs)) == 1
            running = rows["agent:main:subagent:running"]
            assert (running["channel"], running["runStatus"], running["lastRunAborted"]) == (
                "telegram",
                "running",
                False,
            )
            assert rows["agent:main:subagent:done"]["runStatus"] == "completed"
            stopped = rows["agent:main:subagent:stopped"]
            assert (stopped["runStatus"], stopped["lastRunAborted"]) == ("cancelled", True)
            assert rows["agent:main:group:ops"]["channel"] == "slack"
            assert "runStatus" not in rows["agent:main:main"]
            assert "agent:main:cron:gone" not in rows
            assert all(not r["pinned"] and not r["archived"] for r in rows.values())
            report = svc.audit()
            assert report.clean, report.as_dict()
        finally:
            svc.close()

    def test_it_migrates_once_and_keeps_working_afterwards(
        self, previous: str, clock: FakeClock
    ) -> None:
        """A second start finds nothing to migrate; new marks and runs go on as usual."""
        open_service(previous, clock=clock).close()
        with capture_logs() as logs:
            svc = open_service(previous, clock=clock)
        try:
            assert migrations(logs) == []
            svc.pin_session("agent:main:subagent:done")
            svc.record_run_terminal("agent:main:subagent:running", run_id="run-a", outcome="ok")
            rows = rows_by_key(svc)
            assert rows["agent:main:subagent:done"]["pinned"] is True
            assert rows["agent:main:subagent:running"]["runStatus"] == "completed"
            assert svc.audit().clean
        finally:
            svc.close()

    def test_its_pending_notices_and_deltas_survive_and_drain_exactly(
        self, previous: str, clock: FakeClock
    ) -> None:
        """R-N4, R-N6, R-S2: the notices the previous version left pending are still pending,
        byte for byte, reconcile to the same delta, and drain as R-N3 says."""
        with open_service(previous, clock=clock) as svc:
            running = "agent:main:subagent:running"
            assert svc.pending_notices(MANAGER) == [
                f'Session "{running}" changed (other actor). Reconcile before acting: '
                f'session_status sessionKey "{running}" changesSince 1.'
            ]
            assert len(svc.pending_notices("agent:ops:main")) == 1
            status = svc.session_status(running, changes_since=1)
            assert status["stateVersion"] == 2
            changes = status["stateChanges"]
            assert [event["sequence"] for event in changes["events"]] == [2]
            assert changes["events"][0]["summary"] == "human message via telegram"
            assert changes["historyGap"] is False
            assert len(svc.drain_notices(MANAGER)) == 1
            assert svc.pending_notices(MANAGER) == []
            svc.record_human_direct_message(running, channel="telegram")
            assert len(svc.pending_notices(MANAGER)) == 1
            assert svc.audit().clean


class TestReadModelsWithoutTheActivityRows:
    def test_a_store_missing_the_rows_of_this_version_is_rebuilt_on_start(
        self, open_svc: ServiceFactory, database_url: str
    ) -> None:
        """On both backends: read models without `session_activity` rows (an earlier version
        wrote them, or a migration did not finish) are rebuilt when the service starts."""
        svc = open_svc()
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")
        recorder: Any = svc.store.recorder
        with recorder.datastore.transaction(commit=True) as c:
            c.execute(recorder.sql("DELETE FROM {s}session_activity"))
        assert svc.read_model.read_models_outdated()
        svc.close()
        with capture_logs() as logs:
            again = open_svc()
        assert len(migrations(logs)) == 1
        assert not again.read_model.read_models_outdated()
        rows = rows_by_key(again)
        assert (rows[CHILD]["channel"], rows[CHILD]["runStatus"]) == ("telegram", "running")
        assert "runStatus" not in rows[MANAGER]
