"""Watches and notices: registration, removal, pending notices and drain (R-W1–R-W7, R-N1–R-N7)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from session_awareness.application.errors import AmbiguousSessionError, UnknownSessionError
from session_awareness.application.store import SessionStore, log
from session_awareness.application.unit_of_work import UnitOfWork
from session_awareness.domain import notices
from session_awareness.domain.keys import (
    InvalidKeyError,
    SessionRef,
    check_key,
    is_agent_qualified,
    may_hold_cursor,
)
from session_awareness.domain.notices import Handed
from session_awareness.domain.positions import RemovalReason, notice_text


class Watching:
    """Explicit watches and the watcher's side of the notice protocol."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    def watch(self, watcher: str, target: str, *, target_agent_id: str | None = None) -> bool:
        """Register `watcher` on `target` at its current head; refused → False (R-W2, R-W3);
        a watcher the service has never seen → `UnknownSessionError` (R-L9)."""
        ref = self._watch_target(watcher, target, target_agent_id)
        if ref is None:
            return False

        def attempt(uow: UnitOfWork) -> bool:
            session = uow.live(ref)
            if session is None:
                self._refused(watcher, target, "unknown_target")
                return False
            held = uow.watch(watcher, ref)
            promoted = held is not None and held.ambient
            watch = notices.register(session, watcher, held, at=self.store.clock())
            if promoted:  # an ambient cursor became an explicit one, positions kept (R-W7)
                log.info("watch_promoted", watcher=watcher, target=ref.key)
            if watch is None:
                return True  # a pending notice survives re-registration (R-W2)
            uow.add(watch)
            log.info("watch_registered", watcher=watcher, target=ref.key,
                     at_sequence=watch.material)  # fmt: skip
            return True

        return self.store.run(attempt)

    def unwatch(self, watcher: str, target: str, *, target_agent_id: str | None = None) -> bool:
        """Remove the pair's cursor; False when there was none; a watcher the service has
        never seen → `UnknownSessionError` (R-L9)."""
        ref = self._watch_target(watcher, target, target_agent_id)
        if ref is None:
            return False

        def attempt(uow: UnitOfWork) -> bool:
            session, watch = uow.live(ref), uow.watch(watcher, ref)
            if session is None or watch is None or not watch.active:
                return False
            now = self.store.clock()
            watch.remove(RemovalReason.UNWATCHED, at=now)
            session.remove_watcher(watcher, at=now)
            log.info("watch_removed", watcher=watcher, target=ref.key, reason="unwatched")
            return True

        return self.store.run(attempt)

    def _watch_target(
        self, watcher: str, target: str, target_agent_id: str | None
    ) -> SessionRef | None:
        """The target's ref, or None (logged) when R-W3 refuses the pair; a watcher the
        service has never seen raises `UnknownSessionError` (R-L9)."""
        self.check_known(watcher)
        if not is_agent_qualified(watcher):
            self._refused(watcher, target, "watcher_not_agent_qualified")
            return None
        try:
            ref = self.store.resolve(target, target_agent_id)
        except AmbiguousSessionError:
            self._refused(watcher, target, "ambiguous_target")
            return None
        except (UnknownSessionError, ValueError):
            self._refused(watcher, target, "unknown_target")
            return None
        refusal = (
            "self"
            if ref == SessionRef.of(watcher)
            else None
            if may_hold_cursor(watcher, ref)
            else "bare_target_of_another_agent"
        )
        if refusal is not None:
            self._refused(watcher, target, refusal)
            return None
        return ref

    def _refused(self, watcher: object, target: object, reason: str) -> None:
        """A refused watch is the caller's mistake: a WARNING naming the field (R-L9)."""
        field = "watcher" if reason.startswith("watcher") else "target"
        log.warning("watch_refused", watcher=watcher, target=target, field=field, reason=reason)

    def check_known(self, watcher: str) -> None:
        """`UnknownSessionError` unless the service has seen the key (R-L9): a session of
        that key (of any agent, deleted too), or a cursor it holds (a parent whose child was
        recorded before the parent was opened)."""
        try:
            check_key(watcher)
        except InvalidKeyError:
            raise UnknownSessionError(str(watcher)) from None
        read_model = self.store.read_model
        if read_model.sessions_with_key(watcher, include_deleted=True):
            return
        if not read_model.cursors_of_watcher(watcher, pending_only=False):
            raise UnknownSessionError(watcher)

    def pending_notices(self, watcher: str) -> list[str]:
        """The watcher's pending notices, oldest first; reading acknowledges nothing."""
        return list(self.hand_over_notices(watcher).notices)

    def drain_notices(self, watcher: str) -> list[str]:
        """Hand over and acknowledge the pending notices; reopen one per pair with newer
        material (R-N3). Returns the texts drained, oldest first."""
        return self._drain(watcher, None)

    def hand_over_notices(self, watcher: str) -> Handover:
        """The watcher's pending notices, read without acknowledging them, with what names
        each (R-N8): once the caller has handed them on, `acknowledge_handed` acknowledges
        exactly those; until then they stay pending."""
        rows = self.store.read_model.cursors_of_watcher(watcher, pending_only=True)
        if not rows:
            self.check_known(watcher)
        return Handover(
            tuple(notice_text(row.target_key, row.acknowledged) for row in rows),
            tuple(Handed(row.watch_id, row.acknowledged, row.notified) for row in rows),
        )

    def acknowledge_handed(self, watcher: str, handover: Handover) -> list[str]:
        """Acknowledge the notices of `handover` that are still pending as they were handed
        (R-N8, R-N3): one whose cursor moved on stays pending, a notice opened since is left.
        Returns the texts acknowledged, oldest first."""
        if not handover.handed:  # nothing to acknowledge; the key is checked as ever (R-L9)
            self.check_known(watcher)
            return []
        return self._drain(watcher, handover.handed)

    def _drain(self, watcher: str, handed: tuple[Handed, ...] | None) -> list[str]:
        """Acknowledge the watcher's pending notices, all of them (`handed` None, R-N3) or
        those still as `handed` (R-N8), in one event (ADR 024); the texts acknowledged,
        oldest first."""

        def attempt(uow: UnitOfWork) -> list[str]:
            now = self.store.clock()
            uow.look_first()  # so that a save no other save followed skips the race checks
            pairs = self.store.read_model.pending_to_drain(watcher)
            if not pairs:  # nothing to drain: the cursors and the watcher's `Drains` unread
                return []
            watches = uow.cursors_to_read(watcher, [wid for wid, _ in pairs])
            # each with the target's M for the watcher (ADR 023)
            cursors = zip(watches, [material for _, material in pairs], strict=True)
            drains = uow.drains(watcher)
            drained = (
                notices.drain(drains, watcher, cursors, at=now)
                if handed is None
                else notices.acknowledge_handed(drains, watcher, cursors, handed, at=now)
            )
            if drained.drains is None:
                return []
            uow.add(drained.drains)  # one event for the whole drain (ADR 024)
            for quiet in drained.quiet:  # a reopened ambient notice never wakes (R-W7)
                uow.quiet(quiet)
            log.info("notice_drained", watcher=watcher, drained=len(drained.texts),
                     reopened=drained.reopened)  # fmt: skip
            metrics = self.store.metrics
            counted = partial(metrics.notices_drained, len(drained.texts), drained.reopened)
            uow.after_commit(counted)
            if drained.wakes:  # a reopened notice wakes its watcher, once, after commit (R-N5)
                uow.after_commit(lambda: self.store.wake([watcher]))
            return list(drained.texts)

        drained = self.store.run(attempt)
        if not drained:
            self.check_known(watcher)
        return drained


@dataclass(frozen=True, slots=True)
class Handover:
    """Pending notices read to be handed on (R-N8): their texts, oldest first, and what names
    each notice for its acknowledgement (`Watching.acknowledge_handed`)."""

    notices: tuple[str, ...]
    handed: tuple[Handed, ...]
