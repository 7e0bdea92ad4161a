"""Building realistic state fast: the service's own producer logic, many calls per save.

`Batch` runs the service's record path (`Intake.record_once`, `Intake.spawn_once`: the same domain
decisions, fan-out and idempotency as `record_*`) inside one unit of work, and stores all the
pending events with the inline projection in one `save()`. The events and read-model rows are
exactly what the producers would have written one by one; only the transactions are fewer.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, cast

from session_awareness.application import SessionAwareness
from session_awareness.application.unit_of_work import UnitOfWork
from session_awareness.domain import intake as produce
from session_awareness.domain import notices
from session_awareness.domain.drains import Drains
from session_awareness.domain.keys import SessionRef
from session_awareness.domain.session import Session


class Batch:
    """Producer calls collected into one unit of work; `flush()` saves them in one transaction.
    Flushes by itself every `size` events."""

    def __init__(self, svc: SessionAwareness, size: int = 2000) -> None:
        self.svc = svc
        self.size = size
        self.events = 0
        self._calls = 0
        self._uow = UnitOfWork(svc.store)

    def _pending(self) -> int:
        loaded = self._uow._loaded.values()
        return sum(len(a.pending_events) for a in loaded if a is not None)

    def _then(self, action: Callable[[UnitOfWork], Any]) -> Any:
        result = action(self._uow)
        self._calls += 1
        if self._calls % 64 == 0 and self._pending() >= self.size:  # counting is O(loaded)
            self.flush()
        return result

    def flush(self) -> None:
        pending = self._pending()
        self._uow.commit()
        self.events += pending
        self._uow = UnitOfWork(self.svc.store)

    # -- producers -------------------------------------------------------------------------

    def open(self, key: str, *, parent: str | None = None) -> None:
        ref = SessionRef.of(key)
        now = self.svc.clock()

        def opened(uow: UnitOfWork) -> None:
            if uow.session(ref) is None:
                uow.add(Session.open(ref, kind="main", label=None, parent_key=parent, at=now))

        self._then(opened)

    def spawn(self, child: str, *, parent: str, run_id: str) -> int | None:
        now = self.svc.clock()
        request = produce.child_spawned(parent=parent, run_id=run_id, now=now)
        ref = SessionRef.of(child)
        return cast(
            int | None, self._then(lambda uow: self.svc._intake.spawn_once(uow, ref, request, now))
        )

    def human(self, key: str, *, channel: str = "bench", idempotency_key: str | None = None,
              actor_id: str | None = None) -> int | None:  # fmt: skip
        now = self.svc.clock()
        request = produce.human_direct_message(
            channel=channel, actor_id=actor_id, run_id=None, occurred_at=None,
            idempotency_key=idempotency_key, turns=None, now=now,
        )  # fmt: skip
        return self._record(key, request, now)

    def goal(self, key: str, *, summary: str = "goal updated") -> int | None:
        now = self.svc.clock()
        request = produce.goal_changed(summary=summary, actor_type="system", actor_id=None, now=now)
        return self._record(key, request, now)

    def run_done(self, key: str, *, run_id: str, outcome: str = "ok") -> int | None:
        now = self.svc.clock()
        return self._record(key, produce.run_terminal(run_id=run_id, outcome=outcome, now=now), now)

    def compacted(self, key: str, *, operation_id: str) -> int | None:
        now = self.svc.clock()
        return self._record(key, produce.compacted(operation_id=operation_id, now=now), now)

    def acknowledge(self, watcher: str, target: str) -> bool:
        """What the watcher's drain does for one pair: one `Drains` event (R-N3, ADR 024),
        saved on its own, as a drain always is: one save's events are stored aggregate by
        aggregate, so a drain and a later event of its cursor in one save would be stored
        out of their order."""
        self.flush()
        try:
            return self._acknowledge(watcher, target)
        finally:
            self.flush()

    def _acknowledge(self, watcher: str, target: str) -> bool:
        now = self.svc.clock()

        def drained(uow: UnitOfWork) -> bool:
            watch = uow.watch(watcher, SessionRef.of(target))
            if watch is None or not watch.pending:
                return False
            held = notices.material(watch, cast(Session, uow.session(watch.target_id)))
            decided = notices.drain(uow.drains(watcher), watcher, [(watch, held)], at=now)
            uow.add(cast(Drains, decided.drains))
            return True

        return bool(self._then(drained))

    def _record(self, key: str, request: produce.SignalRequest, now: Any) -> int | None:
        ref = SessionRef.of(key)
        return cast(
            int | None, self._then(lambda uow: self.svc._intake.record_once(uow, ref, request, now))
        )


def session_history(
    batch: Batch, key: str, signals: int, *, watcher: str, rng: random.Random
) -> None:
    """`signals` signal events on one watched session, in a realistic mix: human turns (a
    third carry an idempotency key, as upstream scans do), goal changes, finished runs and
    compactions (both idempotent by id), and the watcher draining its notice now and then."""
    session = key.rsplit(":", 1)[-1]
    recorded = number = 0
    while recorded < signals:
        number += 1
        draw = rng.random()
        if draw < 0.45:
            sequence = batch.human(key, idempotency_key=f"up-{number}" if number % 3 == 0 else None)
        elif draw < 0.65:
            sequence = batch.goal(key)
        elif draw < 0.85:
            sequence = batch.run_done(key, run_id=f"{session}-run-{number}")
        elif draw < 0.92:
            sequence = batch.compacted(key, operation_id=f"{session}-op-{number}")
        else:
            batch.acknowledge(watcher, key)
            continue
        if sequence is None:
            raise RuntimeError(f"the seed could not record on {key}")
        recorded += 1


def watched_session(svc: SessionAwareness, child: str, parent: str) -> None:
    """`parent` spawns `child`, so the parent watches it (R-W1): human turns on the child
    are recorded and notify."""
    svc.open_session(parent)
    if svc.record_child_spawned(child, parent=parent, run_id=f"spawn-{child}") is None:
        raise RuntimeError(f"could not spawn {child}")
