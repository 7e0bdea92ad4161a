"""The write application (`SessionStore`): loading, atomic saves with the inline projection,
retries on concurrent saves, key resolution and wakes (docs/architecture.md)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from typing import Any, TypeVar, cast
from uuid import UUID

from eventsourcing.application import Application, ProcessingEvent
from eventsourcing.persistence import RecordConflictError

from session_awareness.application.aggregate_cache import AggregateCache, NotificationLog
from session_awareness.application.errors import (
    AmbiguousSessionError,
    ContentionError,
    StoreUnavailableError,
    UnknownSessionError,
)
from session_awareness.application.ports import AuditStore, Clock, ReadModel, Waker
from session_awareness.application.process_metrics import Metrics
from session_awareness.application.snapshotting import (
    SNAPSHOTTED_TOPICS,
    SnapshottingIntervals,
    take_due_snapshots,
)
from session_awareness.application.unit_of_work import (
    FAST_FAILURE,
    STORE_ERRORS,
    UnitOfWork,
    closed_error,
    read_again,
)
from session_awareness.application.wakes import WakeCoalescer
from session_awareness.domain.keys import (
    InvalidKeyError,
    SessionRef,
    agent_of,
    check_key,
    is_subagent,
)
from session_awareness.logs import get_logger

log = get_logger()
R = TypeVar("R")
MAX_ATTEMPTS = 100
#: How many resolved (key, agent id) pairs `resolve_id` keeps before starting afresh.
RESOLVED_BOUND = 4096


#: Lost races after which a command takes the process's turn: the process's other commands
#: wait at their next attempt until it has saved, so a slow command is not starved by a
#: fast one writing the same aggregate in a loop.
FAIR_AFTER = 3


class Turns:
    """Fairness between this process's commands: at most one holds the turn, and while it
    does, the others wait before they load. Holding it is reentrant for its thread (a
    command's attempt may run another command)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None

    def wait(self) -> None:
        """Before an ordinary attempt: let a command that holds the turn finish first."""
        if self._lock.locked() and self._owner != threading.get_ident():
            with self._lock:
                pass

    def take(self, stack: ExitStack) -> None:
        """Hold the turn until `stack` closes (nothing if this thread holds it already)."""
        if self._owner == threading.get_ident():
            return
        self._lock.acquire()
        self._owner = threading.get_ident()
        stack.callback(self._give_back)

    def _give_back(self) -> None:
        self._owner = None
        self._lock.release()


#: Aggregates kept in memory between commands (sessions and cursors; ~1-2 KB each).
CACHED_AGGREGATES = 20_000


class GuardedReadModel:
    """The read model, with connection errors turned into `StoreUnavailableError`. A query
    that failed fast (a connection the server had closed, as after a restart) is asked once
    more: reads change nothing, so asking again is always safe. Once `is_closed()`, every
    query raises `StoreUnavailableError` at once. Each query of the `ReadModel` port is
    wrapped once, here (ADR 021)."""

    def __init__(
        self,
        inner: object,
        is_closed: Callable[[], bool] = lambda: False,
        failed: Callable[[BaseException], None] = lambda _: None,
    ) -> None:
        for name in READ_MODEL_QUERIES:
            setattr(self, name, _guarded(name, getattr(inner, name), is_closed, failed))


#: The queries of the `ReadModel` port, which `GuardedReadModel` wraps.
READ_MODEL_QUERIES = tuple(
    name for name in vars(ReadModel) if not name.startswith("_") and callable(vars(ReadModel)[name])
)


def _guarded(
    name: str,
    method: Callable[..., Any],
    is_closed: Callable[[], bool],
    failed: Callable[[BaseException], None],
) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if is_closed():
            raise closed_error()
        started = time.monotonic()
        try:
            return method(*args, **kwargs)
        except STORE_ERRORS as error:
            try:
                return read_again(name, started, error, method, *args, **kwargs)
            except StoreUnavailableError as unavailable:
                failed(unavailable)  # counted where it happens (R-O2)
                raise

    return guarded


class SessionStore(Application[UUID]):
    """The write application: the event store, the aggregate cache, the read model's queries,
    and the one way a command runs: `run(attempt)` loads aggregates through a `UnitOfWork`,
    lets the domain decide, and saves once with the inline projection, again when a
    concurrent save won the race (docs/architecture.md). The collaborators (intake, lifecycle,
    watching, retention, audit, upstream, transcripts, marks, queries) are each given it."""

    #: The library names an application after its class unless told: its environment
    #: variables keep their `SESSIONAWARENESS_` prefix.
    name = "SessionAwareness"
    #: Sessions and cursors are snapshotted, so loads do not depend on history (ADR 022).
    snapshotting_intervals = SnapshottingIntervals(SNAPSHOTTED_TOPICS)

    def __init__(
        self,
        env: dict[str, str],
        *,
        clock: Clock,
        waker: Waker | None = None,
        wakes: WakeCoalescer | None = None,
    ) -> None:
        super().__init__(env)
        self.clock = clock
        self.waker = waker
        #: This process's counters (R-O2): the collaborators count where things happen.
        self.metrics = Metrics()
        # The recorder holds the read models (infrastructure/readmodel/recorder.py).
        read_models = cast(Any, self.recorder).read_models
        self.read_model = cast(
            ReadModel,
            GuardedReadModel(read_models, lambda: self.closed, self.metrics.store_failed),
        )
        self.aggregates = AggregateCache(cast(NotificationLog, self.recorder), CACHED_AGGREGATES)
        self._resolved: dict[tuple[str, str | None], tuple[SessionRef, UUID]] = {}
        #: Set when the store closes: background work (the backlog's flusher) stops waiting.
        self.closing = threading.Event()
        #: At most one wake per watcher per the host's window of the service clock (R-N5).
        self.wakes = wakes or WakeCoalescer()
        self.turns = Turns()

    closed = False

    def audit_store(self) -> AuditStore:
        """The recorder's read side for audits and history: whole streams, scratch copies
        (`StoreUnavailableError` once the store is closed)."""
        if self.closed:
            raise closed_error()
        return cast(AuditStore, cast(Any, self.recorder).audit_store())

    def close(self) -> None:
        """Release the database connections; the store cannot be used afterwards."""
        self.closed = True
        self.closing.set()
        close_readers = getattr(self.recorder, "close_readers", None)
        if close_readers is not None:  # SQLite's per-thread reading connections
            close_readers()
        super().close()

    # -- saving with the projection ---------------------------------------------------------

    def save(self, *aggregates: Any, **kwargs: Any) -> Any:
        """`Application.save` for aggregates, without the library's runtime-checkable
        Protocol `isinstance` checks (6-9 µs each on Python 3.11, two per aggregate;
        bench/PROPOSALS.md, P3)."""
        processing_event: ProcessingEvent[UUID] = ProcessingEvent()
        for aggregate in aggregates:
            processing_event.events.extend(aggregate.collect_events())
            processing_event.aggregates[aggregate.id] = aggregate
        processing_event.saved_kwargs.update(kwargs)
        recordings = self._record(processing_event)
        self._take_snapshots(processing_event)
        self._notify(recordings)
        return recordings

    def save_events(self, events: Sequence[Any]) -> Any:
        """Store domain events built without loading their aggregates (retention's batch,
        ADR 038), with the inline projection, atomically; a stream that moved past an
        event's version makes it a `RecordConflictError`, as a lost race of `save` does. No
        snapshot is taken (there is no aggregate to take it from); the cache's next look
        at the log marks older copies of the streams stale."""
        processing_event: ProcessingEvent[UUID] = ProcessingEvent()
        processing_event.events.extend(events)
        recordings = self._record(processing_event)
        self._notify(recordings)
        return recordings

    def _take_snapshots(self, processing_event: Any) -> None:
        """Snapshots from the saved aggregates, not read back (application/snapshotting.py)."""
        take_due_snapshots(self.snapshots, processing_event, self.snapshotting_intervals)

    def _record(self, processing_event: Any) -> Any:
        # The inline projection needs the domain events beside the stored ones (ADR 002).
        processing_event.saved_kwargs["projected_events"] = processing_event.events
        return super()._record(processing_event)

    def run(self, attempt: Callable[[UnitOfWork], R], *, kept: bool = False) -> R:
        """Run a load-decide-save attempt, and again when a concurrent save won the race.
        A connection error is tried once more when it failed fast (a stale pooled
        connection); otherwise it is a `StoreUnavailableError`. A save whose answer was lost
        is read back, unless it is `kept` (the signal backlog confirms it before recording
        it again) and the failure was slow: a server that did not answer in time would not
        answer the read-back either."""
        with ExitStack() as turn:
            try:
                return self._run(attempt, kept, turn)
            except StoreUnavailableError as error:
                self.metrics.store_failed(error)
                raise

    def _run(self, attempt: Callable[[UnitOfWork], R], kept: bool, turn: ExitStack) -> R:
        reconnected = False
        for number in range(1, MAX_ATTEMPTS + 1):
            if number > FAIR_AFTER:
                self.turns.take(turn)
            else:
                self.turns.wait()
            uow = UnitOfWork(self)
            started = time.monotonic()
            try:
                result = attempt(uow)
                uow.save()
            except STORE_ERRORS as error:
                fast = time.monotonic() - started <= FAST_FAILURE
                if kept and not fast and uow.first_event is not None:
                    raise StoreUnavailableError(str(error), unconfirmed=uow.first_event) from error
                # The answer may be lost after the commit landed: read it back first.
                landed = uow.landed()
                if landed:
                    log.warning("command_commit_answer_lost", error=str(error))
                    uow.committed()
                    return result
                if landed is None or reconnected or not fast:
                    raise StoreUnavailableError(
                        str(error), unconfirmed=uow.first_event if landed is None else None
                    ) from error
                reconnected = True
            except RecordConflictError as error:
                if number == MAX_ATTEMPTS:
                    log.warning("command_contended", attempts=number, error=str(error))
                    raise ContentionError(number, str(error)) from error
                log.debug("command_conflict_retried", attempt=number)
                # Jittered, growing back-off, so a slow attempt is not starved by fast ones.
                time.sleep(random.uniform(0, min(0.002 * 1.5**number, 0.05)))  # noqa: S311 -- jitter, not crypto
            else:
                uow.committed()
                return result
        raise AssertionError("unreachable")  # pragma: no cover

    def wake(self, watchers: Iterable[str], *, coalesce: bool = True) -> int:
        """Wake each watcher that is not a sub-agent, once, after commit (R-N5); with
        `coalesce`, not one woken less than the coalescing window ago."""
        woken = 0
        for watcher in dict.fromkeys(watchers):
            if is_subagent(watcher) or self.waker is None:
                continue
            if coalesce and not self.wakes.admit(watcher, self.clock()):
                log.debug("wake_coalesced", watcher=watcher)
                continue
            try:
                self.waker(watcher)
                woken += 1
            except Exception as error:  # noqa: BLE001 -- a host's waker must not undo a commit
                log.warning("waker_failed", watcher=watcher, error=repr(error))
        return woken

    # -- resolving keys ----------------------------------------------------------------------

    def resolve_id(self, key: str, agent_id: str | None = None) -> tuple[SessionRef, UUID]:
        """`resolve` and the session id (a uuid5). Memoised where the answer is a pure
        function of the arguments (the key names its agent, or the agent id is given), so it
        holds across delete and reopen: whether the session is live is the read model's to
        say. A bare key without an agent id is looked up every time."""
        try:
            return self._resolved[key, agent_id]
        except (KeyError, TypeError):  # TypeError: an unhashable key, refused by resolve
            ref = self.resolve(key, agent_id)
        found = (ref, ref.session_id)
        if agent_id is not None or agent_of(key) is not None:
            if len(self._resolved) >= RESOLVED_BOUND:
                self._resolved.clear()
            self._resolved[key, agent_id] = found
        return found

    def resolve(self, key: str, agent_id: str | None = None) -> SessionRef:
        """The ref a key names: qualified keys name their agent; a bare key needs the agent id
        unless exactly one agent has it (R-K1, R-W3). Raises when nothing live matches."""
        try:
            check_key(key)
            if agent_id is not None:
                SessionRef(agent_id, key)
        except InvalidKeyError:
            raise UnknownSessionError(str(key)) from None
        qualified = agent_of(key)
        if qualified is not None:
            if agent_id is not None and agent_id != qualified:
                raise UnknownSessionError(key)
            return SessionRef(qualified, key)
        if not isinstance(key, str) or not key:
            raise UnknownSessionError(str(key))
        if agent_id is not None:
            return SessionRef(agent_id, key)
        rows = self.read_model.sessions_with_key(key)
        if not rows:
            raise UnknownSessionError(key)
        if len(rows) > 1:
            raise AmbiguousSessionError(key, [row.agent_id for row in rows])
        return SessionRef(rows[0].agent_id, key)
