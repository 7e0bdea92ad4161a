"""Session lifecycle and maintenance: open, reset, delete, prune, sweep (R-K3, R-W6, R-R1, R-N6)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from session_awareness.application.core import ServiceCore, log
from session_awareness.application.errors import InvalidArgumentError, UnknownSessionError
from session_awareness.application.ports import CursorRow
from session_awareness.application.unit_of_work import UnitOfWork
from session_awareness.domain import notices
from session_awareness.domain.keys import (
    InvalidKeyError,
    SessionRef,
    check_key,
    is_agent_qualified,
    is_subagent,
)
from session_awareness.domain.session import (
    MAX_LINEAGE,
    SESSION_KINDS,
    ParentRefusedError,
    Session,
)
from session_awareness.domain.signals import InvalidSignalError, check_label, to_ms
from session_awareness.domain.watch import RemovalReason, Watch

PRUNE_INTERVAL = timedelta(hours=1)
#: How far past the age limit the newest recorded row may lie behind the clock before a prune
#: takes the reading for a clock step and refuses to remove anything.
CLOCK_LEAP = timedelta(days=30)
#: Rows recorded this close to the reading (or after it) do not count as the newest: a wrong
#: reading's own record must not vouch for it.
RECENT = timedelta(minutes=1)
#: A reading this far behind the last prune's is jitter, not a step back.
CLOCK_SLACK = timedelta(minutes=1)


class Lifecycle(ServiceCore):
    """Commands that open, reset and delete sessions, and the maintenance passes."""

    def open_session(
        self,
        key: str,
        *,
        agent_id: str | None = None,
        kind: str | None = None,
        label: str | None = None,
        parent: str | None = None,
        sandboxed: bool | None = None,
    ) -> None:
        """Open a session, or a deleted one's key again. Without a `kind`, a new session whose
        key has a `:subagent:` segment opens as a `subagent`, any other as `main` (R-K2).
        Opening an open session applies what the host gives that differs (kind, label, a first
        parent, the sandbox mark) as events; what it leaves out stays. A parent that would make
        a cycle or replace the session's parent is refused (R-T3)."""
        ref = _checked("sessionKey", lambda: SessionRef.of(key, agent_id))
        label = _checked("label", lambda: check_label(label) if label is not None else None)
        first_kind = kind or ("subagent" if is_subagent(ref.key) else "main")
        if parent is not None:
            _checked("parent", lambda: check_key(parent))
        if kind is not None and kind not in SESSION_KINDS:
            raise InvalidArgumentError("kind", f"must be one of {', '.join(sorted(SESSION_KINDS))}")
        if sandboxed is not None and not isinstance(sandboxed, bool):
            raise InvalidArgumentError("sandboxed", "must be a boolean")

        def attempt(uow: UnitOfWork) -> None:
            session, now = uow.session(ref), self.clock()
            lineage = self._lineage(uow, parent)
            try:
                if session is None:
                    session = uow.add(
                        Session.open(
                            ref, kind=first_kind, label=label, parent_key=parent, at=now,
                            lineage=lineage,
                        )
                    )  # fmt: skip
                elif session.deleted:
                    session.reopen(
                        kind=first_kind, label=label, parent_key=parent, at=now,
                        lineage=lineage,
                    )  # fmt: skip
                else:
                    changed = session.describe(
                        kind=kind or session.kind,
                        label=session.label if label is None else label,
                        parent_key=parent,
                        at=now,
                        lineage=lineage,
                    )
                    if sandboxed is not None:
                        changed = session.mark_sandboxed(sandboxed, at=now) or changed
                    if changed:
                        log.info("session_described", session_key=ref.key, agent_id=ref.agent_id,
                                 kind=session.kind)  # fmt: skip
                    return
            except ParentRefusedError as error:
                log.warning("session_open_refused", session_key=ref.key, agent_id=ref.agent_id,
                            parent=parent, reason=error.reason)  # fmt: skip
                raise InvalidArgumentError("parent", str(error)) from None
            if sandboxed is not None:
                session.mark_sandboxed(sandboxed, at=now)
            log.info("session_opened", session_key=ref.key, agent_id=ref.agent_id,
                     kind=session.kind)  # fmt: skip

        self._retrying(attempt)

    def is_sandboxed(self, key: str, *, agent_id: str | None = None) -> bool:
        """Whether the host marked the session sandboxed (`open_session(..., sandboxed=True)`);
        its tool calls then see at most its tree (R-T2). False for a session never opened."""
        try:
            ref = SessionRef.of(key, agent_id)
        except InvalidKeyError:
            return False
        session = UnitOfWork(self).session(ref)
        return session is not None and session.sandboxed

    def _lineage(self, uow: UnitOfWork, parent: str | None) -> list[str]:
        """`parent` and its ancestors, nearest first, as far as the sessions know them (at
        most `MAX_LINEAGE`): what a spawn edge from `parent` is checked against (R-T3)."""
        chain: list[str] = []
        key = parent
        while key is not None and key not in chain and len(chain) < MAX_LINEAGE:
            chain.append(key)
            try:
                session = uow.session(SessionRef.of(key))
            except InvalidKeyError:
                break
            key = session.parent_key if session is not None else None
        return chain

    def reset_session(self, key: str, *, agent_id: str | None = None) -> None:
        """Reset: the session's history stays; every cursor it holds as watcher goes (R-W6)."""
        ref = self.resolve(key, agent_id)

        def attempt(uow: UnitOfWork) -> None:
            session, now = self._live_or_raise(uow, ref, key), self.clock()
            session.reset(at=now)
            removed = self._remove_cursors_held_by(uow, ref, RemovalReason.RESET, now)
            log.info("session_reset", session_key=ref.key, cursors_removed=removed)

        self._retrying(attempt)

    def delete_session(self, key: str, *, agent_id: str | None = None) -> None:
        """Delete: its retained rows and every cursor where it is watcher or target go (R-W6);
        its head stays, so a re-opened key never reuses a sequence (R-L4)."""
        ref = self.resolve(key, agent_id)

        def attempt(uow: UnitOfWork) -> None:
            session, now = self._live_or_raise(uow, ref, key), self.clock()
            session.delete(at=now)  # clears its watcher index
            for row in self.read_model.cursors_on_target(ref.session_id):
                watch = _still_active(uow, row)
                if watch is not None:
                    watch.remove(RemovalReason.DELETED, at=now)
            self._remove_cursors_held_by(uow, ref, RemovalReason.DELETED, now)
            log.info("session_deleted", session_key=ref.key, agent_id=ref.agent_id)

        self._retrying(attempt)

    def _live_or_raise(self, uow: UnitOfWork, ref: SessionRef, key: str) -> Session:
        session = uow.live(ref)
        if session is None:
            raise UnknownSessionError(key)
        return session

    def _remove_cursors_held_by(
        self, uow: UnitOfWork, ref: SessionRef, reason: RemovalReason, now: datetime
    ) -> int:
        if not is_agent_qualified(ref.key):
            return 0
        rows = self.read_model.cursors_of_watcher(ref.key, pending_only=False)
        return self._remove_cursors(uow, rows, reason, now)

    def _remove_cursors(
        self,
        uow: UnitOfWork,
        rows: list[CursorRow],
        reason: RemovalReason,
        now: datetime,
        *,
        idle_before: datetime | None = None,
    ) -> int:
        """Remove each cursor and take its watcher off the target's index. The rows come from
        the read model, read before this attempt loaded the cursors: one another thread or
        process removed meanwhile is skipped, and so is (with `idle_before`) one it moved
        since the rows were read."""
        removed = 0
        for row in rows:
            watch = _still_active(uow, row)
            if watch is None:
                continue
            target = uow.session(row.target_id)
            if idle_before is not None and notices.last_moved(watch, target) >= idle_before:
                continue
            watch.remove(reason, at=now)
            removed += 1
            if target is not None:
                target.remove_watcher(row.watcher_key, at=now)
        return removed

    # -- maintenance ---------------------------------------------------------------------------

    def prune(self) -> dict[str, Any]:
        """Retention (R-R1): drop rows older than the age limit, then all but the newest rows
        across sessions, raising each session's watermark first; expire idle cursors (R-W6).

        A clock reading far ahead of everything the store has recorded (more than the age
        limit plus `CLOCK_LEAP` past its newest row) is taken for a wrong reading: nothing is
        removed or expired, the refusal is logged (`history_prune_refused`), and the next
        prune decides again."""

        def attempt(uow: UnitOfWork) -> dict[str, Any]:
            now = self.clock()
            limit = timedelta(days=self.retention.days)
            newest = self.read_model.newest_recorded(before=to_ms(now - RECENT))
            if newest is not None and to_ms(now) - newest > to_ms_span(limit + CLOCK_LEAP):
                return {"removedRows": 0, "watermarks": [], "expiredCursors": 0,
                        "refused": newest}  # fmt: skip
            cutoff = to_ms(now - limit)
            plans = self.read_model.prune_plan(
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
            stale = self.read_model.cursors_updated_before(cutoff)
            expired = self._remove_cursors(
                uow, stale, RemovalReason.EXPIRED, now, idle_before=now - limit
            )
            return {"removedRows": removed, "watermarks": raised, "expiredCursors": expired}

        result = self._retrying(attempt)
        self._pruned_at = self.clock()
        refused = result.pop("refused", None)
        if refused is not None:
            log.warning(
                "history_prune_refused",
                reason="the clock reads far ahead of the newest recorded time",
                now=to_ms(self._pruned_at),
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

    def _maybe_prune(self, now: datetime) -> None:
        """At most hourly on the record path (R-R1); a failure here never reaches a producer.
        A reading behind the last prune's (the clock stepped back, or that reading was
        wrong) makes a prune due at once: a single wrong reading never postpones pruning."""
        last = self._pruned_at
        if last is not None and last - CLOCK_SLACK <= now < last + PRUNE_INTERVAL:
            return
        try:
            self.prune()
        except Exception as error:  # noqa: BLE001 -- pruning is maintenance, never the caller's problem
            self._pruned_at = now
            log.error("history_prune_failed", error=repr(error))

    def sweep(self) -> int:
        """Startup sweep (R-N6): wake every non-sub-agent watcher with a pending notice, once,
        skipping watchers whose session is gone. Returns the number of wakes issued. It
        re-delivers wakes that may have been lost, so it is not coalesced (R-N5)."""
        watchers = [w for w in self.read_model.watchers_with_pending() if not self._is_gone(w)]
        # A watcher whose pending notices are all ambient is not woken (R-W7).
        loud = [w for w in watchers if not is_subagent(w) and self._has_loud_notice(w)]
        woken = self._wake(loud, coalesce=False)
        log.info("notices_swept", watchers=len(watchers), woken=woken)
        return woken

    def _has_loud_notice(self, watcher: str) -> bool:
        """Whether one of the watcher's pending notices is on a cursor that is not ambient
        (R-W7): the first one loaded usually is."""
        uow = UnitOfWork(self)
        for row in self.read_model.cursors_of_watcher(watcher, pending_only=True):
            watch = cast(Watch | None, uow.get(row.watch_id))
            if watch is not None and watch.pending and not watch.ambient:
                return True
        return False

    def _is_gone(self, watcher: str) -> bool:
        rows = self.read_model.sessions_with_key(watcher, include_deleted=True)
        return bool(rows) and all(row.deleted for row in rows)


T = TypeVar("T")


def _still_active(uow: UnitOfWork, row: CursorRow) -> Watch | None:
    """The row's cursor, unless it was removed since the read model was read."""
    watch = cast(Watch | None, uow.get(row.watch_id))
    return watch if watch is not None and watch.active else None


def to_ms_span(span: timedelta) -> int:
    return int(span.total_seconds() * 1000)


def _checked(field: str, check: Callable[[], T]) -> T:
    """Run a domain check; a refusal becomes a typed error naming the field."""
    try:
        return check()
    except (InvalidKeyError, InvalidSignalError) as error:
        raise InvalidArgumentError(field, str(error)) from None
