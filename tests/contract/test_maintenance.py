"""The maintenance: the prune and the start-up sweep in bounded batches, on a thread of the
service's, never inside a call (R-R1, R-N6, ADR 038)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from structlog.testing import capture_logs

from session_awareness.application import SessionAwareness, open_service
from session_awareness.application import retention as retention_module
from session_awareness.application.errors import ConfigurationError, StoreUnavailableError
from session_awareness.application.store import READ_MODEL_QUERIES, SessionStore
from session_awareness.application.unit_of_work import UnitOfWork
from session_awareness.domain.drains import Drains
from session_awareness.domain.keys import drains_id, watch_id
from session_awareness.domain.session import Session
from session_awareness.domain.watch import Watch
from tests.conftest import FakeClock, RecordingWaker, ServiceFactory, wait_until
from tests.contract.helpers import (
    CHILD,
    MANAGER,
    OTHER,
    PEER,
    cursor,
    notice,
    restart,
    sequences,
    spawn,
)
from tests.ops.helpers import tamper

#: The aggregates the store snapshots (ADR 022).
SNAPSHOTTED = (Session, Watch, Drains)
#: How long a test waits for the maintenance thread (a deadline, not a pause).
DEADLINE = 30.0


def children(count: int) -> list[str]:
    return [f"agent:main:subagent:c{n}" for n in range(count)]


def hold_prune_batches(
    monkeypatch: pytest.MonkeyPatch, then: Callable[[Any], bool] | None = None
) -> tuple[threading.Event, threading.Event]:
    """Hold each prune batch, on whichever thread runs it, until released; then run it (or
    `then`, in its place). The events: a batch started; release it."""
    started, release = threading.Event(), threading.Event()
    batch = then or retention_module.PrunePass.step

    def held_step(self: Any) -> bool:
        started.set()
        assert release.wait(DEADLINE)
        return batch(self)

    monkeypatch.setattr(retention_module.PrunePass, "step", held_step)
    return started, release


def five_watchers_of_child(svc: SessionAwareness) -> list[str]:
    """Five main sessions watching CHILD, and CHILD's first signal: a notice open for each."""
    watchers = [f"agent:w{n}:main" for n in range(5)]
    svc.open_session(CHILD)
    for watcher in watchers:
        svc.open_session(watcher)
        assert svc.watch(watcher, CHILD)
    svc.record_human_direct_message(CHILD, channel="telegram")
    return watchers


