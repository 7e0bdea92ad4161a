"""One attempt of a command: an identity map of the aggregates it loads, saved together.

Loading each aggregate once per attempt means two paths that reach the same session (say a
prune plan and a cursor expiry) change one object, and `commit()` stores every pending event
in one atomic save (docs/architecture.md).

A cursor whose own events say it is pending is shown with its watcher's latest drain of it
(ADR 024): the attempt loads the watcher's `Drains` too, and the cache keeps a watcher's
having none (`Absent`), so a record on a target with pending cursors reads no more rows.

Every read of the store here is typed as the read model's queries are (`read_again`):
`StoreUnavailableError` when the store cannot be reached or is closed, whether the unit of
work serves a command (`SessionStore.run`) or a plain read (`is_sandboxed`, a transcript).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from types import EllipsisType
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar, cast
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import (
    InterfaceError,
    OperationalError,
    RecordConflictError,
    StoredEvent,
)

from session_awareness.application.aggregate_cache import AggregateCache
from session_awareness.application.errors import StoreUnavailableError
from session_awareness.domain.keys import SessionRef, drains_id, watch_id
from session_awareness.domain.positions import WATCH_TOPIC
from session_awareness.domain.session import Session
from session_awareness.logs import get_logger

if TYPE_CHECKING:
    from eventsourcing.application import Application

    from session_awareness.domain.drains import Drains
    from session_awareness.domain.watch import Watch

A = TypeVar("A", bound=Aggregate)
R = TypeVar("R")
log = get_logger()

#: Errors that mean the store cannot be reached, as opposed to a lost race or a bug.
STORE_ERRORS = (OperationalError, InterfaceError)
#: A connection error faster than this is a stale pooled connection, worth one more try.
FAST_FAILURE = 0.5
#: Why every read and command of a closed service fails.
CLOSED = "the service is closed"


def closed_error() -> StoreUnavailableError:
    return StoreUnavailableError(CLOSED)


def _look_again(error: Exception, started: float, look: Callable[[], int]) -> int:
    """A look at the log whose read failed: `read_again` for a store error, else raised."""
    if not isinstance(error, STORE_ERRORS):
        raise error
    return read_again("notification_log", started, error, look)


def read_again(
    name: str, started: float, error: Exception, read: Callable[..., R], *args: Any, **kwargs: Any
) -> R:
    """After a read that began at `started` failed with a connection error: asked once more
    when it failed fast (a connection the server had closed), else `StoreUnavailableError`."""
    if time.monotonic() - started > FAST_FAILURE:
        raise StoreUnavailableError(str(error)) from error
    log.info("query_retried", query=name, error=str(error))
    try:
        return read(*args, **kwargs)
    except STORE_ERRORS as again:
        raise StoreUnavailableError(str(again)) from again


class StaleReadError(RecordConflictError):
    """Two aggregates read in one attempt disagree because another process saved between
    the reads; like a lost race, the attempt runs again on fresh state."""


def _as_cached(aggregate: Any) -> Any:
    """A fast-forward that leaves the copy as cached: `prefetch` reads the events itself."""
    return aggregate


def _a_cursor(aggregate: object) -> TypeGuard[Watch]:
    """Whether the aggregate is a cursor (`Watch`), told by its class's own topic: the
    cursor's module is imported by the first cursor built or decoded, and a command that
    meets none does not import it (ADR 039)."""
    return type(aggregate).__dict__.get("TOPIC") == WATCH_TOPIC


def _mutate(aggregate: Any, events: Iterable[Any]) -> Any:
    """The library's `project_aggregate` without its per-event Protocol `isinstance` assert."""
    for event in events:
        aggregate = event.mutate(aggregate)
    return aggregate


@dataclass(frozen=True, slots=True)
class Absent:
    """What the cache keeps for an aggregate the store did not have when it was read: its
    first event, by any writer, marks it stale like any cached aggregate's next one."""

    id: UUID
    version: int = 0

    def __deepcopy__(self, memo: dict[int, object]) -> Absent:
        return self


