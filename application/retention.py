"""Retention and the maintenance passes: prune (R-R1, R-W6) and the start-up sweep (R-N6)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID

from session_awareness.application.errors import StoreUnavailableError
from session_awareness.application.interruption import Interruption, interrupted
from session_awareness.application.lifecycle import remove_cursors
from session_awareness.application.ports import PrunePlan
from session_awareness.application.store import SessionStore
from session_awareness.application.unit_of_work import UnitOfWork
from session_awareness.domain import notices
from session_awareness.domain.keys import drains_id, is_subagent
from session_awareness.domain.positions import RemovalReason
from session_awareness.domain.session import Session
from session_awareness.domain.signals import MAX_SAFE_INTEGER, to_ms
from session_awareness.logs import get_logger

if TYPE_CHECKING:
    from session_awareness.domain.drains import Drains

log = get_logger()
PRUNE_INTERVAL = timedelta(hours=1)
#: How far past the age limit the newest recorded row may lie behind the clock before a prune
#: takes the reading for a clock step and refuses to remove anything.
CLOCK_LEAP = timedelta(days=30)
#: Rows recorded this close to the reading (or after it) do not count as the newest: a wrong
#: reading's own record must not vouch for it.
RECENT = timedelta(minutes=1)
#: A reading this far behind the last prune's is jitter, not a step back.
CLOCK_SLACK = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class Retention:
    """How long and how many `changesSince` rows are kept; cursors expire with the age (R-R1)."""

    days: int = 30
    rows: int = 50_000


#: The longest age limit a store takes, in days (a century): the cutoff, now minus the
#: limit, stays a date the clock can hold.
MAX_RETENTION_DAYS = 36_500
#: The largest row cap a store takes: the largest integer every backend and JSON holds.
MAX_RETENTION_ROWS = MAX_SAFE_INTEGER


#: Retained rows one prune batch removes at most, in one transaction of its own (ADR 038).
PRUNE_BATCH_ROWS = 2_000
#: Idle cursors one expiry batch removes at most, in one transaction of its own.
EXPIRY_BATCH = 200
#: Watchers one sweep batch re-delivers to and wakes, in one transaction.
SWEEP_BATCH = 100


class PrunePass:
    """One prune (R-R1, R-W6) in bounded batches (ADR 038): `step()` runs the next batch in
    a transaction of its own and says whether more remains. A batch plans the oldest
    doomed rows in the read model and stores one `Session.HistoryPruned` per session it
    reaches, built at the stream's latest version without loading the session (a save
    that raced it is a conflict, and the batch is planned again); then idle cursors expire,
    a bounded batch at a time, each read as a page after the one before. The clock is read
    once, when the pass starts. Each raised watermark is listed in `result` only with
    `watermarks` (a caller's `prune()`); the background pass counts them (`raised`). So
    its memory does not grow with the store, nor with its idle cursors."""

    def __init__(self, maintenance: Maintenance, *, watermarks: bool = True) -> None:
        self._store = store = maintenance.store
        self._rows = maintenance.retention.rows
        self.now = now = store.clock()
        limit = timedelta(days=maintenance.retention.days)
        self._cutoff = to_ms(now - limit)
        self._idle_before = now - limit
        self.result: dict[str, Any] = {"removedRows": 0, "watermarks": [], "expiredCursors": 0}
        self._listed = watermarks
        #: Each listed session's entry in `result`, by agent and key: a session whose rows
        #: span two batches is raised by each, and listed once, at its highest watermark.
        self._entries: dict[tuple[str | None, str | None], dict[str, Any]] = {}
        #: The watermarks raised so far, listed or not.
        self.raised = 0
        newest = store.read_model.newest_recorded(before=to_ms(now - RECENT))
        far = newest is not None and to_ms(now) - newest > to_ms_span(limit + CLOCK_LEAP)
        #: The newest recorded time when the reading was taken for a wrong one: no removal.
        self.refused = newest if far else None
        self._expiring = False  # rows are pruned first, then idle cursors expire
        #: The stored time and watch id the next page of idle cursors starts after.
        self._idle_after: tuple[int, UUID] | None = None
        self._after = 0  # the last recording position a batch of this pass removed
        self.done = far
        self.batches = 0

    def step(self) -> bool:
        """Run the next batch; whether more remains."""
        if self.done:
            return False
        self.batches += 1
        if not self._expiring:
            if self._prune_batch():
                return True
            self._expiring = True
        page = self._store.read_model.cursors_idle_before(
            self._cutoff, after=self._idle_after, limit=EXPIRY_BATCH
        )
        if page:
            self._idle_after = (page[-1][0], page[-1][1].watch_id)
            batch = [row for _, row in page]
            self.result["expiredCursors"] += self._store.run(
                lambda uow: remove_cursors(
                    uow, batch, RemovalReason.EXPIRED, self.now, idle_before=self._idle_before
                )
            )
        self.done = len(page) < EXPIRY_BATCH
        return not self.done

    def _prune_batch(self) -> bool:
        """One batch of rows; whether it was full (more may remain)."""

        def attempt(_: UnitOfWork) -> list[PrunePlan]:
            read_model = self._store.read_model
            plans = read_model.prune_plan(
                recorded_before=self._cutoff,
                keep_rows=self._rows,
                limit=PRUNE_BATCH_ROWS,
                after=self._after,
            )
            versions = read_model.aggregate_versions([plan.session_id for plan in plans])
            planned = [plan for plan in plans if plan.session_id in versions]
            if planned:
                self._store.save_events(
                    [
                        Session.history_pruned(
                            plan.session_id,
                            version=versions[plan.session_id],
                            watermark=plan.watermark,
                            at=self.now,
                        )
                        for plan in planned
                    ]
                )
            return plans

        plans = self._store.run(attempt)
        # Rows up to here are gone or were not doomed when planned (one that became doomed
        # since, the row cap moving up, goes in the next pass).
        self._after = max([self._after, *(plan.last_position for plan in plans)])
        for plan in plans:
            self.result["removedRows"] += plan.rows
            self.raised += 1
            if self._listed:
                self._list(plan)
        return sum(plan.rows for plan in plans) >= PRUNE_BATCH_ROWS

    def _list(self, plan: PrunePlan) -> None:
        """`plan`'s session in `result`, once, at the highest watermark a batch raised it to
        (as `prune_preview` lists it)."""
        entry = self._entries.get((plan.agent_id, plan.key))
        if entry is None:
            entry = {"sessionKey": plan.key, "agentId": plan.agent_id, "watermark": plan.watermark}
            self._entries[plan.agent_id, plan.key] = entry
            self.result["watermarks"].append(entry)
        else:
            entry["watermark"] = max(entry["watermark"], plan.watermark)


class SweepPass:
    """The start-up sweep (R-N6) in bounded batches (ADR 038): `step()` re-delivers the next
    watchers' pending notices in one transaction and wakes the loud ones; whether more
    remains. Each pending cursor is loaded once, for both its re-delivery and whether it is
    ambient (R-W7). A batch's work is set-based: its watchers' gone-ness and pending cursors
    are one query each, and its cursors and `Drains` are loaded with one read of the store
    (`UnitOfWork.prefetch`), not one load per aggregate."""

    def __init__(self, maintenance: Maintenance, *, redeliver: bool) -> None:
        self._m = maintenance
        self._store = maintenance.store
        self._redeliver = redeliver
        self._watchers = self._store.read_model.watchers_with_pending()
        self.total = len(self._watchers)
        self.swept = self.woken = self.redelivered = 0
        self.done = not self._watchers

    def step(self) -> bool:
        if self.done:
            return False
        batch = self._m.not_gone(self._watchers[:SWEEP_BATCH])
        self._watchers = self._watchers[SWEEP_BATCH:]
        loud: list[str] = []
        if self._redeliver:
            try:
                self.redelivered += self._store.run(lambda uow: self._batch(uow, batch, loud))
            except StoreUnavailableError as error:
                if interrupted():  # the close ended the batch: not a store that refuses writes
                    raise
                log.warning(
                    "notices_not_redelivered",
                    watcher=batch[0] if batch else None,
                    watchers=len(batch),
                    error=str(error),
                )
                self._redeliver = False  # a store that cannot be written: wake only
                loud.clear()
        if not self._redeliver:
            self._batch(UnitOfWork(self._store), batch, loud, store=False)
        self.woken += self._store.wake(loud, coalesce=False)
        self.swept += len(batch)
        self.done = not self._watchers
        return not self.done

    def _batch(
        self, uow: UnitOfWork, watchers: list[str], loud: list[str], *, store: bool = True
    ) -> int:
        """Each watcher's pending cursors, loaded once: raise N to M on those with material
        past N, one event on its `Drains` (ADR 034), and note the watcher as loud when one
        of them is not ambient (R-W7, sub-agents are never woken)."""
        loud.clear()  # the attempt may run again
        pending_of = self._store.read_model.pending_of_watchers(watchers)
        drains = [drains_id(watcher) for watcher in watchers] if store else []
        wids = [wid for watcher in watchers for wid, _ in pending_of.get(watcher, ())]
        uow.prefetch([*drains, *wids], absent_kept=frozenset(drains))
        redelivered = 0
        for watcher in watchers:
            pending = []
            for wid, material in pending_of.get(watcher, ()):
                watch = uow.cursor_to_read(wid)
                if watch is not None and watch.pending:
                    pending.append((watch, material))
            if not is_subagent(watcher) and any(notices.wakes(watch) for watch, _ in pending):
                loud.append(watcher)
            if not store:
                continue
            drained, entries = notices.redeliver(
                uow.drains(watcher), watcher, pending, at=self._store.clock()
            )
            if entries:
                uow.add(cast("Drains", drained))
            redelivered += len(entries)
        return redelivered


class Maintenance:
    """Retention's prune and the start-up sweep, each a pass of bounded batches (ADR 038):
    `prune()` and `sweep()` run a whole pass; the service's background task
    (`MaintenanceTask`) runs them a batch at a time."""

    def __init__(self, store: SessionStore, retention: Retention) -> None:
        self.store, self.retention = store, retention
        #: While the clock reads within [from, until), no prune is due: the hourly gate.
        self._quiet: tuple[datetime, datetime] | None = None

    def _pruned(self, at: datetime) -> None:
        self._quiet = (at - CLOCK_SLACK, at + PRUNE_INTERVAL)

    def prune_due(self, now: datetime) -> bool:
        """Whether a prune is due (at most hourly, R-R1). A reading behind the last prune's
        (the clock stepped back, or that reading was wrong) makes one due at once: a single
        wrong reading never postpones pruning."""
        quiet = self._quiet
        return quiet is None or not quiet[0] <= now < quiet[1]

    def prune(self) -> dict[str, Any]:
        """Retention (R-R1): drop rows older than the age limit, then all but the newest rows
        across sessions, raising each session's watermark first; expire idle cursors (R-W6).

        A clock reading far ahead of everything the store has recorded (more than the age
        limit plus `CLOCK_LEAP` past its newest row) is taken for a wrong reading: nothing is
        removed or expired, the refusal is logged (`history_prune_refused`), and the next
        prune decides again."""
        passing = self.start_prune()
        while passing.step():
            pass
        return self.finish_prune(passing)

    def start_prune(self, *, watermarks: bool = True) -> PrunePass:
        return PrunePass(self, watermarks=watermarks)

    def finish_prune(self, passing: PrunePass) -> dict[str, Any]:
        """Close the hourly gate and log the pass's outcome; its result."""
        self._pruned(self.store.clock())
        result = passing.result
        if passing.refused is not None:
            log.warning(
                "history_prune_refused",
                reason="the clock reads far ahead of the newest recorded time",
                now=to_ms(passing.now),
                newest_recorded=passing.refused,
            )
            return result
        log.info(
            "history_pruned",
            removed_rows=result["removedRows"],
            sessions=passing.raised,
            expired_cursors=result["expiredCursors"],
            batches=passing.batches,
        )
        return result

    def prune_failed(self, now: datetime, error: Exception) -> None:
        """A prune that failed is maintenance's problem, never a caller's: logged, and not
        tried again before the next hour."""
        self._pruned(now)
        log.error("history_prune_failed", error=repr(error))

    def sweep(self, *, redeliver: bool = True) -> int:
        """Startup sweep (R-N6): re-deliver every pending notice, raising its N to its M as
        the reference's sweep re-materializes it (its drain then acknowledges up to M, no
        follow-up for what its page covers; ADR 034), and wake every non-sub-agent watcher
        with a pending notice, once, skipping watchers whose session is gone. Returns the
        number of wakes issued. It re-delivers wakes that may have been lost, so it is not
        coalesced (R-N5). Without `redeliver` (the wake feed reconnected, the process kept
        its notices) it only wakes."""
        passing = self.start_sweep(redeliver=redeliver)
        while passing.step():
            pass
        return self.finish_sweep(passing)

    def start_sweep(self, *, redeliver: bool = True) -> SweepPass:
        return SweepPass(self, redeliver=redeliver)

    def finish_sweep(self, passing: SweepPass) -> int:
        log.info(
            "notices_swept",
            watchers=passing.swept,
            woken=passing.woken,
            redelivered=passing.redelivered,
        )
        return passing.woken

    def not_gone(self, watchers: list[str]) -> list[str]:
        """`watchers` but those whose sessions are all deleted (a key no session has is not
        gone), in order: the sweep skips them (R-N6). One query for a bounded batch (ADR
        038)."""
        gone = self.store.read_model.gone_keys(watchers)
        return [watcher for watcher in watchers if watcher not in gone]

    def prune_preview(self) -> dict[str, Any]:
        """What `prune()` would do now, in its shape, changing nothing (R-R1, R-W6): two
        reads of the store, whatever the number of sessions."""
        cutoff = to_ms(self.store.clock() - timedelta(days=self.retention.days))
        plans = self.store.read_model.prune_preview_plan(
            recorded_before=cutoff, keep_rows=self.retention.rows
        )
        raised = [
            {"sessionKey": plan.key, "agentId": plan.agent_id, "watermark": plan.watermark}
            for plan in plans
        ]
        expired = self.store.read_model.cursors_idle_count(cutoff)
        removed = sum(plan.rows for plan in plans)
        return {"removedRows": removed, "watermarks": raised, "expiredCursors": expired}


def to_ms_span(span: timedelta) -> int:
    return int(span.total_seconds() * 1000)


#: How often (real seconds) the background task looks whether a prune is due by the clock.
POLL_SECONDS = 30.0
#: How long `close()` waits for the thread once it has ended the batch under way (R-M2).
STOP_SECONDS = 0.5
#: How often, while it waits, `close()` ends a statement the batch started since.
STOP_TICK = 0.05


class MaintenanceTask:
    """The service's background maintenance (ADR 038): a daemon thread that runs the sweep
    (R-N6) and the prune (R-R1) a bounded batch at a time, outside every producer and query
    call; a restart answers its first call at once while it works. When the start skipped
    the read models' check on a store marked complete (ADR 044), that check (`verify`) is
    the first batch, before anything else reads the read models. The prune goes first,
    as it did at start-up (a cursor idle past the age limit expires rather than wakes, R-W6),
    then the sweep, then, each `poll` seconds, a prune when the service clock says one is
    due (hourly). Progress and outcome are logged
    (`maintenance_progress`, `maintenance_done`); errors are logged, never raised. `step()`
    runs one batch in the caller's thread (tests and hosts drive it deterministically).
    Each batch runs in the task's `Interruption` scope, so `close()` can end its statement
    under way at once (R-M2), the check's rebuild of the read models included."""

    def __init__(
        self,
        maintenance: Maintenance,
        *,
        poll: float = POLL_SECONDS,
        verify: Callable[[], bool] | None = None,
    ) -> None:
        self._m = maintenance
        #: The read models' full check and repair (ADR 044); whether it rebuilt them.
        self._verify = verify
        self._verify_asked = False
        self._poll = poll
        self._batch = threading.Lock()  # one batch at a time, whichever thread runs it
        #: Guards what is asked for and under way; held for a look, never across a batch, so
        #: a question (`idle`) or a request (`ask_sweep`, from the wake listener's thread)
        #: is answered at once while a batch runs.
        self._state = threading.Lock()
        #: The work of the batch under way (None between batches).
        self._running: Callable[[], None] | None = None
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._prune: PrunePass | None = None
        self._sweep: SweepPass | None = None
        #: A sweep asked for and not started: whether it re-delivers (None: none asked).
        self._sweep_asked: bool | None = True  # the start-up sweep
        #: Ends the batch under way on `close()` (its statement, on its own connections).
        self._interruption = Interruption()

    def start(self) -> None:
        """Start the thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="session-awareness-maintenance", daemon=True
            )
            self._thread.start()

    def ask_verify(self) -> None:
        """Run the read models' check (`verify`) as the next batch, before any other."""
        with self._state:
            self._verify_asked = self._verify is not None
        self._wake.set()

    def ask_sweep(self, *, redeliver: bool) -> None:
        """Sweep again soon (the wake feed reconnected: `redeliver=False`)."""
        with self._state:
            self._sweep_asked = redeliver or bool(self._sweep_asked)
        self._wake.set()

    @property
    def idle(self) -> bool:
        """Whether no work is under way or due now; answered at once, even mid-batch."""
        now = self._m.store.clock()
        with self._state:
            return self._running is None and self._next(now, take=False) is None

    def step(self) -> bool:
        """Run one batch of the work under way or due; whether there was any."""
        with self._batch:
            now = self._m.store.clock()  # read outside `_state`: a clock may take its time
            with self._state:
                work = self._running = self._next(now, take=True)
            if work is None:
                return False
            try:
                with self._interruption.scope():
                    work()
            finally:
                with self._state:
                    self._running = None
            return True

    def _next(self, now: datetime, *, take: bool) -> Callable[[], None] | None:
        """The batch to run next, under `_state`; with `take`, the request it answers is
        taken (an ask made after this look is kept for a later batch)."""
        if self._verify_asked:
            if take:
                self._verify_asked = False
            return self._verify_step
        if self._prune is not None or self._m.prune_due(now):
            return self._prune_step
        if self._sweep is not None:
            return self._sweep_step
        if self._sweep_asked is not None:
            redeliver = self._sweep_asked
            if take:
                self._sweep_asked = None
            return lambda: self._sweep_step(start=redeliver)
        return None

    def run_due(self) -> None:
        """Run every batch of the work under way or due, in the caller's thread."""
        while self.step():
            pass

    def _verify_step(self) -> None:
        if self._verify is None:  # asked only with one (`ask_verify`)
            return
        try:
            rebuilt = self._verify()
        except Exception as error:  # noqa: BLE001 -- maintenance, never a caller's problem
            self._failed("verify", error)
            return
        log.info("maintenance_done", task="verify", rebuilt=rebuilt)

    def _failed(self, task: str, error: Exception) -> None:
        """A batch that failed is logged as an ERROR, unless the service was closing: then
        `close()` ended it (its statement interrupted, its transaction rolled back), and an
        INFO line `maintenance_interrupted` says which; the next start runs the work again."""
        if self._stopping.is_set():
            log.info("maintenance_interrupted", task=task, error=repr(error))
        else:
            log.error("maintenance_failed", task=task, error=repr(error))

    def _sweep_step(self, *, start: bool | None = None) -> None:
        """The next batch of the sweep under way, or, with `start` (whether it re-delivers),
        the first of a new one."""
        try:
            if start is not None:
                self._sweep = self._m.start_sweep(redeliver=start)
            passing = cast(SweepPass, self._sweep)
            more = passing.step()
        except Exception as error:  # noqa: BLE001 -- maintenance, never a caller's problem
            self._sweep = None
            self._failed("sweep", error)
            return
        log.info("maintenance_progress", task="sweep", done=passing.swept, of=passing.total)
        if not more:
            self._sweep = None
            woken = self._m.finish_sweep(passing)
            log.info("maintenance_done", task="sweep", watchers=passing.swept, woken=woken)

    def _prune_step(self) -> None:
        now = self._m.store.clock()
        try:
            if self._prune is None:
                self._prune = self._m.start_prune(watermarks=False)  # counted, not kept
            passing = self._prune
            more = passing.step()
        except Exception as error:  # noqa: BLE001 -- maintenance, never a caller's problem
            self._prune = None
            if not self._stopping.is_set():
                self._m.prune_failed(now, error)
            self._failed("prune", error)
            return
        result = passing.result
        figures = {
            "task": "prune",
            "batches": passing.batches,
            "removed_rows": result["removedRows"],
            "sessions": passing.raised,
        }
        log.info("maintenance_progress", **figures, expired_cursors=result["expiredCursors"])
        if not more:
            self._prune = None
            self._m.finish_prune(passing)
            log.info("maintenance_done", **figures)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                worked = self.step()
            except Exception as error:  # noqa: BLE001 -- the thread must outlive a bad batch
                self._failed("step", error)
                worked = False
            if not worked:
                self._wake.wait(self._poll)
                self._wake.clear()

    def close(self, deadline: float = STOP_SECONDS) -> bool:
        """Stop the thread now (R-M2): the batch under way is ended at once, its statement
        interrupted on the maintenance's own connection (never a caller's) and its
        transaction rolled back, which logs `maintenance_interrupted`; the next start runs
        that work again. Waits at most `deadline` seconds for the thread, ending any
        statement the batch starts meanwhile; whether it stopped (else logged
        `maintenance_not_stopped`: it is a daemon, and every later store call of its batch
        fails at once)."""
        self._stopping.set()
        self._wake.set()
        self._interruption.fire()
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return True
        until = time.monotonic() + deadline
        while thread.is_alive() and (left := until - time.monotonic()) > 0:
            thread.join(min(STOP_TICK, left))
            self._interruption.fire()  # a statement begun since the last one
        if thread.is_alive():
            log.warning("maintenance_not_stopped", waited=deadline)
            return False
        return True
