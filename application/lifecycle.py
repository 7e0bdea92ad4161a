"""Session lifecycle: open, reset and delete (R-K2, R-K3, R-T3, R-W6)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar, cast

from session_awareness.application.errors import InvalidArgumentError, UnknownSessionError
from session_awareness.application.ports import CursorRow
from session_awareness.application.store import SessionStore
from session_awareness.application.unit_of_work import UnitOfWork
from session_awareness.domain import notices
from session_awareness.domain.keys import (
    InvalidKeyError,
    SessionRef,
    check_key,
    is_agent_qualified,
)
from session_awareness.domain.positions import RemovalReason
from session_awareness.domain.session import (
    MAX_LINEAGE,
    SESSION_KINDS,
    ParentRefusedError,
    Session,
    open_or_describe,
)
from session_awareness.domain.signals import InvalidSignalError, check_label
from session_awareness.logs import get_logger

if TYPE_CHECKING:
    from session_awareness.domain.watch import Watch

log = get_logger()


class Lifecycle:
    """Commands that open, reset and delete sessions."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store

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
        if parent is not None:
            _checked("parent", lambda: check_key(parent))
        if kind is not None and kind not in SESSION_KINDS:
            raise InvalidArgumentError("kind", f"must be one of {', '.join(sorted(SESSION_KINDS))}")
        if sandboxed is not None and not isinstance(sandboxed, bool):
            raise InvalidArgumentError("sandboxed", "must be a boolean")

        def attempt(uow: UnitOfWork) -> None:
            held = uow.session(ref)
            try:
                session, happened = open_or_describe(
                    held, ref, kind=kind, label=label, parent_key=parent, sandboxed=sandboxed,
                    at=self.store.clock(), lineage=lineage_of(uow, parent),
                )  # fmt: skip
            except ParentRefusedError as error:
                log.warning("session_open_refused", session_key=ref.key, agent_id=ref.agent_id,
                            parent=parent, reason=error.reason)  # fmt: skip
                raise InvalidArgumentError("parent", str(error)) from None
            if held is None:
                uow.add(session)
            if happened is not None:
                event = "session_opened" if happened == "opened" else "session_described"
                log.info(event, session_key=ref.key, agent_id=ref.agent_id, kind=session.kind)

        self.store.run(attempt)

    def is_sandboxed(self, key: str, *, agent_id: str | None = None) -> bool:
        """Whether the host marked the session sandboxed (`open_session(..., sandboxed=True)`);
        its tool calls then see at most its tree (R-T2). False for a session never opened."""
        try:
            ref = SessionRef.of(key, agent_id)
        except InvalidKeyError:
            return False
        session = UnitOfWork(self.store).session(ref)
        return session is not None and session.sandboxed

    def reset_session(self, key: str, *, agent_id: str | None = None) -> None:
        """Reset: the session's history stays; every cursor it holds as watcher goes (R-W6)."""
        ref = self.store.resolve(key, agent_id)

        def attempt(uow: UnitOfWork) -> None:
            session, now = _live_or_raise(uow, ref, key), self.store.clock()
            session.reset(at=now)
            removed = self._remove_cursors_held_by(uow, ref, RemovalReason.RESET, now)
            log.info("session_reset", session_key=ref.key, cursors_removed=removed)

        self.store.run(attempt)

    def delete_session(self, key: str, *, agent_id: str | None = None) -> None:
        """Delete: its retained rows and every cursor where it is watcher or target go (R-W6);
        its head stays, so a re-opened key never reuses a sequence (R-L4)."""
        ref = self.store.resolve(key, agent_id)

        def attempt(uow: UnitOfWork) -> None:
            session, now = _live_or_raise(uow, ref, key), self.store.clock()
            session.delete(at=now)  # clears its watcher index
            for row in self.store.read_model.cursors_on_target(ref.session_id):
                watch = _still_active(uow, row)
                if watch is not None:
                    watch.remove(RemovalReason.DELETED, at=now)
            self._remove_cursors_held_by(uow, ref, RemovalReason.DELETED, now)
            log.info("session_deleted", session_key=ref.key, agent_id=ref.agent_id)

        self.store.run(attempt)

    def _remove_cursors_held_by(
        self, uow: UnitOfWork, ref: SessionRef, reason: RemovalReason, now: datetime
    ) -> int:
        if not is_agent_qualified(ref.key):
            return 0
        rows = self.store.read_model.cursors_of_watcher(ref.key, pending_only=False)
        return remove_cursors(uow, rows, reason, now)


T = TypeVar("T")


def lineage_of(uow: UnitOfWork, parent: str | None) -> list[str]:
    """`parent` and its ancestors, nearest first, as far as the sessions know them (at
    most `MAX_LINEAGE`): what a spawn edge from `parent` is checked against (R-T3). Each is
    held (`UnitOfWork.hold`): a concurrent save that gives one of them a parent (the edge
    that would close a cycle with this one) makes this save a conflict, retried on fresh
    state, so of two racing edges that close a cycle one is refused."""
    chain: list[str] = []
    key = parent
    while key is not None and key not in chain and len(chain) < MAX_LINEAGE:
        chain.append(key)
        try:
            session = uow.hold(SessionRef.of(key))
        except InvalidKeyError:
            break
        key = session.parent_key if session is not None else None
    return chain


def _live_or_raise(uow: UnitOfWork, ref: SessionRef, key: str) -> Session:
    session = uow.live(ref)
    if session is None:
        raise UnknownSessionError(key)
    return session


def remove_cursors(
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


def _still_active(uow: UnitOfWork, row: CursorRow) -> Watch | None:
    """The row's cursor, unless it was removed since the read model was read."""
    watch = cast("Watch | None", uow.get(row.watch_id))
    return watch if watch is not None and watch.active else None


def _checked(field: str, check: Callable[[], T]) -> T:
    """Run a domain check; a refusal becomes a typed error naming the field."""
    try:
        return check()
    except (InvalidKeyError, InvalidSignalError) as error:
        raise InvalidArgumentError(field, str(error)) from None