class UnitOfWork:
    def __init__(self, app: Application[UUID]) -> None:
        self._app = app
        self._cache: AggregateCache | None = getattr(app, "aggregates", None)
        self._seen_at: int | None = None  # the cache's log position when this attempt looked
        #: The look's position when it came before every read of the attempt (`look_first`).
        self._read_at: int | None = None
        self._loaded: dict[UUID, Aggregate | None] = {}
        self._after_commit: list[Callable[[], object]] = []
        self._quiet: list[UUID] = []
        #: Sessions read and not necessarily written, by id: the version each was read at.
        self._held: dict[UUID, int] = {}
        self._saved: tuple[list[Aggregate], dict[UUID, int], list[int]] | None = None
        self.first_event: Any = None

    def get(self, aggregate_id: UUID) -> Any:
        if aggregate_id not in self._loaded:
            loaded = self._loaded[aggregate_id] = self._load(aggregate_id)
            if _a_cursor(loaded) and loaded.pending:
                drained = self._drained(loaded)
                if drained is not None:
                    loaded.overlay(drained)
        return self._loaded[aggregate_id]

    def look_first(self) -> None:
        """Look at the log before the attempt's first read of the store, read models
        included: its save then tells the store the look's position (`read_at`). When the
        save's event directly follows it, no other save came between the reads and this one,
        so a drain's checks for such a race (`BulkWrites.check_cursors_held`,
        `check_no_cursor_behind`) have nothing to find and are skipped."""
        if self._cache is None or self._seen_at is not None:
            return
        self._check_open()
        self._seen_at = self._read_at = self._look(self._cache)

    def drains(self, watcher: str) -> Drains | None:
        """The watcher's drains (ADR 024), None before its first."""
        did = drains_id(watcher)
        if did not in self._loaded:
            self._loaded[did] = self._load(did, absent_kept=True)
        return cast("Drains | None", self._loaded[did])

    def _drained(self, watch: Watch) -> Any:
        """The drain that gives a cursor loaded as pending its positions, if any."""
        drains = self.drains(watch.watcher)
        return None if drains is None else drains.latest_for(watch.id, watch.version)

    def _load(self, aggregate_id: UUID, *, absent_kept: bool = False) -> Aggregate | None:
        self._check_open()
        cache = self._cache
        if cache is not None:
            if self._seen_at is None:
                self._seen_at = self._look(cache)  # once per attempt, before any read
            hit = cache.get(aggregate_id, self._fast_forward)
            if hit is not None:
                aggregate, forwarded = hit
                if forwarded:
                    cache.loaded(aggregate, self._seen_at)
                return None if type(aggregate) is Absent else cast(Aggregate, aggregate)
        get, started = self._app.repository.get, time.monotonic()
        try:
            try:
                loaded = get(aggregate_id, projector_func=_mutate)
            except STORE_ERRORS as error:
                loaded = read_again(
                    "aggregate", started, error, get, aggregate_id, projector_func=_mutate
                )
        except AggregateNotFoundError:
            if absent_kept and cache is not None and self._seen_at is not None:
                cache.loaded(Absent(aggregate_id), self._seen_at)
            return None
        if cache is not None and self._seen_at is not None:
            cache.loaded(loaded, self._seen_at)
        return cast(Aggregate, loaded)

    def prefetch(self, ids: Iterable[UUID], *, absent_kept: Collection[UUID] = ()) -> None:
        """Load many aggregates with ONE read of the store, as `get` would load each (a
        batch's, ADR 038): the cached and fresh ones are left to the cache (`get` and
        `cursor_to_read` read them without a query); a cached one that another writer
        changed is fast-forwarded from its cached version, any other read whole from its
        latest snapshot (ADR 022). Those among `absent_kept` that the store does not have
        are cached as absent, as `drains` keeps them. A cursor loaded as pending is shown
        with its watcher's latest drain of it, as `get` shows it (ADR 024)."""
        self._check_open()
        if self._cache is not None and self._seen_at is None:
            self._seen_at = self._look(self._cache)  # once per attempt, before any read
        stale = self._to_prefetch(ids)
        if not stale:
            return
        snapshots, events = self._read_streams(
            {i: 0 if a is None else a.version for i, a in stale.items()}
        )
        repository = self._app.repository
        to_event = repository.event_store.mapper.to_domain_event
        streams: dict[UUID, list[Any]] = {}
        for stored in events:
            streams.setdefault(cast(UUID, stored.originator_id), []).append(to_event(stored))
        starts: dict[UUID, Any] = {}
        if snapshots:
            to_snapshot = cast(Any, repository.snapshot_store).mapper.to_domain_event
            starts = {cast(UUID, s.originator_id): to_snapshot(s).mutate(None) for s in snapshots}
        loaded = [
            self._prefetched(i, cached, starts.get(i), streams.get(i, ()), i in absent_kept)
            for i, cached in stale.items()
        ]
        for aggregate in loaded:
            if _a_cursor(aggregate) and aggregate.pending:
                drained = self._drained(aggregate)
                if drained is not None:
                    aggregate.overlay(drained)

    def _to_prefetch(self, ids: Iterable[UUID]) -> dict[UUID, Any]:
        """Of `ids`, those `prefetch` reads: each with its cached copy to fast-forward (an
        `Absent` one included), None to read whole. Neither the ones this attempt loaded
        nor the cached and fresh ones."""
        cache = self._cache
        out: dict[UUID, Any] = {}
        for aggregate_id in ids:
            if aggregate_id in self._loaded or aggregate_id in out:
                continue
            if cache is not None:
                if cache.peek(aggregate_id) is not None:
                    continue  # cached and fresh: read from the cache when asked
                hit = cache.get(aggregate_id, _as_cached)
                if hit is not None:
                    if hit[1]:  # stale: fast-forwarded from its version
                        out[aggregate_id] = hit[0]
                    continue  # else made fresh meanwhile: as above
            out[aggregate_id] = None
        return out

    def _prefetched(
        self, aggregate_id: UUID, cached: Any, start: Any, events: Iterable[Any], kept: bool
    ) -> Aggregate | None:
        """One aggregate of `prefetch`: from its snapshot (`start`) when the read found a
        newer one than its cached copy, else from that copy (`_fast_forward`'s), else from
        nothing (`_load`'s); kept in the cache and in this attempt as those keep it."""
        if start is None and type(cached) is not Absent:
            start = cached
        aggregate = _mutate(start, events)
        if aggregate is None:  # the store does not have it: an absent one stays absent
            aggregate = cached if cached is not None else Absent(aggregate_id) if kept else None
        if self._cache is not None and aggregate is not None and self._seen_at is not None:
            self._cache.loaded(aggregate, self._seen_at)
        found = None if aggregate is None or type(aggregate) is Absent else aggregate
        self._loaded[aggregate_id] = found
        return cast(Aggregate | None, found)

    def _read_streams(self, known: dict[UUID, int]) -> tuple[list[Any], list[Any]]:
        """The recorder's `select_streams` of `known` (id → version held), typed as reads are."""
        # The service's store always snapshots its aggregates (ADR 022).
        table = cast(Any, self._app.repository.snapshot_store).recorder.events_table_name
        read, started = cast(Any, self._app.recorder).select_streams, time.monotonic()
        try:
            return cast(tuple[list[Any], list[Any]], read(known, table))
        except STORE_ERRORS as error:
            return cast(
                tuple[list[Any], list[Any]],
                read_again("streams", started, error, read, known, table),
            )

    def _check_open(self) -> None:
        if getattr(self._app, "closed", False):
            raise closed_error()

    @staticmethod
    def _look(cache: AggregateCache) -> int:
        return cache.look(again=_look_again)

    def _fast_forward(self, aggregate: Any) -> Any:
        """Apply the stored events after the copy's version (another writer's)."""
        get, started = self._app.repository.event_store.get, time.monotonic()
        try:
            events = list(get(aggregate.id, gt=aggregate.version))
        except STORE_ERRORS as error:
            again = read_again("aggregate_events", started, error, get, aggregate.id,
                               gt=aggregate.version)  # fmt: skip
            events = list(again)
        if type(aggregate) is Absent:  # created since: its first event makes it
            return _mutate(None, events) or aggregate
        return _mutate(aggregate, events)

    def add(self, aggregate: A) -> A:
        """Track a newly created aggregate so `commit()` saves it."""
        self._loaded[aggregate.id] = aggregate
        return aggregate

    def session(self, ref: SessionRef | UUID) -> Session | None:
        return cast(Session | None, self.get(ref if isinstance(ref, UUID) else ref.session_id))

    def hold(self, ref: SessionRef) -> Session | None:
        """A session the attempt decides by without writing it (a new parent's ancestry,
        R-T3): the save is refused as a conflict, and the attempt run again, if another save
        changed it (or created it, when absent) after it was read here."""
        session = self.session(ref)
        self._held.setdefault(ref.session_id, 0 if session is None else session.version)
        return session

    def live(self, ref: SessionRef) -> Session | None:
        """The session unless it is unknown or deleted."""
        session = self.session(ref)
        return session if session is not None and not session.deleted else None

    def seen(self, session: Session, dedupe_key: str | None) -> bool:
        """Whether the session already recorded this idempotency key (R-L5): among the keys
        it keeps (its latest, and this attempt's), else in the read model's index of every
        key it ever recorded. A concurrent save of the same key is caught all the same: both
        saves append to this session, so one loses the race and runs again, and sees it."""
        if dedupe_key is None:
            return False
        if session.has_seen(dedupe_key):
            return True
        read_model = getattr(self._app, "read_model", None)
        return read_model is not None and bool(read_model.dedupe_key_seen(session.id, dedupe_key))

    def watch(self, watcher: str, target: SessionRef | UUID) -> Watch | None:
        """The (watcher, target) cursor; `target` is the session's ref or its id."""
        target_id = target if isinstance(target, UUID) else target.session_id
        return cast("Watch | None", self.get(watch_id(watcher, target_id)))

    def watch_to_tell(self, watcher: str, target_id: UUID) -> Watch | None:
        """The cursor a fan-out tells: a pending one as the cache holds it, uncopied (telling
        a pending cursor only reads it, ADR 023) unless a drain gives it other positions (ADR
        024); any other as `watch` loads it."""
        uncopied = self._uncopied(watch_id(watcher, target_id), pending_only=True)
        return uncopied or self.watch(watcher, target_id)

    def cursor_to_read(self, wid: UUID) -> Watch | None:
        """A cursor the command only reads (a drain's, which stores on the watcher's
        `Drains`): as the cache holds it, uncopied, unless a drain gives it other positions;
        otherwise as `get` loads it."""
        return self._uncopied(wid, pending_only=False) or cast("Watch | None", self.get(wid))

    def cursors_to_read(self, watcher: str, wids: Iterable[UUID]) -> list[Watch | None]:
        """`cursor_to_read` of each of one watcher's cursors (a drain's), with ONE look at
        the watcher's `Drains` and one hold of the cache's lock for them all instead of one
        per cursor."""
        cache = self._cache
        if cache is None:
            return [self.cursor_to_read(wid) for wid in wids]
        self._check_open()
        if self._seen_at is None:
            self._seen_at = self._look(cache)
        wids = list(wids)
        drains = self._drains_to_read(watcher)
        loaded, get = self._loaded, self.get
        out: list[Watch | None] = []
        for wid, cached in zip(wids, cache.peek_many(wids), strict=True):
            # as `_uncopied` judges each: the cached cursor itself unless this attempt loaded
            # it, or it is not a fresh cursor, or a drain gives it other positions
            if (
                (loaded and wid in loaded)  # mostly empty here: no hash of the id
                or not _a_cursor(cached)
                or (
                    cached.pending
                    and drains is not None
                    and drains.gives_positions(cached.id, cached.version)
                )
            ):
                out.append(cast("Watch | None", get(wid)))
            else:
                out.append(cached)
        return out

    def _drains_to_read(self, watcher: str) -> Drains | None:
        """The watcher's `Drains` to read cached cursors by: as this attempt loaded it, else
        as the cache holds it, else loaded now; None when it has none."""
        assert self._cache is not None  # noqa: S101 -- only called with a cache
        did = drains_id(watcher)
        if did in self._loaded:
            return cast("Drains | None", self._loaded[did])
        cached = self._cache.peek(did)
        if type(cached) is Absent:
            return None
        return cast("Drains", cached) if cached is not None else self.drains(watcher)

    def _uncopied(
        self, wid: UUID, *, pending_only: bool, drains: Drains | EllipsisType | None = ...
    ) -> Watch | None:
        """The cached cursor itself, for a command that only reads it: when it is cached and
        fresh, not loaded by this attempt already, pending if `pending_only`, and shown as
        its own events make it (no drain gives it other positions: judged by `drains`, its
        watcher's, when the caller read them already, `...` when not); otherwise None."""
        if wid in self._loaded or self._cache is None:
            return None
        self._check_open()
        if self._seen_at is None:
            self._seen_at = self._look(self._cache)
        cached = self._cache.peek(wid)
        if not _a_cursor(cached):
            return None
        if cached.pending:
            if drains is ...:
                drains = self._drains_to_read(cached.watcher)
            if drains is not None and drains.gives_positions(cached.id, cached.version):
                return None  # a drain gives it other positions: loaded instead
            return cached
        return None if pending_only else cached

    def quiet(self, watch_id: UUID) -> None:
        """A notice this save opens or reopens that publishes no wake, not even to other
        processes: the domain decided it (an ambient cursor's, R-W7)."""
        self._quiet.append(watch_id)

    def after_commit(self, action: Callable[[], object]) -> None:
        """Run `action` once this attempt's save has committed (wakes, logs)."""
        self._after_commit.append(action)

    def _changed(self) -> list[Aggregate]:
        return [a for a in self._loaded.values() if a is not None and a.pending_events]

    def first_pending(self) -> Any:
        """The event `save()` would remember as its first (None when nothing is pending):
        every event of a save commits or none does, so it stands for the whole save."""
        changed = self._changed()
        return changed[0].pending_events[0] if changed else None

    def save(self) -> None:
        """Save every aggregate with pending events in one atomic save."""
        self._check_open()
        changed = self._changed()
        if changed:
            self.first_event = changed[0].pending_events[0]
            kwargs: dict[str, Any] = {}
            if self._quiet:  # the domain's: notices that publish no wake (R-W7, R-N7)
                kwargs["quiet_notices"] = frozenset(self._quiet)
            if self._held:  # checked unchanged in the save's transaction
                kwargs["held_sessions"] = tuple(self._held.items())
            if self._read_at is not None:  # every read of the attempt came after it
                kwargs["read_at"] = self._read_at
            recordings = self._app.save(*changed, **kwargs)
            positions: dict[UUID, int] = {}
            ids: list[int] = []
            for recording in recordings or ():
                originator_id, at = recording.domain_event.originator_id, recording.notification.id
                positions[originator_id] = max(at, positions.get(originator_id, 0))
                ids.append(at)
            self._saved = (changed, positions, ids)

    def committed(self) -> None:
        """Keep the saved aggregates in the cache, then run the after-commit actions (wakes,
        logs). A save whose answer was lost is not kept: its events are in the store and the
        cache's next look at the log marks the older copies stale."""
        if self._cache is not None and self._saved is not None:
            self._cache.saved(*self._saved)
        for action in self._after_commit:
            action()

    def commit(self) -> None:
        self.save()
        self.committed()

    def landed(self) -> bool | None:
        """After a save whose answer was lost: did it commit? Read back its first event (every
        event of a save commits or none does). None when the store cannot be asked."""
        return event_landed(self._app, self.first_event)


def event_landed(app: Application[UUID], event: Any) -> bool | None:
    """Whether this very event is in the store (same stream, version and state); None when the
    store cannot be asked."""
    if event is None:
        return False
    # A stored event stands for a domain event of an earlier process (the spool's, R-L10).
    expected = event if isinstance(event, StoredEvent) else app.mapper.to_stored_event(event)
    try:
        stored = app.recorder.select_events(
            event.originator_id, gt=event.originator_version - 1, lte=event.originator_version
        )
    except STORE_ERRORS:
        return None
    return bool(stored) and stored[0].state == expected.state
