"""A store written by the previous version opens, its read models are rebuilt from the event
store on start, and it audits clean (R-R2)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from session_awareness.application import (
    ConfigurationError,
    SessionAwareness,
    StoreVersionError,
    open_service,
)
from session_awareness.application.audit import READ_MODELS_FORMAT, STORE_VERSION
from session_awareness.infrastructure.cli import main
from session_awareness.infrastructure.readmodel.reads import ReadModelQueries
from session_awareness.infrastructure.readmodel.tables import TABLES
from tests.conftest import FakeClock, ServiceFactory
from tests.contract.helpers import CHILD, MANAGER, spawn
from tests.ops.helpers import copied_store, unmark_read_models

#: Written by tests/ops/fixtures/make_previous_store.py with version 0.1.0 as it last landed
#: (before the registry kept channels, runs and marks, and before the sandbox, described,
#: pin and archive events).
PREVIOUS_STORE = Path(__file__).parent / "fixtures" / "previous-store.db"


def opened(url: str, clock: FakeClock) -> SessionAwareness:
    """The service on a copied store, its maintenance run by the test (`maintain()`), never
    by a thread racing it (ADR 038)."""
    return open_service(url, clock=clock, maintenance="manual")


def rows_by_key(svc: SessionAwareness) -> dict[str, dict[str, Any]]:
    return {row["sessionKey"]: row for row in svc.sessions_list()}


def migrations(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == "read_models_migrated"]


class TestAStoreOfThePreviousVersion:
    @pytest.fixture
    def previous(self, tmp_path: Path) -> str:
        return copied_store(PREVIOUS_STORE, tmp_path)

    def test_it_opens_with_channels_and_run_outcomes_derived_from_its_events(
        self, previous: str, clock: FakeClock
    ) -> None:
        """The rows know what the old events say: the latest human channel, each child's run
        status, and no marks."""
        with capture_logs() as logs:
            svc = opened(previous, clock)
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
        opened(previous, clock).close()
        with capture_logs() as logs:
            svc = opened(previous, clock)
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
        with opened(previous, clock) as svc:
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
        wrote them, or a migration did not finish: the store is not marked complete, ADR 044)
        are rebuilt when the service starts."""
        svc = open_svc()
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")
        recorder: Any = svc.store.recorder.read_models
        with recorder.datastore.transaction(commit=True) as c:
            c.execute(recorder.sql("DELETE FROM {s}session_activity"))
        unmark_read_models(svc)
        assert svc.read_model.read_models_outdated()
        svc.close()
        with capture_logs() as logs:
            again = open_svc()
        assert len(migrations(logs)) == 1
        assert not again.read_model.read_models_outdated()
        rows = rows_by_key(again)
        assert (rows[CHILD]["channel"], rows[CHILD]["runStatus"]) == ("telegram", "running")
        assert "runStatus" not in rows[MANAGER]

    def test_a_store_found_complete_is_marked_and_its_next_start_skips_the_scan(
        self, open_svc: ServiceFactory, database_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-R2, ADR 044, on both backends: a start that found the read models complete marks the
        store with this version's read-model format; the next start does not scan the
        registry (the check is not called), and the maintenance's first batch runs it."""
        svc = open_svc()
        spawn(svc)
        assert svc.read_model.read_models_complete() == READ_MODELS_FORMAT
        svc.close()
        scans: list[object] = []
        scan = ReadModelQueries.read_models_outdated

        def counted(self: ReadModelQueries) -> bool:
            scans.append(self)
            return scan(self)

        monkeypatch.setattr(ReadModelQueries, "read_models_outdated", counted)
        with capture_logs() as logs:
            again = open_svc()
        assert scans == []
        assert migrations(logs) == []
        assert not again.maintenance_idle  # the check is owed
        with capture_logs() as logs:
            again.maintain()
        assert len(scans) == 1
        done = [e for e in logs if e["event"] == "maintenance_done"]
        assert done[0]["task"] == "verify" and done[0]["rebuilt"] is False
        assert not [e for e in logs if e["log_level"] == "warning"]

    def test_a_store_marked_with_another_format_is_scanned_on_start(
        self, open_svc: ServiceFactory, database_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-R2, ADR 044: only this version's own format is trusted; an older (or another) mark is
        checked on start, then set to this version's."""
        svc = open_svc()
        spawn(svc)
        svc.read_model.mark_read_models_complete(READ_MODELS_FORMAT - 1)
        svc.close()
        scans: list[object] = []
        scan = ReadModelQueries.read_models_outdated
        monkeypatch.setattr(
            ReadModelQueries, "read_models_outdated", lambda rm: scans.append(rm) or scan(rm)
        )
        again = open_svc()
        assert len(scans) == 1
        assert again.read_model.read_models_complete() == READ_MODELS_FORMAT
        with capture_logs() as logs:
            again.maintain()
        assert len(scans) == 1  # nothing owed: the start checked itself
        assert not [e for e in logs if e.get("task") == "verify"]

    def test_a_marked_store_damaged_afterwards_is_repaired_by_the_maintenance_first_batch(
        self, open_svc: ServiceFactory, database_url: str
    ) -> None:
        """R-R2, ADR 044, on both backends: rows lost after the store was marked complete are not
        seen by the start, which trusts the mark; the maintenance's first batch finds them
        missing, logs a warning (`read_models_incomplete`), never silently, and rebuilds the
        read models from the events before it prunes or sweeps."""
        svc = open_svc()
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")
        recorder: Any = svc.store.recorder.read_models
        with recorder.datastore.transaction(commit=True) as c:
            c.execute(recorder.sql("DELETE FROM {s}session_activity"))
        svc.close()
        with capture_logs() as logs:
            again = open_svc()
        assert migrations(logs) == []
        assert again.read_model.read_models_outdated()
        with capture_logs() as logs:
            again.maintain()
        events = [e["event"] for e in logs]
        warning = next(e for e in logs if e["event"] == "read_models_incomplete")
        assert warning["log_level"] == "warning"
        assert warning["format"] == READ_MODELS_FORMAT
        assert events.index("read_models_incomplete") < events.index("read_models_migrated")
        first_other = [i for i, e in enumerate(logs) if e.get("task") in ("prune", "sweep")]
        assert events.index("read_models_migrated") < min(first_other)
        assert not again.read_model.read_models_outdated()
        rows = rows_by_key(again)
        assert (rows[CHILD]["channel"], rows[CHILD]["runStatus"]) == ("telegram", "running")
        assert again.read_model.read_models_complete() == READ_MODELS_FORMAT

    @pytest.mark.parametrize(
        "emptied",
        [
            "DELETE FROM {s}session_activity",
            "DELETE FROM {s}session_material",
            "DELETE FROM {s}session_dedupe_keys WHERE dedupe_key = ''",
        ],
    )
    def test_each_missing_read_model_is_found(
        self, open_svc: ServiceFactory, database_url: str, emptied: str
    ) -> None:
        """ADR 035: the start's check finds a registry row without its activity row, its
        material row or its key-index row, each asked apart (docs/performance.md), and only
        then."""
        svc = open_svc()
        spawn(svc)
        assert not svc.read_model.read_models_outdated()
        recorder: Any = svc.store.recorder.read_models
        with recorder.datastore.transaction(commit=True) as c:
            c.execute(recorder.sql(emptied))
        assert svc.read_model.read_models_outdated()
        assert svc.migrate_read_models()  # what a start does then: rebuilt from the events
        assert not svc.read_model.read_models_outdated()


#: Written by tests/ops/fixtures/make_previous_cursors.py with the version that stored a
#: `Watch.MaterialAdvanced` per record on a pending cursor (before ADR 023).
PREVIOUS_CURSORS = Path(__file__).parent / "fixtures" / "previous-cursors.db"
WORKER, WORK, GROUP = "agent:main:subagent:worker", "agent:main:work", "agent:main:group:ops"
PEER, LEAD, SYNCED = "agent:peer:main", "agent:main:lead", "agent:other:main"
#: Each watcher's (target, L, N, M) as the previous version's read models showed them.
PREVIOUS_CURSOR_ROWS = {
    MANAGER: [(WORKER, 2, 4, 7), (GROUP, 0, 1, 2)],
    PEER: [(WORK, 0, 1, 3)],  # its own event 4 is not its material (R-W5)
    LEAD: [(WORK, 0, 1, 4)],  # the parent at L = 0 (R-W4)
    SYNCED: [(WORKER, 7, 7, 7)],
}


def redelivered(rows: list[tuple[str, int, int, int]]) -> list[tuple[str, int, int, int]]:
    """The rows after the start-up sweep: each pending notice re-delivered at N = M (R-N6)."""
    return [(t, ack, m if n > ack else n, m) for t, ack, n, m in rows]


def cursor_rows(svc: SessionAwareness, watcher: str) -> list[tuple[str, int, int, int]]:
    rows = svc.read_model.cursors_of_watcher(watcher, pending_only=False)
    return [(r.target_key, r.acknowledged, r.notified, r.material) for r in rows]


def since(target: str, acknowledged: int) -> str:
    return (
        f'Session "{target}" changed (other actor). Reconcile before acting: '
        f'session_status sessionKey "{target}" changesSince {acknowledged}.'
    )


class TestAStoreWithStoredMaterialAdvances:
    @pytest.fixture
    def previous(self, tmp_path: Path) -> str:
        return copied_store(PREVIOUS_CURSORS, tmp_path)

    def test_its_cursors_and_notices_read_the_same_and_it_audits_clean(
        self, previous: str, clock: FakeClock
    ) -> None:
        """R-N2, R-W4, R-W5, R-W7, R-N6: rebuilt on start, every cursor shows the positions
        the previous version showed (M derived from the targets now), each pending one
        re-delivered at N = M by the start-up sweep, the same notices are pending, and an
        audit finds the rows equal to a replay."""
        with capture_logs() as logs:
            svc = opened(previous, clock)
            svc.maintain()  # the start-up sweep (ADR 038)
        try:
            assert len(migrations(logs)) == 1
            assert {w: cursor_rows(svc, w) for w in PREVIOUS_CURSOR_ROWS} == {
                w: redelivered(rows) for w, rows in PREVIOUS_CURSOR_ROWS.items()
            }
            assert svc.pending_notices(MANAGER) == [since(WORKER, 2), since(GROUP, 0)]
            assert svc.pending_notices(PEER) == [since(WORK, 0)]
            assert svc.pending_notices(LEAD) == [since(WORK, 0)]
            assert svc.pending_notices(SYNCED) == []
            report = svc.audit()
            assert report.clean, report.as_dict()
        finally:
            svc.close()

    def test_its_pending_cursors_drain_and_advance_as_before(
        self, previous: str, clock: FakeClock
    ) -> None:
        """R-N3, R-N6: re-delivered at start at the M the old events recorded, a drain
        acknowledges up to it; later records advance M without a stored cursor event,
        self-suppressed as before (R-W5)."""
        with opened(previous, clock) as svc:
            svc.maintain()  # the start-up sweep (ADR 038)
            assert svc.drain_notices(MANAGER) == [since(WORKER, 2), since(GROUP, 0)]
            assert cursor_rows(svc, MANAGER) == [(WORKER, 7, 7, 7), (GROUP, 2, 2, 2)]
            svc.drain_notices(PEER)
            svc.drain_notices(LEAD)
            assert cursor_rows(svc, PEER) == [(WORK, 3, 3, 3)]
            assert cursor_rows(svc, LEAD) == [(WORK, 4, 4, 4)]
            svc.record_goal_changed(WORK, summary="goal updated", actor_id=PEER)  # 5
            assert cursor_rows(svc, PEER) == [(WORK, 3, 3, 3)]
            assert cursor_rows(svc, LEAD) == [(WORK, 4, 5, 5)]
            assert svc.pending_notices(PEER) == []
            svc.drain_notices(LEAD)
            assert cursor_rows(svc, LEAD) == [(WORK, 5, 5, 5)]
            svc.record_human_direct_message(WORKER, channel="telegram")  # 8
            assert cursor_rows(svc, SYNCED) == [(WORKER, 7, 8, 8)]
            assert cursor_rows(svc, MANAGER) == [(GROUP, 2, 2, 2), (WORKER, 7, 8, 8)]
            report = svc.audit()
            assert report.clean, report.as_dict()

    def test_its_history_shows_each_stored_material_advance_once(
        self, previous: str, clock: FakeClock
    ) -> None:
        """R-N2, R-N6: the previous version's `MaterialAdvanced` events and the steps derived
        from later signals read alike, each once; the start-up sweep's re-delivery is a step."""
        with opened(previous, clock) as svc:
            svc.maintain()  # the start-up sweep (ADR 038)
            svc.record_goal_changed(WORKER, summary="goal updated", actor_type="human")  # 8
            steps = [
                (e["event"], *e["cursor"].values())
                for e in svc.history(WORKER)
                if e.get("watcher") == MANAGER and "cursor" in e
            ]
        assert steps == [
            ("cursor_seeded", 1, 1, 1),
            ("notice_opened", 1, 2, 2),
            ("material_advanced", 1, 2, 3),
            ("material_advanced", 1, 2, 4),
            ("acknowledged", 2, 4, 4),
            ("material_advanced", 2, 4, 5),
            ("material_advanced", 2, 4, 6),
            ("material_advanced", 2, 4, 7),
            ("redelivered", 2, 7, 7),  # the start-up sweep: N raised to M (R-N6)
            ("material_advanced", 2, 7, 8),  # derived: nothing stored for it
        ]


#: Written by tests/ops/fixtures/make_store_before_drains.py with the version that stored one
#: `Watch.Acknowledged` per drained pair (before ADR 024).
BEFORE_DRAINS = Path(__file__).parent / "fixtures" / "store-before-drains.db"
#: Each watcher's (target, L, N, M) as that version's read models showed them.
BEFORE_DRAINS_ROWS = {
    MANAGER: [(GROUP, 1, 2, 2), (WORKER, 5, 6, 6)],
    PEER: [(WORK, 3, 3, 3)],
    LEAD: [(WORK, 0, 1, 3)],
}


class TestAStoreWithOneAcknowledgementPerPair:
    @pytest.fixture
    def before(self, tmp_path: Path) -> str:
        return copied_store(BEFORE_DRAINS, tmp_path)

    def test_its_cursors_read_the_same_drain_in_one_event_and_it_audits_clean(
        self, before: str, clock: FakeClock
    ) -> None:
        """R-N3, R-W7, R-N6: the stored acknowledgements replay as before; a drain now stores
        one event for all of a watcher's pairs, and a restarted service reads both shapes."""
        with opened(before, clock) as svc:
            svc.maintain()  # the start-up sweep (ADR 038)
            assert {w: cursor_rows(svc, w) for w in BEFORE_DRAINS_ROWS} == {
                w: redelivered(rows) for w, rows in BEFORE_DRAINS_ROWS.items()
            }
            assert svc.pending_notices(MANAGER) == [since(GROUP, 1), since(WORKER, 5)]
            assert svc.audit().clean
            stored = svc.store.recorder.max_notification_id()
            assert svc.drain_notices(MANAGER) == [since(GROUP, 1), since(WORKER, 5)]
            assert svc.store.recorder.max_notification_id() == stored + 1
            assert cursor_rows(svc, MANAGER) == [(GROUP, 2, 2, 2), (WORKER, 6, 6, 6)]
        with opened(before, clock) as svc:
            svc.record_human_direct_message(WORKER, channel="telegram")  # 7: opens
            svc.record_human_direct_message(GROUP, channel="slack")  # 3: opens, never woken
            assert cursor_rows(svc, MANAGER) == [(WORKER, 6, 7, 7), (GROUP, 2, 3, 3)]
            svc.drain_notices(LEAD)  # re-delivered at the first start (R-N6)
            assert cursor_rows(svc, LEAD) == [(WORK, 3, 3, 3)]
            report = svc.audit()
            assert report.clean, report.as_dict()

    def test_its_history_shows_old_and_new_acknowledgements_alike(
        self, before: str, clock: FakeClock
    ) -> None:
        """R-N3: each stored `Acknowledged` and each pair of a one-event drain read as the
        same `acknowledged` step."""
        with opened(before, clock) as svc:
            svc.record_human_direct_message(WORKER, channel="telegram")  # 7
            svc.drain_notices(MANAGER)
            steps = [
                (e["event"], *e["cursor"].values(), e.get("reopened"))
                for e in svc.history(WORKER)
                if e.get("watcher") == MANAGER and e["event"] == "acknowledged"
            ]
        assert steps == [
            ("acknowledged", 2, 3, 3, True),
            ("acknowledged", 3, 4, 4, True),
            ("acknowledged", 4, 5, 5, True),
            ("acknowledged", 5, 5, 5, False),
            ("acknowledged", 6, 7, 7, True),  # one event for both of the manager's pairs
        ]


class TestTheStoreVersionMark:
    def test_a_store_is_marked_with_the_version_it_was_migrated_to(
        self, open_svc: ServiceFactory
    ) -> None:
        """ADR 035, on both backends: opening marks the store with this version's
        `STORE_VERSION`; a lower mark never replaces a higher one."""
        svc = open_svc()
        assert svc.read_model.store_version() == STORE_VERSION
        svc.read_model.mark_store_version(STORE_VERSION - 1)
        assert svc.read_model.store_version() == STORE_VERSION

    def test_a_store_a_newer_version_migrated_is_refused_in_one_line(
        self, open_svc: ServiceFactory
    ) -> None:
        """ADR 035, on both backends: a process of an older version refuses, with one clear
        line, a store a newer version marked, instead of reading it (drained cursors as
        pending, events it has no class for); the mark is left as it was."""
        svc = open_svc()
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")
        svc.drain_notices(MANAGER)
        recorder: Any = svc.store.recorder.read_models
        with recorder.datastore.transaction(commit=True) as c:
            c.execute(recorder.sql("UPDATE {s}session_awareness_marks SET value = 99"))
        svc.close()
        with pytest.raises(StoreVersionError) as raised:
            open_svc()
        message = str(raised.value)
        assert isinstance(raised.value, ConfigurationError)
        assert "\n" not in message and "newer" in message and "99" in message
        assert (raised.value.found, raised.value.known) == (99, STORE_VERSION)

    def test_a_store_of_the_previous_version_is_marked_once_migrated(
        self, tmp_path: Path, clock: FakeClock
    ) -> None:
        """ADR 035: a store written before the mark has none; its first open migrates it and
        marks it, the next open finds it marked and writes nothing."""
        previous = copied_store(PREVIOUS_STORE, tmp_path)
        with capture_logs() as logs, opened(previous, clock) as svc:
            assert svc.read_model.store_version() == STORE_VERSION
        marked = [e for e in logs if e["event"] == "store_version_marked"]
        assert [(e["version"], e["was"]) for e in marked] == [(STORE_VERSION, None)]
        with capture_logs() as logs, opened(previous, clock):
            pass
        assert [e for e in logs if e["event"] == "store_version_marked"] == []

    def test_a_read_only_open_of_an_unmarked_store_changes_nothing(
        self, tmp_path: Path, clock: FakeClock
    ) -> None:
        """ADR 034, ADR 035: a store of the version before the mark (no marks table) with a
        notice to re-deliver opens read-only (`?mode=ro` creates and writes nothing): it is
        taken as unmarked, and its notice stays as it was, logged `notices_not_redelivered`."""
        path = tmp_path / "sessions.db"
        with opened(f"sqlite:///{path}", clock) as svc:
            spawn(svc)
            svc.record_human_direct_message(CHILD, channel="telegram")  # 2: opens
            svc.record_human_direct_message(CHILD, channel="telegram")  # 3
        with sqlite3.connect(path) as conn:
            conn.execute("DROP TABLE session_awareness_marks")
        before = path.read_bytes()
        with capture_logs() as logs, opened(f"sqlite:///{path}?mode=ro", clock) as svc:
            svc.maintain()  # the start-up sweep (ADR 038)
            assert svc.read_model.store_version() is None
            assert cursor_rows(svc, MANAGER) == [(CHILD, 1, 2, 3)]
            assert svc.pending_notices(MANAGER) == [since(CHILD, 1)]
        assert [e["watcher"] for e in logs if e["event"] == "notices_not_redelivered"] == [MANAGER]
        assert path.read_bytes() == before

    def test_a_look_by_an_older_cli_refuses_a_newer_store_too(
        self, tmp_path: Path, clock: FakeClock, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """ADR 035: the CLI's commands that only look (no start-up) refuse a store a newer
        version marked as the service's open does: exit 2, one line."""
        path = tmp_path / "sessions.db"
        with opened(f"sqlite:///{path}", clock) as svc:
            spawn(svc)
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE session_awareness_marks SET value = 99")
        code = main(["status", CHILD, "--database-url", f"sqlite:///{path}"])
        err = capsys.readouterr().err.strip()
        assert code == 2
        assert len(err.splitlines()) == 1 and "newer" in err and "99" in err


#: The read-model tables' names and columns that `READ_MODELS_FORMAT` was last raised for (or
#: found to need no raise by): `test_the_read_models_format_is_reconsidered_with_their_tables`.
READ_MODEL_SHAPES = {1: "e397964f65eb35a8"}


def test_the_read_models_format_is_reconsidered_with_their_tables() -> None:
    """R-R2, ADR 044: a start trusts a store marked complete for `READ_MODELS_FORMAT`, so a version
    that keeps rows an earlier one did not write must raise it, or its first start answers
    from incomplete read models until the maintenance's check repairs them. A change to the
    tables fails here until whoever made it decides: raise the format (new rows an earlier
    version did not write), or keep it, and record the tables' new shape either way."""
    shape = sorted((t.name, tuple((c.name, c.type) for c in t.columns)) for t in TABLES)
    digest = hashlib.sha256(repr(shape).encode()).hexdigest()[:16]
    assert READ_MODEL_SHAPES.get(READ_MODELS_FORMAT) == digest, (
        f"the read-model tables changed (shape {digest}): raise READ_MODELS_FORMAT if this "
        "version keeps rows an earlier one did not write, then record the shape here"
    )
