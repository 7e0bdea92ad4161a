"""Group commit (ADR 025): concurrent records of one process share one transaction and one
commit, and every caller still gets its own answer (R-L4, R-L8).

A batch of several saves is made without timing: another connection holds the store's write
lock (SQLite `BEGIN IMMEDIATE`, PostgreSQL the events table's lock), so a first record's
batch waits on it while the others queue behind; the test releases the lock once they have.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import RecordConflictError
from psycopg.sql import SQL, Identifier
from structlog.testing import capture_logs

from session_awareness.application import SessionAwareness
from session_awareness.application.snapshotting import SNAPSHOT_INTERVAL
from session_awareness.application.unit_of_work import UnitOfWork
from session_awareness.domain import notices
from session_awareness.domain.keys import SessionRef
from session_awareness.infrastructure.readmodel.group_commit import GroupCommit
from tests.conftest import wait_until
from tests.contract.helpers import cursor, notice, sequences

THREADS = 6
RECORDS = 15


def family(number: int) -> tuple[str, str]:
    """A manager of its own and the child it watches."""
    return f"agent:m{number}:main", f"agent:m{number}:subagent:child"


def spawned(svc: SessionAwareness, count: int) -> list[str]:
    """`count` children, each spawned (sequence 1) by a manager of its own."""
    children = []
    for number in range(count):
        manager, child = family(number)
        svc.open_session(manager)
        assert svc.record_child_spawned(child, parent=manager, run_id=f"run-{number}") == 1
        children.append(child)
    return children


def group(svc: SessionAwareness) -> GroupCommit:
    commits: GroupCommit = svc.store.recorder.group  # type: ignore[attr-defined]
    return commits


@contextlib.contextmanager
def write_lock_held(svc: SessionAwareness) -> Iterator[Callable[[], None]]:
    """Hold the store's write lock on a connection of its own until the yielded release is
    called (or the block ends)."""
    recorder: Any = svc.store.recorder
    conn: Any
    if hasattr(recorder.datastore, "schema"):
        conn = psycopg.connect(recorder.datastore.pool.conninfo, autocommit=True)
        conn.execute("BEGIN")
        table = Identifier(recorder.datastore.schema, recorder.events_table_name)
        conn.execute(SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(table))
    else:
        conn = sqlite3.connect(recorder.datastore.pool.db_name, uri=True, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
    released = threading.Event()

    def release() -> None:
        if not released.is_set():
            released.set()
            conn.rollback()

    try:
        yield release
    finally:
        release()
        conn.close()


def run_all(bodies: list[Callable[[], object]]) -> list[object]:
    """Run each body in a thread of its own at once; their results, in order."""
    results: list[object] = [None] * len(bodies)
    errors: list[BaseException] = []
    start = threading.Barrier(len(bodies))

    def run(index: int) -> None:
        start.wait()
        try:
            results[index] = bodies[index]()
        except BaseException as error:  # noqa: BLE001 -- reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert not errors, errors
    return results


def started(bodies: list[Callable[[], object]]) -> tuple[list[threading.Thread], list[object]]:
    """Start each body in a thread of its own; the threads and their results, filled in as
    they end."""
    results: list[object] = [None] * len(bodies)

    def run(index: int) -> None:
        results[index] = bodies[index]()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(bodies))]
    for thread in threads:
        thread.start()
    return threads, results


def joined(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)


def record(svc: SessionAwareness, child: str, count: int = 1) -> Callable[[], list[int | None]]:
    return lambda: [svc.record_human_direct_message(child, channel="chat") for _ in range(count)]


class TestManyThreads:
    def test_every_caller_gets_its_own_sequence_unique_and_gap_free(
        self, svc: SessionAwareness
    ) -> None:
        """R-L4 under group commit: threads recording at once, several on one session, each
        get sequences that are exactly the store's; every session's are unique and
        gap-free; every notice is open in the read model the commit wrote."""
        children = spawned(svc, THREADS)
        shared = children[0]
        bodies = [record(svc, child, RECORDS) for child in children[1:]]
        bodies += [record(svc, shared, RECORDS) for _ in range(3)]
        answers = run_all(bodies)
        own = answers[: THREADS - 1]
        for child, got in zip(children[1:], own, strict=True):
            assert got == list(range(2, 2 + RECORDS))
            assert sequences(svc, child) == [1, *got]  # type: ignore[list-item]
        on_shared = sorted(s for got in answers[THREADS - 1 :] for s in got)  # type: ignore[attr-defined]
        assert on_shared == list(range(2, 2 + 3 * RECORDS))
        assert sequences(svc, shared) == [1, *on_shared]
        for number in range(THREADS):
            manager, child = family(number)
            assert svc.pending_notices(manager) == [notice(child, 1)]
        commits = group(svc)
        assert commits.saves >= THREADS + (THREADS + 2) * RECORDS

    def test_a_lone_writer_writes_batches_of_one(self, svc: SessionAwareness) -> None:
        """Group commit never waits for company: records one after another are each their
        own batch, committed when recorded."""
        [child] = spawned(svc, 1)
        commits = group(svc)
        before = commits.batches
        for sequence in range(2, 7):
            assert svc.record_human_direct_message(child, channel="chat") == sequence
            assert sequences(svc, child)[-1] == sequence
        assert (commits.batches - before, commits.largest) == (5, 1)


class TestOneBatch:
    def test_saves_queued_behind_a_batch_commit_together(self, svc: SessionAwareness) -> None:
        """Records made while a batch is being written are written together in the next,
        each with its own sequence and its own notice."""
        children = spawned(svc, THREADS)
        commits = group(svc)
        with write_lock_held(svc) as release:
            first, results = started([record(svc, children[0])])
            assert wait_until(commits.writing)
            rest, more = started([record(svc, child) for child in children[1:]])
            assert wait_until(lambda: commits.queued() == THREADS - 1)
            release()
            joined(first + rest)
        assert [*results, *more] == [[2]] * THREADS
        assert commits.largest == THREADS - 1
        for number, child in enumerate(children):
            assert sequences(svc, child) == [1, 2]
            assert svc.pending_notices(family(number)[0]) == [notice(child, 1)]

    def test_a_conflict_in_a_batch_is_retried_and_fails_no_other(
        self, svc: SessionAwareness
    ) -> None:
        """Saves of one batch on one session conflict (each loaded the same version): the
        first is written, each other one is rolled back to its savepoint and retried by its
        caller; the saves on other sessions are not failed. Every sequence is unique and
        gap-free."""
        children = spawned(svc, 3)
        commits = group(svc)
        with write_lock_held(svc) as release:
            first, results = started([record(svc, children[0])])
            assert wait_until(commits.writing)
            bodies = [record(svc, children[0]) for _ in range(3)]
            bodies += [record(svc, child) for child in children[1:]]
            rest, more = started(bodies)
            assert wait_until(lambda: commits.queued() == len(bodies))
            release()
            joined(first + rest)
        on_first = sorted(s for got in [*results, *more[:3]] for s in got)  # type: ignore[attr-defined]
        assert on_first == [2, 3, 4, 5]
        assert sequences(svc, children[0]) == [1, 2, 3, 4, 5]
        assert more[3:] == [[2], [2]]
        assert commits.largest == len(bodies)
        for child in children[1:]:
            assert sequences(svc, child) == [1, 2]

    def test_a_refused_save_in_a_batch_fails_only_its_caller(self, svc: SessionAwareness) -> None:
        """Saves the store refuses in a batch are rolled back alone: one claims a version
        already stored (its caller gets the conflict), one's projection does not match its
        events (its caller gets that error); nothing of either is stored, and the records in
        the same batch are written."""
        children = spawned(svc, 3)
        commits = group(svc)
        recorder: Any = svc.store.recorder
        taken, unprojected = Aggregate(), Aggregate()
        stored = [svc.store.mapper.to_stored_event(e) for e in taken.collect_events()]
        recorder.insert_events(stored)  # the version the refused save claims again
        events = list(unprojected.collect_events())
        mismatched = [svc.store.mapper.to_stored_event(e) for e in events]

        def conflicting() -> object:
            with pytest.raises(RecordConflictError):
                recorder.insert_events(stored)
            return "refused"

        def unmatched() -> object:
            with pytest.raises(ValueError, match="zip"):
                recorder.insert_events(mismatched, projected_events=[*events, *events])
            return "refused"

        with write_lock_held(svc) as release:
            first, results = started([record(svc, children[0])])
            assert wait_until(commits.writing)
            rest, more = started(
                [record(svc, children[1]), conflicting, unmatched, record(svc, children[2])]
            )
            assert wait_until(lambda: commits.queued() == 4)
            release()
            joined(first + rest)
        assert [*results, *more] == [[2], [2], "refused", "refused", [2]]
        assert commits.largest == 4
        assert recorder.select_events(taken.id) == stored
        assert recorder.select_events(unprojected.id) == []
        for child in children:
            assert sequences(svc, child) == [1, 2]


class TestStoreFailureInABatch:
    def test_every_save_of_a_failed_batch_is_kept_and_recorded_once(
        self, svc: SessionAwareness
    ) -> None:
        """R-L8 under group commit: the store fails while a batch waits for it, after a few
        seconds (SQLite: the write lock outlasts its timeout; PostgreSQL: the call's
        deadline shuts its connection). No producer raises; each save of the batch reports
        nothing recorded and is kept with its unconfirmed event, then recorded exactly once
        when the store is back."""
        children = spawned(svc, THREADS)
        commits = group(svc)
        with capture_logs() as logs, write_lock_held(svc) as release:
            first, results = started([record(svc, children[0])])
            assert wait_until(commits.writing)
            rest, more = started([record(svc, child) for child in children[1:]])
            assert wait_until(lambda: commits.queued() == THREADS - 1, timeout=60)
            joined(first + rest)
            # Counted while the lock is still held: once it goes, the backlog's flusher may
            # record the kept signals at any moment.
            assert svc.health()["signals"]["buffered"] == THREADS
            release()
        assert [*results, *more] == [[None]] * THREADS
        failed = [e for e in logs if e["event"] == "signal_record_failed"]
        assert sorted(e["session_key"] for e in failed) == sorted(children)
        assert commits.largest == THREADS - 1
        assert wait_until(svc.flush_signals)
        for number, child in enumerate(children):
            assert sequences(svc, child) == [1, 2]
            assert svc.pending_notices(family(number)[0]) == [notice(child, 1)]


def queued_behind_a_batch(
    svc: SessionAwareness, bodies: list[Callable[[], object]]
) -> list[object]:
    """Run `bodies` in one batch: each starts once the one before it has queued, behind a
    first record's batch that waits on the held write lock; their results, in order."""
    commits = group(svc)
    manager, leader = "agent:lead:main", "agent:lead:subagent:child"
    svc.open_session(manager)
    assert svc.record_child_spawned(leader, parent=manager, run_id="run-lead") == 1
    threads, results = [], []
    with write_lock_held(svc) as release:
        first, _ = started([record(svc, leader)])
        assert wait_until(commits.writing)
        for number, body in enumerate(bodies, start=1):
            more, result = started([body])
            threads += more
            results.append(result)
            assert wait_until(lambda n=number: commits.queued() == n)  # type: ignore[misc]
        release()
        joined(first + threads)
    assert commits.largest == len(bodies)
    return [result[0] for result in results]


