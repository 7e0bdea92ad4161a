"""Session lifecycle and maintenance: open, reset, delete, prune, sweep (R-K3, R-W6, R-R1, R-N6)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from session_awareness.application.core import ServiceCore, log
from session_awareness.application.errors import InvalidArgumentError, UnknownSessionError
from session_awareness.application.ports import CursorRow
from session_awareness.application.projection import to_ms
from session_awareness.application.unit_of_work import UnitOfWork
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
from session_awareness.domain.signals import InvalidSignalError, check_label
from session_awareness.domain.watch import RemovalReason, Watch

PRUNE_INTERVAL = timedelta(hours=1)


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
            lineage = self.lineage(uow, parent)
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

    def lineage(self, uow: UnitOfWork, parent: str | None) -> list[str]:
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
                cast(Watch, uow.get(row.watch_id)).remove(RemovalReason.DELETED, at=now)
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
        self, uow: UnitOfWork, rows: list[CursorRow], reason: RemovalReason, now: datetime
    ) -> int:
        """Remove each cursor and take its watcher off the target's index."""
        for row in rows:
            cast(Watch, uow.get(row.watch_id)).remove(reason, at=now)
            target = uow.session(row.target_id)
            if target is not None:
                target.remove_watcher(row.watcher_key, at=now)
        return len(rows)

    # -- maintenance ---------------------------------------------------------------------------

    def prune(self) -> dict[str, Any]:
        """Retention (R-R1): drop rows older than the age limit, then all but the newest rows
        across sessions, raising each session's watermark first; expire idle cursors (R-W6)."""

        def attempt(uow: UnitOfWork) -> dict[str, Any]:
            now = self.clock()
            cutoff = to_ms(now - timedelta(days=self.retention.days))
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
            expired = self._remove_cursors(uow, stale, RemovalReason.EXPIRED, now)
            return {"removedRows": removed, "watermarks": raised, "expiredCursors": expired}

        result = self._retrying(attempt)
        self._next_prune = self.clock() + PRUNE_INTERVAL
        log.info(
            "history_pruned",
            removed_rows=result["removedRows"],
            sessions=len(result["watermarks"]),
            expired_cursors=result["expiredCursors"],
        )
        return result

    def _maybe_prune(self, now: datetime) -> None:
        """At most hourly on the record path (R-R1); a failure here never reaches a producer."""
        if self._next_prune is not None and now < self._next_prune:
            return
        try:
            self.prune()
        except Exception as error:  # noqa: BLE001 -- pruning is maintenance, never the caller's problem
            self._next_prune = now + PRUNE_INTERVAL
            log.error("history_prune_failed", error=repr(error))

    def sweep(self) -> int:
        """Startup sweep (R-N6): wake every non-sub-agent watcher with a pending notice, once,
        skipping watchers whose session is gone. Returns the number of wakes issued. It
        re-delivers wakes that may have been lost, so it is not coalesced (R-N5)."""
        watchers = [w for w in self.read_model.watchers_with_pending() if not self._is_gone(w)]
        woken = self._wake(watchers, coalesce=False)
        log.info("notices_swept", watchers=len(watchers), woken=woken)
        return woken

    def _is_gone(self, watcher: str) -> bool:
        rows = self.read_model.sessions_with_key(watcher, include_deleted=True)
        return bool(rows) and all(row.deleted for row in rows)


T = TypeVar("T")


def _checked(field: str, check: Callable[[], T]) -> T:
    """Run a domain check; a refusal becomes a typed error naming the field."""
    try:
        return check()
    except (InvalidKeyError, InvalidSignalError) as error:
        raise InvalidArgumentError(field, str(error)) from None
