"""Retention and the maintenance passes: prune (R-R1, R-W6) and the start-up sweep (R-N6)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from session_awareness.application.errors import StoreUnavailableError
from session_awareness.application.lifecycle import remove_cursors
from session_awareness.application.store import SessionStore
from session_awareness.application.unit_of_work import UnitOfWork
from session_awareness.domain import notices
from session_awareness.domain.drains import Drains
from session_awareness.domain.keys import is_subagent
from session_awareness.domain.signals import to_ms
from session_awareness.domain.watch import RemovalReason, Watch
from session_awareness.logs import get_logger

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


class Maintenance:
    """Retention's prune, at most hourly from the record path, and the start-up sweep."""

    def __init__(self, store: SessionStore, retention: Retention) -> None:
        self.store, self.retention = store, retention
        #: While the clock reads within [from, until), no prune is due: the hourly gate.
        self._quiet: tuple[datetime, datetime] | None = None

    def _pruned(self, at: datetime) -> None:
        self._quiet = (at - CLOCK_SLACK, at + PRUNE_INTERVAL)

    def prune(self) -> dict[str, Any]:
        """Retention (R-R1): drop rows older than the age limit, then all but the newest rows
        across sessions, raising each session's watermark first; expire idle cursors (R-W6).

        A clock reading far ahead of everything the store has recorded (more than the age
        limit plus `CLOCK_LEAP` past its newest row) is taken for a wrong reading: nothing is
        removed or expired, the refusal is logged (`history_prune_refused`), and the next
        prune decides again."""

        def attempt(uow: UnitOfWork) -> dict[str, Any]:
            now = self.store.clock()
            limit = timedelta(days=self.retention.days)
            newest = self.store.read_model.newest_recorded(before=to_ms(now - RECENT))
            if newest is not None and to_ms(now) - newest > to_ms_span(limit + CLOCK_LEAP):
                return {"removedRows": 0, "watermarks": [], "expiredCursors": 0,
                        "refused": newest}  # fmt: skip
            cutoff = to_ms(now - limit)
            plans = self.store.read_model.prune_plan(
                recorded_before=cutoff, keep_rows=self.retention.rows
            )
            raised, removed = [], 0
            for plan in plans:
                session = uow.session(plan.session_id)
                if session is None or session.deleted or plan.watermark <= session.pruned_watermark:
                    continue
                session.prune_history(plan.watermark, at=now)
                removed += plan.rows
                raised.append(
                    {
                        "sessionKey": session.key,
                        "agentId": session.agent_id,
                        "watermark": plan.watermark,
                    }
                )
            stale = self.store.read_model.cursors_updated_before(cutoff)
            expired = remove_cursors(
                uow, stale, RemovalReason.EXPIRED, now, idle_before=now - limit
            )
            return {"removedRows": removed, "watermarks": raised, "expiredCursors": expired}

        result = self.store.run(attempt)
        pruned_at = self.store.clock()
        self._pruned(pruned_at)
        refused = result.pop("refused", None)
        if refused is not None:
            log.warning(
                "history_prune_refused",
                reason="the clock reads far ahead of the newest recorded time",
                now=to_ms(pruned_at),
                newest_recorded=refused,
            )
            return result
        log.info(
            "history_pruned",
            removed_rows=result["removedRows"],
            sessions=len(result["watermarks"]),
            expired_cursors=result["expiredCursors"],
        )
        return result

    def maybe_prune(self, now: datetime) -> None:
        """At most hourly on the record path (R-R1); a failure here never reaches a producer.
        A reading behind the last prune's (the clock stepped back, or that reading was
        wrong) makes a prune due at once: a single wrong reading never postpones pruning."""
        quiet = self._quiet
        if quiet is not None and quiet[0] <= now < quiet[1]:
            return
        try:
            self.prune()
        except Exception as error:  # noqa: BLE001 -- pruning is maintenance, never the caller's problem
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
        watchers = [
            w for w in self.store.read_model.watchers_with_pending() if not self._is_gone(w)
        ]
        redelivered = self._redeliver_all(watchers) if redeliver else 0
        # A watcher whose pending notices are all ambient is not woken (R-W7).
        loud = [w for w in watchers if not is_subagent(w) and self._has_loud_notice(w)]
        woken = self.store.wake(loud, coalesce=False)
        log.info("notices_swept", watchers=len(watchers), woken=woken, redelivered=redelivered)
        return woken

    def _redeliver_all(self, watchers: list[str]) -> int:
        """Re-deliver each watcher's notices; a store that cannot be written (a read-only
        file) keeps them as they are, logged once."""
        redelivered = 0
        for watcher in watchers:
            try:
                redelivered += self._redeliver(watcher)
            except StoreUnavailableError as error:
                log.warning("notices_not_redelivered", watcher=watcher, error=str(error))
                break
        return redelivered

    def _redeliver(self, watcher: str) -> int:
        """Raise N to M on each of the watcher's pending notices with material past N, in one
        event on its `Drains` (ADR 034); the number re-delivered so."""
        rows = self.store.read_model.cursors_of_watcher(watcher, pending_only=True)
        if all(row.material <= row.notified for row in rows):  # M derived (ADR 023)
            return 0

        def attempt(uow: UnitOfWork) -> int:
            pending = []
            for wid, material in self.store.read_model.pending_to_drain(watcher):
                watch = uow.cursor_to_read(wid)
                if watch is not None and watch.pending:
                    pending.append((watch, material))
            drains, entries = notices.redeliver(
                uow.drains(watcher), watcher, pending, at=self.store.clock()
            )
            if entries:
                uow.add(cast(Drains, drains))
            return len(entries)

        return self.store.run(attempt)

    def _has_loud_notice(self, watcher: str) -> bool:
        """Whether one of the watcher's pending notices is on a cursor that is not ambient
        (R-W7): the first one loaded usually is."""
        uow = UnitOfWork(self.store)
        for row in self.store.read_model.cursors_of_watcher(watcher, pending_only=True):
            watch = cast(Watch | None, uow.get(row.watch_id))
            if watch is not None and watch.pending and not watch.ambient:
                return True
        return False

    def _is_gone(self, watcher: str) -> bool:
        rows = self.store.read_model.sessions_with_key(watcher, include_deleted=True)
        return bool(rows) and all(row.deleted for row in rows)

    def prune_preview(self) -> dict[str, Any]:
        """What `prune()` would do now, in its shape, changing nothing (R-R1, R-W6)."""
        cutoff = to_ms(self.store.clock() - timedelta(days=self.retention.days))
        plans = self.store.read_model.prune_plan(
            recorded_before=cutoff, keep_rows=self.retention.rows
        )
        raised, removed = [], 0
        for plan in plans:
            row = self.store.read_model.session(plan.session_id)
            state = self.store.read_model.session_state(plan.session_id, after=None, limit=0)
            if row is None or state is None or plan.watermark <= state.head.pruned_watermark:
                continue
            removed += plan.rows
            raised.append(
                {"sessionKey": row.key, "agentId": row.agent_id, "watermark": plan.watermark}
            )
        expired = len(self.store.read_model.cursors_updated_before(cutoff))
        return {"removedRows": removed, "watermarks": raised, "expiredCursors": expired}


def to_ms_span(span: timedelta) -> int:
    return int(span.total_seconds() * 1000)