class TestWhatEachSaveOfABatchKeeps:
    """Each save of a batch keeps what it keeps alone: the save's check on derived M (ADR
    023), its idempotency keys and the snapshot its caller takes (ADR 022)."""

    def test_a_save_the_derived_m_check_refuses_is_retried_and_fails_no_other(
        self, svc: SessionAwareness
    ) -> None:
        """R-N3: a drain and a record that read the cursor before either committed share a
        batch; the drain, first, syncs the cursor; the record, second, would leave it synced
        below its new M, so it alone is rolled back and runs again: the notice it opens is
        kept. A record after it in the batch is written."""
        manager, child = family(0)
        [_, other] = spawned(svc, 2)
        assert svc.record_human_direct_message(child, channel="chat") == 2  # pending (1, 2, 2)
        drain = UnitOfWork(svc.store)
        watch = drain.watch(manager, SessionRef.of(child))
        assert watch is not None
        assert notices.acknowledge(watch, drain.session(watch.target_id), at=svc.clock()) is False

        def drained() -> object:
            drain.commit()
            return "drained"

        got = queued_behind_a_batch(svc, [drained, record(svc, child), record(svc, other)])
        assert got == ["drained", [3], [2]]
        assert cursor(svc, manager, child) == (2, 3, 3)
        assert svc.pending_notices(manager) == [notice(child, 2)]
        assert sequences(svc, other) == [1, 2]

    def test_one_idempotency_key_twice_in_a_batch_is_recorded_once(
        self, svc: SessionAwareness
    ) -> None:
        """R-L5: two records with one key on one session, each decided before the other
        committed: the second loses on its version, runs again after the batch, and finds
        the key the first stored."""
        [child] = spawned(svc, 1)

        def keyed() -> object:
            return svc.record_human_direct_message(child, channel="chat", idempotency_key="k")

        got = queued_behind_a_batch(svc, [keyed, keyed])
        assert sorted(got, key=str) == [2, None]
        assert sequences(svc, child) == [1, 2]
        assert svc.store.read_model.dedupe_key_seen(svc.store.resolve_id(child)[1], "human:k")
        assert svc.record_human_direct_message(child, channel="chat", idempotency_key="k") is None

    def test_the_save_that_reaches_a_snapshot_takes_it_and_a_refused_one_none(
        self, svc: SessionAwareness
    ) -> None:
        """ADR 022: two records on a session one event short of a snapshot share a batch;
        the first is written and its caller snapshots it, the second loses its race, is
        written after the batch and snapshots nothing. Loading from the snapshot gives the
        session the events give."""
        [child] = spawned(svc, 1)
        session_id = svc.store.resolve_id(child)[1]
        while svc.store.repository.get(session_id).version % SNAPSHOT_INTERVAL != 99:
            svc.record_human_direct_message(child, channel="chat")
        last = sequences(svc, child)[-1]
        got = queued_behind_a_batch(svc, [record(svc, child), record(svc, child)])
        assert sorted(s for one in got for s in one) == [last + 1, last + 2]  # type: ignore[attr-defined]
        snapshots: Any = svc.store.snapshots
        assert [s.originator_version for s in snapshots.get(session_id)] == [100]
        loaded = svc.store.repository.get(session_id)
        replayed = None
        for event in svc.store.events.get(session_id):
            replayed = event.mutate(replayed)
        assert replayed is not None
        assert (loaded.version, loaded.snapshot_state()) == (101, replayed.snapshot_state())


