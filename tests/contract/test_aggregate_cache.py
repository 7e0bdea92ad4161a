"""Two services on one store, each with its own aggregate cache (application/aggregate_cache.py).

A service decides on cached copies; these stories fail if a copy another writer has changed
since is used as it was, in particular for decisions that write nothing to that aggregate.
"""

from __future__ import annotations

import threading

from session_awareness.application import SessionAwareness
from tests.conftest import ServiceFactory
from tests.contract.helpers import CHILD, MANAGER, OTHER, cursor, notice, sequences, spawn


def two(open_svc: ServiceFactory) -> tuple[SessionAwareness, SessionAwareness]:
    return open_svc(), open_svc()


class TestTwoWriters:
    def test_interleaved_records_on_one_session_get_contiguous_sequences(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-L4 with two caches: each writer's copy of the session goes stale at every turn."""
        a, b = two(open_svc)
        spawn(a)
        recorded = []
        for turn in range(20):
            writer = a if turn % 2 else b
            recorded.append(writer.record_human_direct_message(CHILD, channel="chat"))
        assert recorded == list(range(2, 22))
        assert sequences(a, CHILD) == sequences(b, CHILD) == list(range(1, 22))
        assert a.pending_notices(MANAGER) == [notice(CHILD, 1)]

    def test_a_watch_registered_by_one_writer_is_fanned_out_by_the_other(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-W2, R-W4: B's cached session must learn of A's new watcher before B records."""
        a, b = two(open_svc)
        spawn(a)
        b.record_human_direct_message(CHILD, channel="chat")  # B caches the child
        a.open_session(OTHER)  # a watcher the service knows (R-L9)
        assert a.watch(OTHER, CHILD) is True
        assert b.record_goal_changed(CHILD, summary="goal created") == 3
        assert b.pending_notices(OTHER) == [notice(CHILD, 2)]

    def test_a_drain_by_one_writer_is_seen_by_the_other(self, open_svc: ServiceFactory) -> None:
        """R-N3: after A drains, B's next change opens a fresh notice from the new position."""
        a, b = two(open_svc)
        spawn(a)
        b.record_human_direct_message(CHILD, channel="chat")  # B caches the cursor
        assert a.drain_notices(MANAGER) == [notice(CHILD, 1)]
        b.record_human_direct_message(CHILD, channel="chat")
        assert b.drain_notices(MANAGER) == [notice(CHILD, 2)]
        assert cursor(a, MANAGER, CHILD) == (3, 3, 3)


class TestDecisionsThatWriteNothing:
    def test_opening_a_session_another_writer_deleted_opens_it_again(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-C2: B's cached copy says "open" (so opening would do nothing); it is stale."""
        a, b = two(open_svc)
        b.open_session(OTHER)
        a.delete_session(OTHER)
        b.open_session(OTHER)
        assert [row.key for row in a.session_rows()] == [OTHER]

    def test_a_parent_deleted_by_another_writer_gets_no_cursor(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-W4, R-W6: a deleted parent is not given a cursor from a stale cached copy."""
        a, b = two(open_svc)
        a.open_session(MANAGER)
        a.open_session(CHILD, kind="subagent", parent=MANAGER)
        b.open_session(MANAGER)  # B caches the live parent
        a.delete_session(MANAGER)
        assert b.record_goal_changed(CHILD, summary="goal created") == 1
        assert cursor(a, MANAGER, CHILD) is None
        assert b.pending_notices(MANAGER) == []


class TestThreads:
    def test_threads_sharing_one_service_record_contiguous_sequences_and_one_notice(
        self, svc: SessionAwareness
    ) -> None:
        """R-L4, R-N2 with one cache shared by four threads appending to one session (and a
        drain racing them): every record lands once, in order, and the read models match a
        rebuild (checked when the test ends)."""
        spawn(svc)
        results: list[int | None] = []
        errors: list[BaseException] = []

        def append() -> None:
            try:
                for _ in range(25):
                    results.append(svc.record_human_direct_message(CHILD, channel="chat"))
            except BaseException as error:  # noqa: BLE001 -- reported by the test thread
                errors.append(error)

        def drain() -> None:
            try:
                for _ in range(10):
                    svc.drain_notices(MANAGER)
            except BaseException as error:  # noqa: BLE001 -- reported by the test thread
                errors.append(error)

        threads = [threading.Thread(target=append) for _ in range(4)]
        threads.append(threading.Thread(target=drain))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors, errors
        assert sorted(results) == list(range(2, 102))  # type: ignore[type-var]
        assert sequences(svc, CHILD) == list(range(1, 102))
        # A drain hands over the pending notice and reopens one up to M (R-N3); the next
        # hands that over, and nothing is left.
        assert len(svc.drain_notices(MANAGER)) <= 1
        assert len(svc.drain_notices(MANAGER)) <= 1
        assert cursor(svc, MANAGER, CHILD) == (101, 101, 101)
        assert svc.drain_notices(MANAGER) == []