def session_loads(svc: SessionAwareness) -> list[Any]:
    """Spy on the event store's stream reads (an aggregate load reads its stream)."""
    calls: list[Any] = []
    recorder: Any = svc.store.recorder
    inner = recorder.select_events

    def select_events(originator_id: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(originator_id)
        return inner(originator_id, *args, **kwargs)

    recorder.select_events = select_events
    return calls


class TestPruneInBatches:
    def test_a_prune_loads_no_session_and_stores_each_raise_in_bounded_batches(
        self, open_svc: ServiceFactory, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-R1, R-R2 (ADR 038): a prune of many sessions reads no session's stream: each
        batch plans its rows in the read model and stores one `HistoryPruned` per session,
        in a transaction per batch; the audit trail shows every raise, and a replay of the
        event store reproduces the pruned read models."""
        monkeypatch.setattr(retention_module, "PRUNE_BATCH_ROWS", 3)
        svc = open_svc()
        keys = children(7)
        for key in keys:  # no cursors: their expiry loads each one it removes, as it must
            svc.open_session(key)
            svc.record_goal_changed(key, summary="goal created")
        svc.close()
        clock.advance(days=31)
        again = open_svc()  # a cold cache: the old prune loaded each session from the store
        loads = session_loads(again)
        with capture_logs() as logs:
            result = again.prune()
        assert loads == []
        assert result["removedRows"] == 7
        assert sorted(w["sessionKey"] for w in result["watermarks"]) == sorted(keys)
        [pruned] = [e for e in logs if e["event"] == "history_pruned"]
        assert pruned["batches"] >= 3  # 7 rows, at most 3 a batch
        for key in keys:
            assert sequences(again, key) == []
            assert [e["event"] for e in again.history(key)][-1] == "history_pruned"
        report = again.audit()
        assert report.clean, report.as_dict()

    def test_a_session_whose_rows_span_two_batches_is_listed_once_as_the_preview_lists_it(
        self, open_svc: ServiceFactory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-R1 (ADR 038): `prune()` lists each session it raised once, at its highest
        watermark, as `prune_preview()` does: a session whose rows span two batches was
        listed by each batch (two entries, the first at a watermark it no longer has)."""
        monkeypatch.setattr(retention_module, "PRUNE_BATCH_ROWS", 2)
        svc = open_svc(retention_rows=1)
        svc.open_session(MANAGER)
        for _ in range(5):
            svc.record_goal_changed(MANAGER, summary="goal updated")
        preview = svc.prune_preview()
        result = svc.prune()
        assert result["watermarks"] == preview["watermarks"]
        assert result["watermarks"] == [{"sessionKey": MANAGER, "agentId": "main", "watermark": 4}]
        assert result["removedRows"] == preview["removedRows"] == 4
        assert sequences(svc, MANAGER) == [5]

    def test_the_background_pass_counts_the_watermarks_it_raises_without_listing_them(
        self, open_svc: ServiceFactory, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-R1 (ADR 038, issue 39 item 6): `prune()` returns each raised watermark, but the
        background pass only counts them: a list of a million sessions' watermarks (about
        400 bytes each) grew the start-up prune of a million-session store by hundreds of
        MB. Its log still says how many sessions it reached."""
        monkeypatch.setattr(retention_module, "PRUNE_BATCH_ROWS", 2)
        svc = open_svc()
        keys = children(5)
        for key in keys:
            svc.open_session(key)
            svc.record_goal_changed(key, summary="goal created")
        clock.advance(days=31)
        passing = svc._maintenance.start_prune(watermarks=False)
        while passing.step():
            pass
        assert passing.result["removedRows"] == 5
        assert passing.result["watermarks"] == []
        assert passing.raised == 5
        for key in keys:
            assert sequences(svc, key) == []
        clock.advance(minutes=61)
        for key in children(10)[5:]:
            svc.open_session(key)
            svc.record_goal_changed(key, summary="goal created")
        clock.advance(days=31)
        with capture_logs() as logs:
            svc.maintain()  # the background task's pass, in this thread
        [done] = [e for e in logs if e["event"] == "maintenance_done" and e["task"] == "prune"]
        assert (done["removed_rows"], done["sessions"]) == (5, 5)
        [pruned] = [e for e in logs if e["event"] == "history_pruned"]
        assert pruned["sessions"] == 5

    def test_idle_cursors_are_read_and_expired_a_page_at_a_time(
        self, svc: SessionAwareness, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-W6 (ADR 038, issue 39 item 6): the prune reads idle cursors a page of
        `EXPIRY_BATCH` at a time, each page after the last row of the one before (its stored
        time, then its watch id: cursors touched at the same moment straddle a page), never
        the whole list at once: at a million sessions that list alone would hold hundreds of
        MB. Every idle cursor expires, and none is read twice; a preview counts them in the
        store."""
        monkeypatch.setattr(retention_module, "EXPIRY_BATCH", 2)
        keys = children(5)
        for number, key in enumerate(keys):  # at one clock reading: one stored time
            spawn(svc, child=key, run=f"run-{number}")
        every = sorted(row.watch_id for row in svc.read_model.cursors_updated_before(2**62))
        pages, after = [], None
        while page := svc.read_model.cursors_idle_before(2**62, after=after, limit=2):
            pages.append([row.watch_id for _, row in page])
            after = (page[-1][0], page[-1][1].watch_id)
        assert [len(page) for page in pages] == [2, 2, 1]
        assert sorted(wid for page in pages for wid in page) == every
        clock.advance(days=31)

        def whole_list(before: int) -> Any:
            raise AssertionError(f"the whole list of cursors idle before {before} was read")

        monkeypatch.setattr(svc.store.read_model, "cursors_updated_before", whole_list)
        assert svc.prune_preview()["expiredCursors"] == 5  # counted by the store
        with capture_logs() as logs:
            result = svc.prune()
        assert result["expiredCursors"] == 5
        assert all(cursor(svc, MANAGER, key) is None for key in keys)
        [pruned] = [e for e in logs if e["event"] == "history_pruned"]
        assert pruned["batches"] >= 3  # five cursors, two a page

    def test_a_batch_is_planned_after_the_last_position_the_one_before_removed(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-R1 (ADR 038): a batch plan names each session's agent, key and last position
        removed, and the next batch starts after it: a pass never walks back over what it
        removed (or over rows planned while they were not yet doomed)."""
        keys = children(3)
        for key in keys:
            svc.open_session(key)
            svc.record_goal_changed(key, summary="goal created")
            svc.record_goal_changed(key, summary="goal updated")
        clock.advance(days=31)
        read_model = svc.store.read_model
        cutoff = int(clock.now.timestamp() * 1000) - 30 * 86_400_000

        def plan(after: int) -> list[Any]:
            return read_model.prune_plan(
                recorded_before=cutoff, keep_rows=50_000, limit=3, after=after
            )

        def planned(plans: list[Any]) -> list[tuple[str, int, int]]:
            return sorted((p.key, p.watermark, p.rows) for p in plans)

        first = plan(0)  # the oldest three rows: both of the first session's, one of the next
        assert planned(first) == [(keys[0], 2, 2), (keys[1], 1, 1)]
        second = plan(max(p.last_position for p in first))
        assert planned(second) == [(keys[1], 2, 1), (keys[2], 2, 2)]
        assert plan(max(p.last_position for p in second)) == []

    def test_a_prune_that_lost_a_race_to_a_record_plans_again(
        self, svc: SessionAwareness, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-R1 (ADR 038): a session recorded between a batch's plan and its save makes the
        batch's events conflict; the batch is planned again, and nothing is lost."""
        spawn(svc)
        clock.advance(days=31)
        read_model: Any = svc.store.read_model
        plan = read_model.prune_plan
        raced: list[bool] = []

        def racing_plan(**kwargs: Any) -> Any:
            plans = plan(**kwargs)
            if not raced:
                raced.append(True)
                svc.record_goal_changed(CHILD, summary="goal updated")  # 2, its version moves
            return plans

        monkeypatch.setattr(read_model, "prune_plan", racing_plan)
        result = svc.prune()
        assert result["removedRows"] == 1
        assert sequences(svc, CHILD) == [2]
        assert svc.session_status(CHILD, changes_since=0)["stateChanges"]["historyGap"] is True
        assert svc.audit().clean


def preview_as_before(svc: SessionAwareness, clock: FakeClock, keep_rows: int) -> dict[str, Any]:
    """What `prune_preview` computed before (issue 39): the plan, then each planned
    session's row and head read one at a time."""
    read_model = svc.read_model
    cutoff = int(clock.now.timestamp() * 1000) - 30 * 86_400_000
    raised, removed = [], 0
    for plan in read_model.prune_plan(recorded_before=cutoff, keep_rows=keep_rows):
        row = read_model.session(plan.session_id)
        state = read_model.session_state(plan.session_id, after=None, limit=0)
        if row is None or state is None or plan.watermark <= state.head.pruned_watermark:
            continue
        removed += plan.rows
        raised.append({"sessionKey": row.key, "agentId": row.agent_id, "watermark": plan.watermark})
    expired = read_model.cursors_idle_count(cutoff)
    return {"removedRows": removed, "watermarks": raised, "expiredCursors": expired}


def counted_reads(svc: SessionAwareness, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every read-model query the service asks from now on, by name; a session's row or
    head asked one at a time fails the test."""
    asked: list[str] = []
    guarded: Any = svc.store.read_model
    for name in READ_MODEL_QUERIES:
        inner = getattr(guarded, name)

        def counting(*args: Any, _name: str = name, _inner: Any = inner, **kwargs: Any) -> Any:
            if _name in ("session", "session_state"):
                raise AssertionError(f"the preview asked {_name} of one session")
            asked.append(_name)
            return _inner(*args, **kwargs)

        monkeypatch.setattr(guarded, name, counting)
    return asked


class TestPrunePreviewIsOneRead:
    def test_the_preview_is_what_it_was_with_one_read_of_the_plan(
        self, open_svc: ServiceFactory, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-R1, R-W6 (issue 39, item 6): over sessions past the row cap, some pruned
        before and past it again, one deleted, one whose head already holds the plan's
        watermark, and idle cursors, the preview is what reading each planned session's row
        and head gave, in the same order, from one read of the plan and one count."""
        svc = open_svc(retention_rows=4)
        keys = children(6)
        for number, key in enumerate(keys):
            spawn(svc, child=key, run=f"run-{number}")  # the manager watches each child
            for turn in range(number % 3 + 1):
                svc.record_goal_changed(key, summary=f"goal {turn}")
        svc.prune()  # some sessions pruned, then past the cap again
        for key in keys[::2]:
            svc.record_goal_changed(key, summary="goal again")
            svc.record_goal_changed(key, summary="goal again and again")
        svc.delete_session(keys[1])
        held = svc.resolve_id(keys[4])[1]
        clock.advance(days=31)  # every row older than the age limit, every cursor idle
        svc.record_goal_changed(keys[5], summary="new")  # one row younger
        before = preview_as_before(svc, clock, keep_rows=4)
        [(watermark, _)] = [
            (w["watermark"], w) for w in before["watermarks"] if w["sessionKey"] == keys[4]
        ]
        tamper(svc, "UPDATE {s}session_state_heads SET pruned_watermark = ? WHERE session_id = ?",
               watermark, held)  # fmt: skip
        try:
            expected = preview_as_before(svc, clock, keep_rows=4)
            assert keys[4] not in [w["sessionKey"] for w in expected["watermarks"]]
            assert len(expected["watermarks"]) >= 3 and expected["expiredCursors"] >= 3
            asked = counted_reads(svc, monkeypatch)
            assert svc.prune_preview() == expected
            assert sorted(asked) == ["cursors_idle_count", "prune_preview_plan"]
        finally:
            tamper(svc, "UPDATE {s}session_state_heads SET pruned_watermark = 0 "
                   "WHERE session_id = ?", held)  # fmt: skip

    def test_the_preview_asks_as_many_reads_for_many_sessions_as_for_few(
        self, open_svc: ServiceFactory, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-R1 (issue 39, item 6): the preview's reads do not grow with the sessions it
        reaches: two for three sessions past the limits, two for twelve. It asked two
        reads of the store per session before (its row, its head)."""
        svc = open_svc(retention_rows=2)
        found = []
        for count in (3, 12):
            for key in children(count):
                svc.open_session(key)
                svc.record_goal_changed(key, summary="goal created")
                svc.record_goal_changed(key, summary="goal updated")
            clock.advance(days=31)
            with monkeypatch.context() as patched:
                asked = counted_reads(svc, patched)
                preview = svc.prune_preview()
            assert len(preview["watermarks"]) == count
            found.append(len(asked))
        assert found == [2, 2]


class TestSweepInBatches:
    def test_a_restart_re_delivers_and_wakes_every_watcher_across_batches(
        self, open_svc: ServiceFactory, waker: RecordingWaker, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-N6 (ADR 038): the start-up sweep runs a bounded batch of watchers at a time and
        still re-delivers every pending notice and wakes every watcher once."""
        monkeypatch.setattr(retention_module, "SWEEP_BATCH", 2)
        svc = open_svc()
        watchers = five_watchers_of_child(svc)  # 1: opens five notices
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2
        svc.close()
        waker.woken.clear()
        again = restart(open_svc)
        assert sorted(waker.woken) == sorted(watchers)
        for watcher in watchers:
            assert again.pending_notices(watcher) == [notice(CHILD, 0)]
            assert again.drain_notices(watcher) == [notice(CHILD, 0)]
            assert again.pending_notices(watcher) == []  # acknowledged up to M (ADR 034)


class TestTheBackgroundTask:
    def test_a_restart_answers_at_once_while_its_maintenance_runs_on_a_thread(
        self, open_svc: ServiceFactory, waker: RecordingWaker, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-N6, R-R1 (ADR 038): open_service returns before the start-up maintenance has
        run; the service answers calls while the maintenance thread works; the thread then
        re-delivers and wakes, logging its progress, and leaves the task idle."""
        svc = open_svc()
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2: opens
        svc.close()
        waker.woken.clear()
        started, release = hold_prune_batches(monkeypatch)
        with capture_logs() as logs:
            again = open_svc(maintenance="background")
            assert started.wait(DEADLINE)  # the maintenance is under way, on its thread
            assert again.pending_notices(MANAGER) == [notice(CHILD, 1)]  # answered meanwhile
            assert waker.woken == []
            release.set()
            assert wait_until(lambda: waker.woken == [MANAGER], DEADLINE)
            assert wait_until(lambda: again.maintenance_idle, DEADLINE)
        done = [e["task"] for e in logs if e["event"] == "maintenance_done"]
        assert done == ["verify", "prune", "sweep"]  # the read models checked first (ADR 044)
        assert any(e["event"] == "maintenance_progress" for e in logs)
        threads = [t for t in threading.enumerate() if t.name == "session-awareness-maintenance"]
        again.close()
        assert all(not t.is_alive() for t in threads)

    def test_a_question_or_a_request_is_answered_at_once_while_a_batch_runs(
        self, open_svc: ServiceFactory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-N7, R-R1 (ADR 038): whether the maintenance is idle, and a request for a sweep
        (what the wake listener's thread asks when the store is back), are answered while a
        batch runs, not once it ends: a prune of a large store runs batch after batch for
        minutes, and the listener must go back to delivering wakes."""
        svc = open_svc()
        spawn(svc)
        svc.close()
        started, release = hold_prune_batches(monkeypatch)
        again = open_svc(maintenance="background")
        assert started.wait(DEADLINE)  # a batch is under way, on the maintenance thread
        answers: list[object] = []

        def ask() -> None:
            answers.append(again.maintenance_idle)
            again._task.ask_sweep(redeliver=False)
            answers.append("asked")

        threading.Thread(target=ask, daemon=True).start()
        try:
            assert wait_until(lambda: len(answers) == 2, 5.0), "blocked behind the batch"
        finally:
            release.set()
        assert answers == [False, "asked"]
        assert wait_until(lambda: again.maintenance_idle, DEADLINE)
        again.close()

    def test_a_batch_the_close_ends_is_logged_as_interrupted_not_as_a_failure(
        self, open_svc: ServiceFactory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-R1, R-N6 (ADR 038, 045), and R-L9's levels (an expected stop stays at INFO): a
        host that closes the service while a batch runs (a restart during a million-session
        store's start-up check) ends that batch with the store; an ERROR
        `maintenance_failed` would page an operator for nothing. It is logged at INFO,
        `maintenance_interrupted`, and the next start runs the work again."""
        open_svc().close()

        def closed(_: Any) -> bool:
            raise StoreUnavailableError("session store unavailable: the service is closed")

        started, release = hold_prune_batches(monkeypatch, then=closed)
        with capture_logs() as logs:
            again = open_svc(maintenance="background")
            assert started.wait(DEADLINE)
            closing = threading.Thread(target=again.close)
            closing.start()
            assert wait_until(again._task._stopping.is_set, DEADLINE)
            release.set()
            closing.join(DEADLINE)
        assert not closing.is_alive()
        levels = {(e["event"], e["log_level"]) for e in logs}
        assert ("maintenance_interrupted", "info") in levels
        assert not any(level == "error" for _, level in levels), levels

    def test_a_failing_prune_is_logged_never_raised_and_waits_an_hour(
        self, svc: SessionAwareness, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-R1 (ADR 038): a prune that fails is the maintenance's problem: logged, not
        raised to anyone, and not tried again before the next hour."""

        def broken(**_: Any) -> Any:
            raise RuntimeError("boom")

        monkeypatch.setattr(svc.store.read_model, "prune_plan", broken)
        with capture_logs() as logs:
            svc.maintain()
        failed = [e for e in logs if e["event"] == "maintenance_failed"]
        assert [e["task"] for e in failed] == ["prune"]
        assert any(e["event"] == "history_prune_failed" for e in logs)
        assert svc.maintenance_idle  # the sweep ran; the next prune waits for its hour
        clock.advance(minutes=61)
        assert not svc.maintenance_idle

    def test_an_unknown_mode_is_refused(self, database_url: str) -> None:
        """R-L9: a mistyped maintenance mode is the caller's mistake, said at open."""
        with pytest.raises(ConfigurationError, match="maintenance must be one of"):
            open_service(database_url, maintenance="later")


def spy(
    monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, calls: list[Any] | None = None
) -> list[Any]:
    """Record each call's first argument of `owner.name` (an instance's method) in `calls`."""
    calls = [] if calls is None else calls
    inner = getattr(owner, name)

    def spied(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0] if args else next(iter(kwargs.values()), None))
        return inner(*args, **kwargs)

    monkeypatch.setattr(owner, name, spied)
    return calls


def stream_loads(svc: SessionAwareness, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every one-stream read of the event store and of the snapshot store (an aggregate's
    load reads its snapshot, then its events)."""
    calls = spy(monkeypatch, svc.store.recorder, "select_events")
    snapshots: Any = svc.store.snapshots
    if snapshots is not None:
        spy(monkeypatch, snapshots.recorder, "select_events", calls)
    return calls


class TestSweepIsSetBased:
    """R-N6 (ADR 038, issue 39 item 6): a sweep batch's cost grows with its watchers and
    the wakes owed, not with one aggregate load each: one query for its watchers' gone-ness,
    one for their pending cursors, one read of the store for their cursors and `Drains`."""

    def test_a_batch_loads_its_cursors_and_drains_with_one_read_and_re_delivers_as_before(
        self, open_svc: ServiceFactory, waker: RecordingWaker, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-N6, R-N3 (ADR 034, 038): on a cold restart (no cursor cached), watchers with
        and without `Drains` in a batch, and a watcher whose session went while the pass ran:
        no aggregate is loaded alone, each batch reads the store once, and every live
        watcher's notice is re-delivered up to M and woken as before; the gone one is
        skipped."""
        monkeypatch.setattr(retention_module, "SWEEP_BATCH", 3)
        svc = open_svc()
        watchers = five_watchers_of_child(svc)  # 1: opens five notices
        assert svc.drain_notices(watchers[1]) == [notice(CHILD, 0)]  # w1 has Drains
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2: reopens w1's
        svc.record_human_direct_message(CHILD, channel="telegram")  # 3
        svc.close()
        waker.woken.clear()
        again = open_svc()
        passing = again._maintenance.start_sweep()
        again.delete_session(watchers[3])  # gone after the pass listed it
        again.store.aggregates.clear()  # cold again: no cursor cached
        loads = stream_loads(again, monkeypatch)
        reads = spy(monkeypatch, again.store.recorder, "select_streams")
        gone = spy(monkeypatch, again.store.read_model, "gone_keys")
        pending = spy(monkeypatch, again.store.read_model, "pending_of_watchers")
        waker.woken.clear()
        while passing.step():
            pass
        assert loads == []
        assert len(reads) == len(gone) == len(pending) == 2  # 5 watchers, 3 a batch
        assert [len(batch) for batch in gone] == [3, 2]
        assert sorted(waker.woken) == sorted(w for w in watchers if w != watchers[3])
        assert passing.redelivered == 4
        for watcher in (watchers[0], watchers[2], watchers[4]):
            assert cursor(again, watcher, CHILD) == (0, 3, 3)
            assert again.drain_notices(watcher) == [notice(CHILD, 0)]
            assert again.pending_notices(watcher) == []  # acknowledged up to M
        assert cursor(again, watchers[1], CHILD) == (1, 3, 3)
        assert again.drain_notices(watchers[1]) == [notice(CHILD, 1)]
        assert again.pending_notices(watchers[1]) == []
        report = again.audit()
        assert report.clean, report.as_dict()

    def test_a_cached_cursor_another_process_changed_is_fast_forwarded_in_the_batch(
        self, open_svc: ServiceFactory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-N6, R-N3 (ADR 024, 034): a cursor this process has cached and another process
        has changed since (a drain, then a reopened notice) is read from its cached version
        in the batch's one read, and re-delivered as the other process left it."""
        svc = open_svc()
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2: opens
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 1)]  # its cursor cached here
        other = open_svc()
        assert other.drain_notices(MANAGER) == [notice(CHILD, 1)]  # L = 2
        other.record_human_direct_message(CHILD, channel="telegram")  # 3: reopens
        other.record_human_direct_message(CHILD, channel="telegram")  # 4
        [child] = svc.read_model.sessions_with_key(CHILD)
        wid = watch_id(MANAGER, child.session_id)
        cached = svc.store.aggregates._items[wid].version
        loads = stream_loads(svc, monkeypatch)
        reads: list[dict[Any, int]] = spy(monkeypatch, svc.store.recorder, "select_streams")
        assert svc.sweep() == 1
        assert loads == []
        [known] = reads
        assert known[wid] == cached > 0  # fast-forwarded, not read whole
        assert known[drains_id(MANAGER)] == 0  # cached as absent, now created: read whole
        assert cursor(svc, MANAGER, CHILD) == (2, 4, 4)
        assert svc.drain_notices(MANAGER) == [notice(CHILD, 2)]
        assert svc.pending_notices(MANAGER) == []
        assert svc.audit().clean

    def test_a_watcher_drained_while_its_batch_ran_is_swept_again_on_fresh_state(
        self, open_svc: ServiceFactory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-N6, R-N3 (ADR 034, 038): another process drains a watcher between the batch's
        read and its save: the save conflicts, the batch runs again on what the drain left,
        and the drained notice is neither re-delivered nor acknowledged twice."""
        svc = open_svc()
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2: opens
        svc.record_human_direct_message(CHILD, channel="telegram")  # 3
        svc.close()
        again = open_svc()
        other = open_svc()
        drained: list[list[str]] = []
        prefetch = UnitOfWork.prefetch

        def raced(self: UnitOfWork, *args: Any, **kwargs: Any) -> None:
            prefetch(self, *args, **kwargs)
            if not drained:  # the first attempt has read; the drain commits before its save
                drained.append(other.drain_notices(MANAGER))

        monkeypatch.setattr(UnitOfWork, "prefetch", raced)
        attempts = spy(monkeypatch, again.store.recorder, "select_streams")
        with capture_logs() as logs:
            woken = again.sweep()
        assert drained == [[notice(CHILD, 1)]]
        assert len(attempts) == 2  # the batch ran again after its save lost the race
        [swept] = [e for e in logs if e["event"] == "notices_swept"]
        assert swept["redelivered"] == 0  # the drain's follow-up is at M: nothing to raise
        assert cursor(again, MANAGER, CHILD) == cursor(other, MANAGER, CHILD) == (2, 3, 3)
        assert woken == 1  # its follow-up is pending: the sweep wakes it, once
        assert again.drain_notices(MANAGER) == [notice(CHILD, 2)]
        assert again.pending_notices(MANAGER) == []
        assert again.audit().clean

    def test_gone_keys_and_pending_of_watchers_answer_as_the_one_watcher_queries(
        self, svc: SessionAwareness
    ) -> None:
        """R-N6: `gone_keys` is `sessions_with_key(include_deleted=True)` all deleted (a key
        no session has is not gone; one live agent's session keeps a key), and
        `pending_of_watchers` is each watcher's `pending_to_drain`, in the same order."""
        spawn(svc)
        spawn(svc, child=OTHER, run="run-2")
        for target in (CHILD, OTHER, CHILD):
            svc.record_human_direct_message(target, channel="telegram")
        svc.open_session(PEER)
        svc.open_session("shared", agent_id="a")
        svc.open_session("shared", agent_id="b")
        svc.delete_session("shared", agent_id="a")
        svc.open_session("gone", agent_id="a")
        svc.delete_session("gone", agent_id="a")
        read_model = svc.read_model
        keys = [MANAGER, PEER, "shared", "gone", "never"]
        assert read_model.gone_keys(keys) == {"gone"}
        assert read_model.gone_keys([]) == set()
        watchers = [MANAGER, PEER, CHILD]
        assert read_model.pending_of_watchers(watchers) == {
            MANAGER: read_model.pending_to_drain(MANAGER)
        }
        assert len(read_model.pending_to_drain(MANAGER)) == 2

    def test_cursors_and_drains_past_a_snapshot_are_read_from_it_in_the_batch(
        self, open_svc: ServiceFactory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-N6, R-N3 (ADR 022, 034): a cursor and a `Drains` with snapshots are read in
        the batch's one read from their latest snapshot and the events after it, as a load
        of each reads them, and re-delivered as before."""
        monkeypatch.setattr(SessionStore, "snapshotting_intervals", dict.fromkeys(SNAPSHOTTED, 2))
        svc = open_svc()
        spawn(svc)
        for _ in range(3):  # each opens a notice (a cursor event), each drain a Drains event
            svc.record_human_direct_message(CHILD, channel="telegram")
            svc.drain_notices(MANAGER)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 5: opens
        svc.record_human_direct_message(CHILD, channel="telegram")  # 6
        expected = cursor(svc, MANAGER, CHILD)
        svc.close()
        again = open_svc()
        [child] = again.read_model.sessions_with_key(CHILD)
        wid, did = watch_id(MANAGER, child.session_id), drains_id(MANAGER)
        snapshots: Any = again.store.snapshots
        assert snapshots.get(wid, desc=True, limit=1) and snapshots.get(did, desc=True, limit=1)
        loads = stream_loads(again, monkeypatch)
        assert again.sweep() == 1
        assert loads == []
        assert expected == (4, 5, 6)
        assert cursor(again, MANAGER, CHILD) == (4, 6, 6)
        assert again.drain_notices(MANAGER) == [notice(CHILD, 4)]
        assert again.pending_notices(MANAGER) == []
        assert again.audit().clean