class TestTheTurnAndABatch:
    def test_a_command_holding_the_turn_saves_in_a_batch_and_nothing_waits_inside_one(
        self, svc: SessionAwareness
    ) -> None:
        """ADR 027 with group commit: a command holds the process's turn while saves are
        queued behind a batch; its own save joins them (no save waits on the turn), loses
        its race there and runs again, still holding the turn; a command started meanwhile
        waits before it loads, so its save is written after the turn's."""
        children = spawned(svc, 3)
        commits = group(svc)
        taken, holding = threading.Event(), []

        def with_the_turn() -> object:
            with contextlib.ExitStack() as turn:
                svc.store.turns.take(turn)
                taken.set()
                holding.append(record(svc, children[1])())
            return "given back"

        with write_lock_held(svc) as release:
            first, _ = started([record(svc, children[0])])
            assert wait_until(commits.writing)
            queued, before = started([record(svc, children[1])])
            assert wait_until(lambda: commits.queued() == 1)
            holder, _ = started([with_the_turn])
            assert taken.wait(30) and wait_until(lambda: commits.queued() == 2)
            waiting, after = started([record(svc, children[2])])
            # It waits before loading: it never reaches the queue while the turn is held.
            assert not wait_until(lambda: commits.queued() > 2, timeout=0.5)
            release()
            joined(first + queued + holder + waiting)
        assert (before, holding, after) == ([[2]], [[3]], [[2]])
        assert sequences(svc, children[1]) == [1, 2, 3]
        log = svc.store.recorder.select_notifications(start=1, limit=1000)
        order = {(n.originator_id, n.originator_version): n.id for n in log}
        ids = {child: svc.store.resolve_id(child)[1] for child in children}
        held = order[ids[children[1]], 3]
        assert order[ids[children[2]], 2] > held
