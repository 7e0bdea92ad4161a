"""Intake: the producers, each recording one signal kind on a session (R-L5) and never
raising into the caller (R-L8), and the backlog that keeps what an outage refused until the
store answers. Notify-eligible kinds move the watchers' cursors as the domain decides (R-W4,
R-W5, R-N2)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import cast

from session_awareness.application.backlog import (
    Delivery,
    SignalBacklog,
    SpoolError,
    SpoolReleasedError,
)
from session_awareness.application.errors import (
    AmbiguousSessionError,
    InvalidArgumentError,
    ServiceClosedError,
    StoreUnavailableError,
    UnknownSessionError,
)
from session_awareness.application.lifecycle import lineage_of
from session_awareness.application.store import SessionStore, log
from session_awareness.application.unit_of_work import (
    CLOSED,
    StaleReadError,
    UnitOfWork,
    event_landed,
)
from session_awareness.domain import intake as produce
from session_awareness.domain import notices
from session_awareness.domain.intake import SignalRequest
from session_awareness.domain.keys import SessionRef, agent_of
from session_awareness.domain.positions import Via
from session_awareness.domain.session import (
    ParentRefusedError,
    Session,
    default_kind,
    ensure_open,
)
from session_awareness.domain.signals import ActorTypeWord, RunOutcomeWord

#: How long closing waits for the backlog's flusher to finish its attempt, at most: an
#: attempt is bounded by the store's `connect_timeout`, and closing waits that plus a little.
FLUSHER_JOIN = 5.0
#: What closing waits beyond the store's `connect_timeout` for the flusher's attempt.
CLOSE_MARGIN = 0.5


class UnknownParentError(UnknownSessionError):
    """A spawn's parent that is not an open session, on a strict service (R-L9)."""

    field = "parent"


class LandedAlready(Exception):
    """A kept signal's earlier attempt is in the store after all: it is not recorded again."""

    def __init__(self, sequence: int | None) -> None:
        super().__init__(sequence)
        self.sequence = sequence


class CannotLandError(Exception):
    """A kept signal whose session was deleted or is unknown when it is flushed: it can no
    longer land, and is dropped (counted and logged), not skipped."""


