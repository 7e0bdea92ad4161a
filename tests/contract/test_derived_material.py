"""M derived from the target (ADR 023): a record stores one event for its pending audience,
the read models show the same positions, and a record racing a drain loses no notice."""

from __future__ import annotations

import pytest
from eventsourcing.persistence import RecordConflictError

from session_awareness.application import SessionAwareness
from session_awareness.application.unit_of_work import UnitOfWork
from session_awareness.domain import intake as produce
from session_awareness.domain import notices
from session_awareness.domain.keys import SessionRef
from tests.contract.helpers import CHILD, MANAGER, PEER, cursor, notice, spawn

WATCHERS = [f"agent:w{n}:main" for n in range(5)]


def stored(svc: SessionAwareness) -> int:
    """How many events the store holds (its newest notification id)."""
    return svc.store.recorder.max_notification_id() or 0


def all_pending(svc: SessionAwareness) -> None:
    """The manager's spawn cursor and five explicit watches on the child, all started at
    the spawn (1) and all pending (L = 1, N = M = 2)."""
    spawn(svc)
    for watcher in WATCHERS:
        svc.open_session(watcher)
        assert svc.watch(watcher, CHILD)
    svc.record_human_direct_message(CHILD, channel="telegram")  # 2: opens six notices


class TestOneEventPerRecord:
    def test_a_record_on_an_all_pending_audience_stores_exactly_one_event(
        self, svc: SessionAwareness
    ) -> None:
        """R-N2: while every watcher's notice is pending, a record stores its signal and
        nothing else; every cursor still shows M at the new event."""
        all_pending(svc)
        before = stored(svc)
        assert svc.record_goal_changed(CHILD, summary="goal updated", actor_type="human") == 3
        assert stored(svc) == before + 1
        for watcher in [MANAGER, *WATCHERS]:
            assert cursor(svc, watcher, CHILD) == (1, 2, 3)

    def test_a_synced_watcher_still_gets_its_durable_notice_opened(
        self, svc: SessionAwareness
    ) -> None:
        """R-N2: the pending watchers store nothing, the synced one its `NoticeOpened`."""
        all_pending(svc)
        svc.drain_notices(WATCHERS[0])
        assert cursor(svc, WATCHERS[0], CHILD) == (2, 2, 2)
        before = stored(svc)
        svc.record_goal_changed(CHILD, summary="goal updated", actor_type="human")  # 3
        assert stored(svc) == before + 2
        assert cursor(svc, WATCHERS[0], CHILD) == (2, 3, 3)
        assert svc.pending_notices(WATCHERS[0]) == [notice(CHILD, 2)]
        assert cursor(svc, WATCHERS[1], CHILD) == (1, 2, 3)

    def test_a_watchers_own_event_is_not_its_material(self, svc: SessionAwareness) -> None:
        """R-W5: the actor's cursor keeps its M; everyone else's moves, in one stored event."""
        all_pending(svc)
        before = stored(svc)
        svc.record_goal_changed(CHILD, summary="goal updated", actor_id=WATCHERS[0])  # 3
        assert stored(svc) == before + 1
        assert cursor(svc, WATCHERS[0], CHILD) == (1, 2, 2)
        assert cursor(svc, WATCHERS[1], CHILD) == (1, 2, 3)
        svc.record_goal_changed(CHILD, summary="goal updated", actor_id=WATCHERS[0])  # 4
        assert cursor(svc, WATCHERS[0], CHILD) == (1, 2, 2)
        svc.drain_notices(WATCHERS[0])
        assert cursor(svc, WATCHERS[0], CHILD) == (2, 2, 2)
        assert svc.pending_notices(WATCHERS[0]) == []
        svc.drain_notices(WATCHERS[1])
        assert cursor(svc, WATCHERS[1], CHILD) == (2, 4, 4)


class TestARecordRacingADrain:
    """The record and the drain below each read before the other commits; neither writes
    an aggregate the other wrote, so the store's version check does not stop the second.
    The save's own check does (R-N3: a notice recorded concurrently is never lost)."""

    def test_a_record_that_read_a_pending_cursor_drained_meanwhile_runs_again(
        self, svc: SessionAwareness
    ) -> None:
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2: pending (1, 2, 2)
        uow = UnitOfWork(svc.store)
        now = svc.clock()
        request = produce.goal_changed(
            summary="goal updated", actor_type="human", actor_id=None, now=now
        )
        assert svc._intake.record_once(uow, SessionRef.of(CHILD), request, now) == 3
        assert svc.drain_notices(MANAGER) == [notice(CHILD, 1)]  # synced at 2 meanwhile
        with pytest.raises(RecordConflictError, match="synced below its target"):
            uow.save()
        assert cursor(svc, MANAGER, CHILD) == (2, 2, 2)
        assert svc.record_goal_changed(CHILD, summary="goal updated", actor_type="human") == 3
        assert cursor(svc, MANAGER, CHILD) == (2, 3, 3)
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 2)]

    def test_a_drain_that_read_m_before_a_record_runs_again(self, svc: SessionAwareness) -> None:
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2: pending (1, 2, 2)
        uow = UnitOfWork(svc.store)
        watch = uow.watch(MANAGER, SessionRef.of(CHILD))
        assert watch is not None
        assert notices.acknowledge(watch, uow.session(watch.target_id), at=svc.clock()) is False
        svc.record_goal_changed(CHILD, summary="goal updated", actor_type="human")  # 3
        with pytest.raises(RecordConflictError, match="synced below its target"):
            uow.save()
        assert cursor(svc, MANAGER, CHILD) == (1, 2, 3)
        assert svc.drain_notices(MANAGER) == [notice(CHILD, 1)]
        assert cursor(svc, MANAGER, CHILD) == (2, 3, 3)
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 2)]

    def test_a_drain_that_reopens_with_an_older_m_is_kept(self, svc: SessionAwareness) -> None:
        """A drain that reopens at the M it read is the drain before the record: the record
        then only moved M on the reopened notice, and both stand."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2: pending (1, 2, 2)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 3: M = 3
        uow = UnitOfWork(svc.store)
        watch = uow.watch(MANAGER, SessionRef.of(CHILD))
        assert watch is not None
        assert notices.acknowledge(watch, uow.session(watch.target_id), at=svc.clock()) is True
        svc.record_goal_changed(CHILD, summary="goal updated", actor_type="human")  # 4
        uow.save()
        assert cursor(svc, MANAGER, CHILD) == (2, 3, 4)
        assert svc.drain_notices(MANAGER) == [notice(CHILD, 2)]
        assert cursor(svc, MANAGER, CHILD) == (3, 4, 4)
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 3)]


def test_a_peer_and_the_parent_at_zero_derive_their_m_from_one_target(
    svc: SessionAwareness,
) -> None:
    """R-W4, R-W5: the parent's cursor created at L = 0 and a peer's explicit watch each
    get their own M from the same target row."""
    svc.open_session(PEER)
    svc.open_session(CHILD, parent=MANAGER)
    assert svc.watch(PEER, CHILD)
    svc.record_goal_changed(CHILD, summary="goal created", actor_type="human")  # 1
    assert cursor(svc, MANAGER, CHILD) == (0, 1, 1)
    svc.record_goal_changed(CHILD, summary="goal updated", actor_id=PEER)  # 2
    svc.record_goal_changed(CHILD, summary="goal updated", actor_id=MANAGER)  # 3
    assert cursor(svc, MANAGER, CHILD) == (0, 1, 2)
    assert cursor(svc, PEER, CHILD) == (0, 1, 3)
