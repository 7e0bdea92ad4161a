"""The two-round-trip save (ADR 013, `readmodel/pg_round_trips.py`) is a speed device over
`PostgresReadModelRecorder`, whose own save runs the library's steps (lock, insert) and
then the projection's rows (ADR 002). Either leaves the same store."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from session_awareness import configuration
from session_awareness.application import open_service
from session_awareness.infrastructure.readmodel.bulk import BULK_INLINE
from session_awareness.testing.pgcluster import PostgresCluster
from session_awareness.testing.read_models import read_model_rows
from tests.conftest import FakeClock, RecordingWaker

LIBRARY_STEPS = "session_awareness.infrastructure.readmodel.pg_recorder:PostgresReadModelRecorder"
MANAGER, CHILD = "agent:main:main", "agent:main:subagent:worker"
WATCHERS = [f"agent:w{number}:main" for number in range(BULK_INLINE + 2)]


def scenario(url: str) -> dict[str, Any]:
    """Small saves and large ones (a wide fan-out, a long drain), then what they left."""
    waker = RecordingWaker()
    clock = FakeClock()
    with open_service(url, clock=clock, waker=waker) as svc:
        svc.open_session(MANAGER)
        svc.record_child_spawned(CHILD, parent=MANAGER, run_id="r1")
        for watcher in WATCHERS:
            svc.open_session(watcher)  # a watcher the service knows (R-L9)
            svc.watch(watcher, CHILD)
        clock.advance(seconds=1)
        sequences = [
            svc.record_human_direct_message(CHILD, channel="chat"),
            svc.record_goal_changed(CHILD, summary="goal created"),
        ]
        drained = {watcher: svc.drain_notices(watcher) for watcher in [MANAGER, WATCHERS[0]]}
        return {
            "recorder": type(svc.store.recorder).__name__,  # type: ignore[attr-defined]
            "sequences": sequences,
            "drained": drained,
            "pending": {watcher: svc.pending_notices(watcher) for watcher in WATCHERS},
            "woken": sorted(waker.woken),
            "rows": read_model_rows(svc.store.recorder),
            "clean": svc.audit().clean,
        }


def test_the_library_write_steps_leave_the_same_store_as_the_two_round_trips(
    postgres: PostgresCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R-N2, R-N5, R-R2: the same notices, wakes and rows, and a clean audit, with the
    two-round-trip save and without it."""
    fast = scenario(f"{postgres.url}?schema=f_{uuid.uuid4().hex[:12]}")
    monkeypatch.setattr(configuration, "POSTGRES_RECORDER_TOPIC", LIBRARY_STEPS)
    library = scenario(f"{postgres.url}?schema=l_{uuid.uuid4().hex[:12]}")
    assert (fast.pop("recorder"), library.pop("recorder")) == (
        "PostgresRoundTripsRecorder",
        "PostgresReadModelRecorder",
    )
    assert fast["sequences"] == [2, 3]
    assert fast["clean"] is True
    assert len(fast["woken"]) > BULK_INLINE
    assert library == fast