class Intake:
    """`record_*`: append a signal, fan out to the watchers, save once, wake after commit;
    what an outage refused is kept in the backlog and recorded, in order, by a background
    flusher once the store answers."""

    def __init__(
        self,
        store: SessionStore,
        *,
        backlog: SignalBacklog,
        main_key: str = notices.DEFAULT_MAIN_KEY,
        ambient_groups: bool = True,
        strict: bool = False,
    ) -> None:
        self.store, self.backlog = store, backlog
        #: Strict mode: the caller's mistakes raise from the producers too (R-L9).
        self.strict = strict
        #: Ambient group watches (R-W7): on, for the main sessions `agent:<agentId>:<main_key>`.
        self.main_key, self.ambient_groups = main_key, ambient_groups
        self._flusher: threading.Thread | None = None
        self._flusher_lock = threading.Lock()
        self._closed = False

    def close(self, join: float = FLUSHER_JOIN) -> None:
        """Stop the backlog's flusher (the store's `closing` event ends its wait; an attempt
        under way is waited for, `join` seconds at most), then say what is left: in the
        spool for the next service of the store (WARNING `signal_spool_left`), or lost with
        this process when only memory held it (ERROR `signal_backlog_lost`)."""
        with self._flusher_lock:
            flusher = self._flusher
        if flusher is not None and flusher is not threading.current_thread():
            flusher.join(timeout=join)
        if self._closed:
            return
        self._closed = True
        left, unspooled = len(self.backlog), self.backlog.unspooled_now()
        spool = self.backlog.spool
        if spool is not None and left > unspooled:
            log.warning("signal_spool_left", count=left - unspooled, path=str(spool.path))
        if unspooled:
            reason = "no spool" if spool is None else "the spool could not take them"
            log.error("signal_backlog_lost", count=unspooled, reason=reason)
        if spool is not None:
            spool.close()

    def adopt(self) -> int:
        """Take over the signals services of this store that closed or died left in the
        spool (R-L10), before this service's own; how many (`flush_signals` records them, or
        the flusher `ensure_flushing` starts). Never raises: a spool that cannot be read is
        an ERROR."""
        spool = self.backlog.spool
        if spool is None or self.store.closing.is_set():
            return 0
        with self.backlog.flushing:  # the first kept signal is not being recorded meanwhile
            try:
                adopted = spool.adopt()
            except SpoolError as error:
                log.error("signal_spool_failed", path=str(spool.path), error=str(error))
                return 0
            self.backlog.adopt(adopted.items)
        if adopted.broken:
            log.error("signal_spool_unreadable", count=adopted.broken, path=str(spool.path))
        return len(adopted.items)

    def ensure_flushing(self) -> None:
        """While signals are kept, a background flusher records them as the store answers."""
        if self.backlog.items:
            self._start_flusher()

    # -- producers (R-L5); never raise (R-L8) -------------------------------------------------

    def record_human_direct_message(
        self,
        key: str,
        *,
        channel: str,
        actor_id: str | None = None,
        run_id: str | None = None,
        occurred_at: int | float | datetime | None = None,
        idempotency_key: str | None = None,
        turns: int | None = None,
        agent_id: str | None = None,
    ) -> int | None:
        return self._produce(
            key,
            "human_direct_message",
            lambda now: Delivery(
                key,
                agent_id,
                produce.human_direct_message(
                    channel=channel,
                    actor_id=actor_id,
                    run_id=run_id,
                    occurred_at=occurred_at,
                    idempotency_key=idempotency_key,
                    turns=turns,
                    now=now,
                ),
            ),
        )

    def record_goal_changed(
        self,
        key: str,
        *,
        summary: str,
        actor_type: ActorTypeWord = "system",
        actor_id: str | None = None,
        agent_id: str | None = None,
    ) -> int | None:
        return self._produce(
            key,
            "goal_changed",
            lambda now: Delivery(
                key,
                agent_id,
                produce.goal_changed(
                    summary=summary, actor_type=actor_type, actor_id=actor_id, now=now
                ),
            ),
        )

    def record_run_terminal(
        self, key: str, *, run_id: str, outcome: RunOutcomeWord, agent_id: str | None = None
    ) -> int | None:
        return self._produce(
            key,
            "run_terminal",
            lambda now: Delivery(
                key, agent_id, produce.run_terminal(run_id=run_id, outcome=outcome, now=now)
            ),
        )

    def record_compacted(
        self, key: str, *, operation_id: str, agent_id: str | None = None
    ) -> int | None:
        return self._produce(
            key,
            "compacted",
            lambda now: Delivery(
                key, agent_id, produce.compacted(operation_id=operation_id, now=now)
            ),
        )

    def record_child_spawned(
        self, child_key: str, *, parent: str, run_id: str, agent_id: str | None = None
    ) -> int | None:
        """Record the spawn edge on the child (opening it if needed) and seed the parent's
        cursor at the spawn's sequence (R-L5, R-W1)."""

        def build(now: datetime) -> Delivery:
            request = produce.child_spawned(parent=parent, run_id=run_id, now=now)
            ref = SessionRef.of(child_key, agent_of(child_key) or agent_id or agent_of(parent))
            return Delivery(child_key, agent_id, request, spawn=ref)

        return self._produce(child_key, "child_spawned", build)

    def spawn_once(
        self,
        uow: UnitOfWork,
        ref: SessionRef,
        request: SignalRequest,
        now: datetime,
        *,
        producing: bool = False,
    ) -> int | None:
        parent = cast(str, request.actor_id)
        held, lineage = uow.session(ref), lineage_of(uow, parent)
        if producing:
            self._check_parent(uow, ref, parent)
        kind = default_kind(ref, otherwise="other")
        session = ensure_open(
            held, ref, kind=kind, label=None, parent_key=parent, at=now, lineage=lineage
        )
        if held is None:
            uow.add(session)
        if uow.seen(session, request.dedupe_key):
            return self._skipped(ref, request, "duplicate")
        sequence = notices.append(session, request, now, lineage)
        seeded = notices.seed_spawn(session, parent, uow.watch(parent, ref), sequence, at=now)
        if seeded is not None:
            uow.add(seeded)
        self._recorded(uow, ref, request, sequence)
        return sequence

    def _check_parent(self, uow: UnitOfWork, ref: SessionRef, parent: str) -> None:
        """A spawn's parent is known when it is a live session (R-L9): opened, not deleted.
        A strict service refuses the spawn (`UnknownSessionError`, nothing recorded); any
        other records it and warns after commit, since a typo would leave the real parent
        without a cursor on its child."""
        parent_ref = SessionRef.of(parent, agent_of(parent) or ref.agent_id)
        if uow.live(parent_ref) is not None:
            return
        if self.strict:
            raise UnknownParentError(parent)
        uow.after_commit(partial(self._parent_unknown, ref.key, parent))

    def _parent_unknown(self, child: str, parent: str) -> None:
        log.warning("spawn_parent_unknown", session_key=child, field="parent", parent=parent,
                    reason="not an open session: open the parent before its children")  # fmt: skip

    def _produce(self, key: str, kind: str, build: Callable[[datetime], Delivery]) -> int | None:
        """Validate, then deliver. Never raises for a storage failure (R-L8); the caller's
        mistakes are a WARNING, and raise on a strict service (R-L9)."""
        if self.store.closing.is_set():
            log.warning("signal_rejected", session_key=key, kind=kind, reason="closed",
                        detail="the service is closed")  # fmt: skip
            if self.strict:
                raise ServiceClosedError
            return None
        started = self.store.metrics.timer()
        try:
            item = build(self.store.clock())
        except ValueError as error:
            self._mistake(key, kind, error)
            return None
        sequence = self._deliver(item)
        self.store.metrics.record_took(self.store.metrics.timer() - started)
        return sequence

    def _mistake(self, key: str, kind: str, error: Exception) -> None:
        """The caller's mistake, refused: a WARNING naming the key or the field; on a strict
        service `UnknownSessionError`, `AmbiguousSessionError` or `InvalidArgumentError`
        (R-L9)."""
        if isinstance(error, UnknownSessionError | AmbiguousSessionError):
            reason = "unknown_session" if isinstance(error, UnknownSessionError) else "ambiguous"
            log.warning("signal_rejected", session_key=key, kind=kind, field=field_of(error),
                        reason=reason, detail=str(error))  # fmt: skip
            if self.strict:
                raise error
            return
        field = "parent" if isinstance(error, ParentRefusedError) else field_of(error)
        reason = error.reason if isinstance(error, ParentRefusedError) else str(error)
        log.warning("signal_rejected", session_key=key, kind=kind, field=field, reason=reason,
                    detail=str(error))  # fmt: skip
        if self.strict:
            raise InvalidArgumentError(field, str(error)) from None

    def _deliver(self, item: Delivery) -> int | None:
        closed = self.store.closing.is_set()
        if closed or self.backlog.items:
            # Kept signals go first, in order, recorded by the background flusher as soon as
            # the store answers; until then the store is known to be down: keep this one
            # too, at once, so that no producer waits twice for an outage. A closed service
            # keeps nothing: nothing would ever record it.
            log.error("signal_record_failed", session_key=item.key, kind=item.kind,
                      error=CLOSED if closed else "the session store is unreachable")  # fmt: skip
            if not closed:
                self._keep(item)
            return None
        try:
            sequence = self._record_delivery(item, producing=True)
        except StoreUnavailableError as error:
            log.error(
                "signal_record_failed", session_key=item.key, kind=item.kind, error=str(error)
            )
            self.backlog.rest()
            self._keep(item.unconfirmed_too(error.unconfirmed))
            return None
        except (UnknownSessionError, AmbiguousSessionError, ValueError) as error:
            # an unknown key, a refused input, a cycle or a re-parenting (R-T3)
            self._mistake(item.key, item.kind, error)
            return None
        except Exception as error:  # noqa: BLE001 -- best-effort recording (R-L8)
            # Not the caller's input and not a known outage: kept like one, tried again once
            # in order, and counted as dropped if it still cannot land.
            log.error(
                "signal_record_failed", session_key=item.key, kind=item.kind, error=repr(error)
            )
            self._keep(item)
            return None
        return sequence

    def _keep(self, item: Delivery) -> None:
        """Keep a signal, and make sure a background flusher records the kept ones as soon as
        the store answers (producers never wait for it)."""
        self.backlog.keep(item)
        self._start_flusher()

    def _start_flusher(self) -> None:
        with self._flusher_lock:
            if self._flusher is None and not self.store.closing.is_set():
                self._flusher = threading.Thread(
                    target=self._flush_in_background, name="session-awareness-backlog", daemon=True
                )
                self._flusher.start()

    def _flush_in_background(self) -> None:
        while True:
            with self._flusher_lock:
                # Closing is set before the flusher is joined and the store closed: it ends
                # the loop, or the wait below would return at once, again and again.
                if self.store.closing.is_set() or not self.backlog.items:
                    self._flusher = None
                    return
            if self.store.closing.wait(self.backlog.rest_left()):
                continue  # closing: the loop ends above
            try:
                if not self.flush_signals():
                    self.store.closing.wait(self.backlog.rest_left())
            except Exception as error:  # noqa: BLE001 -- the flusher must outlive any one failure
                log.error("signal_backlog_flush_failed", error=repr(error))
                self.backlog.rest()

    def _record_delivery(
        self, item: Delivery, *, producing: bool = False, kept: bool = False
    ) -> int | None:
        """Record a delivery; `producing` when a producer's caller waits for it (its
        unknown key and unknown parent are then the caller's mistakes, R-L9), `kept` when the
        backlog records what it kept (a session gone meanwhile can no longer land)."""
        now = self.store.clock()
        if item.spawn is not None:
            ref = item.spawn
            record = partial(
                self.spawn_once, ref=ref, request=item.request, now=now, producing=producing
            )
        else:
            try:
                ref, _ = self.store.resolve_id(item.key, item.agent_id)
            except UnknownSessionError as error:
                if kept:
                    raise CannotLandError(f"unknown_session: {error}") from None
                raise
            record = partial(
                self.record_once, ref=ref, request=item.request, now=now, refuse=producing
            )
        if kept:
            return self.store.run(partial(self._unless_landed, record, ref, item), kept=True)
        return self.store.run(record, kept=True)

    def _unless_landed(
        self,
        record: Callable[[UnitOfWork], int | None],
        ref: SessionRef,
        item: Delivery,
        uow: UnitOfWork,
    ) -> int | None:
        """Record a kept signal unless one of its earlier attempts, cut off before its commit
        was confirmed, has landed since (ADR 010: recorded once, never twice). Asked in every
        attempt, after the session is loaded: an earlier save that commits after this load
        holds the same version of the session as this attempt's, so this attempt's save loses
        the race, and the next attempt finds it. The earlier attempts of a spooled signal
        include those of a process that ended (R-L10): before this attempt saves, its first
        event is added to the signal's spool row. A signal whose session was deleted (or is
        unknown) since it was kept can no longer land (`CannotLandError`)."""
        session = uow.session(ref)
        for event in item.unconfirmed:
            landed = event_landed(self.store, event)
            if landed is None:
                raise StoreUnavailableError("whether an earlier attempt landed is unknown")
            if landed:
                raise LandedAlready(getattr(event, "sequence", None))
        if item.spawn is None and (session is None or session.deleted):
            raise CannotLandError("session_deleted" if session else "unknown_session")
        sequence = record(uow)
        self._spool_attempt(item, uow)
        return sequence

    def _spool_attempt(self, item: Delivery, uow: UnitOfWork) -> None:
        """Add the attempt's first event to the signal's spool row before it saves (R-L10).
        A row that is no longer this service's stops the attempt; a spool that cannot be
        written lets it save (only a crash before the row's removal could then repeat it)."""
        spool, first = self.backlog.spool, uow.first_pending()
        if spool is None or item.spooled is None or first is None:
            return
        try:
            spool.attempting(item.spooled, first)
        except SpoolReleasedError:
            raise
        except SpoolError as error:
            log.error("signal_spool_failed", session_key=item.key, kind=item.kind, count=1,
                      path=str(spool.path), error=str(error))  # fmt: skip

    def flush_signals(self, *, wait: bool = True) -> bool:
        """Record the signals kept while the store was unreachable, oldest first; False
        while it still is (R-L8, Beyond). A kept signal the rules now skip (a repeat) is
        counted as skipped; one whose session was deleted meanwhile, or that fails for any
        other reason, is dropped (counted and logged). Without `wait`, gives up at once
        (False) when another thread is flushing. Closing stops it: what is left stays in
        the spool (R-L10)."""
        if not self.backlog.flushing.acquire(blocking=wait):
            return len(self.backlog) == 0
        try:
            if self.backlog.resting():
                return len(self.backlog) == 0
            while (item := self.backlog.first()) is not None:
                if self.store.closing.is_set() or not self._flush_first(item):
                    return False
            return True
        finally:
            self.backlog.flushing.release()

    def _flush_first(self, item: Delivery) -> bool:
        """Try the first kept signal once, and count what became of it; False when the
        flush must stop (the store is unreachable, or the signal is no longer ours)."""
        try:
            sequence = self._record_delivery(item, kept=True)
        except LandedAlready as landed:  # an earlier attempt's commit landed after all
            self.backlog.flushed_first(landed.sequence)
        except CannotLandError as error:  # its session went meanwhile (R-L8, R-L10)
            self.backlog.drop_first(str(error))
        except SpoolReleasedError:  # closed meanwhile: the next service records it
            return False
        except StoreUnavailableError as error:
            if error.unconfirmed is not None:
                self.backlog.replace_first(item.unconfirmed_too(error.unconfirmed))
            self.backlog.rest()
            return False
        except (UnknownSessionError, AmbiguousSessionError, ValueError) as error:
            self.backlog.skipped_first(str(error))
        except Exception as error:  # noqa: BLE001 -- a kept signal that cannot land
            self.backlog.drop_first(repr(error))
        else:
            if sequence is None:
                self.backlog.skipped_first("nothing to record")
            else:
                self.backlog.flushed_first(sequence)
        return True

    def record_once(
        self,
        uow: UnitOfWork,
        ref: SessionRef,
        request: SignalRequest,
        now: datetime,
        *,
        refuse: bool = False,
    ) -> int | None:
        """Record the signal on the live session `ref`: its sequence, or None when the rules
        skip it. An unknown or deleted session is skipped, or with `refuse` (a producer's
        own call) an `UnknownSessionError` (R-L9). Load what the record needs, let the
        domain decide it once (`notices.record`), keep what it decided."""
        session = uow.live(ref)
        if session is None:
            if refuse:
                raise UnknownSessionError(ref.key)
            return self._skipped(ref, request, "unknown_session")
        if uow.seen(session, request.dedupe_key):
            return self._skipped(ref, request, "duplicate")
        needs = notices.needs(
            ref,
            kind=session.kind,
            parent=session.parent_key,
            watchers=session.watchers,
            signal=request.kind,
            main_key=self.main_key if self.ambient_groups else None,
        )
        try:
            recorded = notices.record(
                session,
                request,
                cursors={w: uow.watch_to_tell(w, session.id) for w in needs.cursors},
                parent=_session_of(uow, needs.parent),
                main_session=_session_of(uow, needs.main),
                main=needs.main,
                at=now,
            )
        except notices.StaleCursorError as error:
            raise StaleReadError(str(error)) from None
        return self._keep_recorded(uow, ref, request, recorded)

    def _keep_recorded(
        self, uow: UnitOfWork, ref: SessionRef, request: SignalRequest, recorded: notices.Recorded
    ) -> int | None:
        """Carry out what the domain decided: the cursors it started are saved, its quiet
        notices publish no wake (R-W7), and after commit its grant and notices are logged
        and its watchers woken (R-N5)."""
        for watch in recorded.started:
            uow.add(watch)
        for quiet in recorded.quiet:
            uow.quiet(quiet)
        if recorded.sequence is None:
            return self._skipped(ref, request, cast(str, recorded.skipped))
        if recorded.granted is not None or recorded.opened:
            uow.after_commit(partial(self._told, ref.key, recorded))
        self._recorded(uow, ref, request, recorded.sequence)
        return recorded.sequence

    def _told(self, target: str, recorded: notices.Recorded) -> None:
        if recorded.granted is not None:
            log.info("watch_registered", watcher=recorded.granted, target=target,
                     at_sequence=recorded.head, via=Via.AMBIENT.value)  # fmt: skip
        for notice in recorded.opened:
            log.info("notice_opened", watcher=notice.watcher, target=target,
                     sequence=recorded.sequence, ambient=not notice.wakes)  # fmt: skip
            self.store.metrics.notices_opened()
            if notice.wakes:
                self.store.wake([notice.watcher])

    def _skipped(self, ref: SessionRef, request: SignalRequest, reason: str) -> int | None:
        """Log why nothing was recorded; returns None, the producers' "nothing" (R-L8)."""
        log.info("signal_skipped", session_key=ref.key, kind=request.kind.value, reason=reason)
        return None

    def _recorded(
        self, uow: UnitOfWork, ref: SessionRef, request: SignalRequest, sequence: int
    ) -> None:
        uow.after_commit(partial(self.store.metrics.signal_recorded, request.kind.value))
        log.info(
            "signal_recorded",
            session_key=ref.key,
            agent_id=ref.agent_id,
            kind=request.kind.value,
            sequence=sequence,
        )


def _session_of(uow: UnitOfWork, key: str | None) -> Session | None:
    """The session of a key a record needs (its parent, the main session), or None."""
    return None if key is None else uow.session(SessionRef.of(key))


def field_of(error: Exception) -> str:
    """The producer argument a refusal names: the domain's `field`, else the key."""
    field = getattr(error, "field", None)
    return field if isinstance(field, str) and field else "key"
