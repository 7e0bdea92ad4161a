"""A store written before snapshots and the key index (its sessions held every idempotency
key themselves) opens, replays, audits clean, answers as it did, still refuses the keys it
recorded, and goes on taking snapshots (R-L5, R-N3, R-R2, R-S2; ADR 022)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from session_awareness.application import open_service
from session_awareness.application.snapshotting import SNAPSHOT_INTERVAL
from session_awareness.domain.session import RECENT_KEYS
from tests.conftest import FakeClock
from tests.contract.helpers import notice
from tests.ops.helpers import copied_store

#: Written by tests/ops/fixtures/make_store_before_snapshots.py at commit 10e76df.
STORE = Path(__file__).parent / "fixtures" / "store-before-snapshots.db"
MANAGER = "agent:main:main"
CHILD = "agent:main:subagent:long"
#: The child's human turns in the fixture (keys `turn-0` … `turn-149`), then a compaction
#: and the run's end: its head.
TURNS = 150
HEAD = 1 + TURNS + 2


@pytest.fixture
def store(tmp_path: Path) -> str:
    return copied_store(STORE, tmp_path)


def snapshots_of(svc: Any, aggregate_id: Any) -> list[int]:
    return [snapshot.originator_version for snapshot in svc.store.snapshots.get(aggregate_id)]


class TestAStoreWrittenBeforeSnapshots:
    def test_it_is_migrated_once_and_audits_clean(self, store: str, clock: FakeClock) -> None:
        """Its read models lack the key index: the first start rebuilds them from the
        events (which replay as they are), the second finds nothing to do."""
        assert TURNS > RECENT_KEYS  # the fixture's keys are more than a session keeps
        with capture_logs() as logs, open_service(store, clock=clock, maintenance="manual") as svc:
            report = svc.audit()
            assert report.clean, report.as_dict()
            assert report.events > HEAD
        assert [e["event"] for e in logs].count("read_models_migrated") == 1
        with capture_logs() as logs, open_service(store, clock=clock, maintenance="manual") as svc:
            assert not svc.read_model.read_models_outdated()
        assert [e["event"] for e in logs].count("read_models_migrated") == 0

    def test_it_answers_status_notices_and_changes_since_as_before(
        self, store: str, clock: FakeClock
    ) -> None:
        """R-N4, R-S2: the pending notice is byte for byte the one left; the delta since a
        turn is the later turns and the last two signals; the deleted session stays gone."""
        with open_service(store, clock=clock, maintenance="manual") as svc:
            assert svc.pending_notices(MANAGER) == [notice(CHILD, 1)]
            status = svc.session_status(CHILD, changes_since=HEAD - 3)
            assert status["stateVersion"] == HEAD
            events = status["stateChanges"]["events"]
            assert [event["sequence"] for event in events] == [HEAD - 2, HEAD - 1, HEAD]
            assert [event["kind"] for event in events] == [
                "human_direct_message", "compacted", "run_completed",
            ]  # fmt: skip
            keys = {row["sessionKey"] for row in svc.sessions_list()}
            assert keys == {MANAGER, CHILD}

    def test_it_refuses_every_key_it_recorded_and_keeps_working(
        self, store: str, clock: FakeClock
    ) -> None:
        """R-L5: the oldest turn key, the compaction and the run end are duplicates; new
        records land after them, the notice drains as R-N3 and R-N6 say, and snapshots are taken
        from then on, so a restart loads the session from one."""
        with open_service(store, clock=clock, maintenance="manual") as svc:
            svc.maintain()  # the start-up sweep and prune (ADR 038)
            assert svc.record_human_direct_message(
                CHILD, channel="telegram", idempotency_key="turn-0"
            ) is None  # fmt: skip
            assert svc.record_compacted(CHILD, operation_id="compaction-1") is None
            assert svc.record_run_terminal(CHILD, run_id="run-long", outcome="error") is None
            assert svc.record_child_spawned(CHILD, parent=MANAGER, run_id="run-long") is None
            assert svc.session_status(CHILD)["stateVersion"] == HEAD
            # The start-up sweep re-delivered the notice at N = M (R-N6): one drain takes it all.
            assert svc.drain_notices(MANAGER) == [notice(CHILD, 1)]
            assert svc.pending_notices(MANAGER) == []
            child = svc.store.resolve_id(CHILD)[1]
            assert snapshots_of(svc, child) == []
            for turn in range(SNAPSHOT_INTERVAL):
                assert svc.record_human_direct_message(
                    CHILD, channel="telegram", idempotency_key=f"new-{turn}"
                ) == HEAD + 1 + turn  # fmt: skip
            assert snapshots_of(svc, child)
            assert svc.pending_notices(MANAGER) == [notice(CHILD, HEAD - 2)]  # the last turn
        with open_service(store, clock=clock, maintenance="manual") as svc:
            session = svc.store.repository.get(child)
            assert session.version - snapshots_of(svc, child)[-1] < SNAPSHOT_INTERVAL
            assert svc.record_human_direct_message(
                CHILD, channel="telegram", idempotency_key="turn-1"
            ) is None  # fmt: skip
            assert svc.audit().clean
