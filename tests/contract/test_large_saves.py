"""Saves large enough for the inline projection's bulk path (BULK_INLINE row changes or
more): a wide fan-out and a long drain must leave exactly the rows and wakes of small ones."""

from __future__ import annotations

from session_awareness.application import SessionAwareness
from session_awareness.infrastructure.readmodel.bulk import BULK_INLINE
from tests.conftest import RecordingWaker
from tests.contract.helpers import CHILD, MANAGER, cursor, notice, spawn

WIDE = BULK_INLINE + 4


def watchers() -> list[str]:
    return [f"agent:w{number}:main" for number in range(WIDE)]


class TestWideFanOut:
    def test_every_watcher_gets_one_notice_and_one_wake(
        self, svc: SessionAwareness, waker: RecordingWaker
    ) -> None:
        """R-W4, R-N2, R-N5 at width: one save moves WIDE + 1 cursors."""
        spawn(svc)
        for watcher in watchers():
            svc.open_session(watcher)
            assert svc.watch(watcher, CHILD) is True
        waker.woken.clear()
        assert svc.record_human_direct_message(CHILD, channel="chat") == 2
        for watcher in [MANAGER, *watchers()]:
            assert svc.pending_notices(watcher) == [notice(CHILD, 1)]
        assert sorted(waker.woken) == sorted([MANAGER, *watchers()])
        assert svc.record_goal_changed(CHILD, summary="goal created") == 3
        for watcher in watchers():
            assert cursor(svc, watcher, CHILD) == (1, 2, 3)
        assert svc.pending_notices(watchers()[0]) == [notice(CHILD, 1)]  # still one, byte-stable


class TestLongDrain:
    def test_a_drain_of_many_pairs_hands_over_each_notice_once_and_reopens_the_newer(
        self, svc: SessionAwareness, waker: RecordingWaker
    ) -> None:
        """R-N3, R-N4 at length: one save acknowledges WIDE cursors."""
        svc.open_session(MANAGER)
        children = [f"agent:main:subagent:c{number}" for number in range(WIDE)]
        for number, child in enumerate(children):
            svc.record_child_spawned(child, parent=MANAGER, run_id=f"run-{number}")
            svc.record_human_direct_message(child, channel="chat")
        svc.record_goal_changed(children[0], summary="goal created")  # M moves past N
        drained = svc.drain_notices(MANAGER)
        assert drained == [notice(child, 1) for child in children]
        assert cursor(svc, MANAGER, children[0]) == (2, 3, 3)
        assert cursor(svc, MANAGER, children[1]) == (2, 2, 2)
        assert svc.pending_notices(MANAGER) == [notice(children[0], 2)]
        assert svc.drain_notices(MANAGER) == [notice(children[0], 2)]
        assert svc.drain_notices(MANAGER) == []
