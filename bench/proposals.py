"""BENCH-ONLY monkeypatches that measure the proposals of `bench/PROPOSALS.md`.

Nothing here is product code. Each patch swaps in a replacement for one product or library
method in this process only (writer and replay subprocesses re-apply it), so that a
proposal's effect can be measured before the lead applies the real change. Every replacement
checks whether its proposal is active and otherwise does exactly what the original does, so
`bench.ab` can switch a proposal on and off round by round in one process.

    python -m bench --proposals session-snapshots --only history
    python -m bench.ab session-snapshots --only history
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: The proposals switched on in this process, in the order they were applied.
APPLIED: list[str] = []
_INSTALLED: set[str] = set()


def active(name: str) -> bool:
    return name in APPLIED


def _session_snapshots() -> None:
    """P8: a Session snapshot every 1,000 events (read when a service opens), so a restarted
    process loads a long session from a snapshot and at most 999 events."""
    from session_awareness.application.service import SessionAwareness  # noqa: PLC0415
    from session_awareness.domain.session import Session  # noqa: PLC0415

    class Intervals(dict[Any, int]):
        def __bool__(self) -> bool:
            return active("session-snapshots")

        def get(self, key: Any, default: Any = None) -> Any:
            return super().get(key, default) if self else default

    SessionAwareness.snapshotting_intervals = Intervals({Session: 1000})


# -- the speed devices, switched OFF (each kept only if its A/B says it pays) -----------------
# Each `no-<device>` patch restores the plain library or straightforward path while active;
# `bench.ab no-<device>` prints the speed-up of switching the device off; the device's own
# figure, time without it / time with it (> 1: it helps), is the inverse.
# The figures and verdicts are in docs/adr/020-speed-devices-kept-by-measurement.md.


def _no_save_override() -> None:
    """`ServiceCore.save` skips the library's runtime `Protocol` checks; off: the library's
    `Application.save` (which calls the same `_record`, with its `isinstance` checks)."""
    from eventsourcing.application import Application  # noqa: PLC0415

    from session_awareness.application.core import ServiceCore  # noqa: PLC0415

    ours = ServiceCore.save

    def save(self: Any, *aggregates: Any, **kwargs: Any) -> Any:
        if active("no-save-override"):
            return Application.save(self, *aggregates, **kwargs)
        return ours(self, *aggregates, **kwargs)

    ServiceCore.save = save  # type: ignore[method-assign]


def _no_guarded_binding() -> None:
    """`GuardedReadModel.__getattr__` binds each guarded method on the instance (`setattr`),
    so later lookups skip `__getattr__`; off: every lookup goes through `__getattr__` and
    builds the guard afresh (the instances' bound methods are dropped while it is on)."""
    import weakref  # noqa: PLC0415

    from session_awareness.application.core import GuardedReadModel  # noqa: PLC0415

    instances: weakref.WeakSet[Any] = weakref.WeakSet()
    init, getattr_ = GuardedReadModel.__init__, GuardedReadModel.__getattr__

    def __init__(self: Any, inner: object) -> None:  # noqa: N807 -- the patched method
        init(self, inner)
        instances.add(self)

    def __getattr__(self: Any, name: str) -> Any:  # noqa: N807 -- the patched method
        guarded = getattr_(self, name)
        if active("no-guarded-binding"):
            self.__dict__.pop(name, None)
        return guarded

    def unbind() -> None:
        for instance in list(instances):
            inner = instance.__dict__["_inner"]
            instance.__dict__.clear()
            instance.__dict__["_inner"] = inner

    GuardedReadModel.__init__ = __init__  # type: ignore[method-assign]
    GuardedReadModel.__getattr__ = __getattr__  # type: ignore[method-assign]
    ON_APPLY["no-guarded-binding"] = unbind


def _no_aggregate_cache() -> None:
    """The service's aggregate cache (ADR 012); off: every load is the library's
    `Repository.get` (the library's own cache is disabled by `open_service`), every command
    reads each aggregate's events. The cache catches up by its next look at the log."""
    from session_awareness.application.unit_of_work import UnitOfWork  # noqa: PLC0415

    init = UnitOfWork.__init__

    def __init__(self: Any, app: Any) -> None:  # noqa: N807 -- the patched method
        init(self, app)
        if active("no-aggregate-cache"):
            self._cache = None

    UnitOfWork.__init__ = __init__  # type: ignore[method-assign]


def _no_grow_only_set() -> None:
    """A session's idempotency keys are a `GrowOnlySet`, copied in O(recent additions); off:
    every copy is a whole copy, as a plain `set` copies."""
    from session_awareness.domain.copying import GrowOnlySet  # noqa: PLC0415

    ours = GrowOnlySet.copy

    def copy(self: Any) -> Any:
        if active("no-grow-only-set"):
            return GrowOnlySet(frozenset(self))
        return ours(self)

    GrowOnlySet.copy = copy  # type: ignore[method-assign]


def _no_resolved_cache() -> None:
    """`ServiceCore.resolve_id` memoises (key, agent id) -> (ref, id); off: `resolve` each
    time."""
    from session_awareness.application.core import ServiceCore  # noqa: PLC0415

    ours = ServiceCore.resolve_id

    def resolve_id(self: Any, key: str, agent_id: str | None = None) -> Any:
        if active("no-resolved-cache"):
            ref = self.resolve(key, agent_id)
            return ref, ref.session_id
        return ours(self, key, agent_id)

    ServiceCore.resolve_id = resolve_id  # type: ignore[method-assign]


def _no_statement_cache() -> None:
    """SQLite connections keep 64 prepared statements (the pool's `__class__` swap in
    `infrastructure/sqlite.py`); off: the library's `cached_statements=True` (one). The size
    is fixed when a connection opens, so switching closes the pooled connections of every
    service opened since the patch, and the next checkout opens one of the wanted kind."""
    import sqlite3  # noqa: PLC0415
    import weakref  # noqa: PLC0415

    from session_awareness.infrastructure import sqlite as ours  # noqa: PLC0415

    pools: weakref.WeakSet[Any] = weakref.WeakSet()
    create = ours._StatementCachingPool._create_connection
    connect = sqlite3.connect

    def _create_connection(self: Any) -> Any:
        pools.add(self)
        if not active("no-statement-cache"):
            return create(self)

        def library_sized(*args: Any, **kwargs: Any) -> Any:
            kwargs["cached_statements"] = True  # what the library's own pool passes
            return connect(*args, **kwargs)

        ours.sqlite3.connect = library_sized  # type: ignore[assignment]
        try:
            return create(self)
        finally:
            ours.sqlite3.connect = connect

    def reopen() -> None:
        for pool in list(pools):
            with pool._get_semaphore, pool._put_condition:
                while pool._pool:
                    pool._pool.popleft().close()

    ours._StatementCachingPool._create_connection = _create_connection  # type: ignore[method-assign]
    ON_APPLY["no-statement-cache"] = ON_SWITCH_OFF["no-statement-cache"] = reopen


def _no_pg_write_path() -> None:
    """The service's own PostgreSQL insert in two round trips (ADR 013); off: the library's
    pipelined `insert_events` (lock, `NOTIFY`, insert, sync, ids), with the projection's rows
    written on its cursor before its commit. Large saves keep the bulk path either way."""
    from eventsourcing.postgres import PostgresApplicationRecorder  # noqa: PLC0415

    from session_awareness.application import projection as p  # noqa: PLC0415
    from session_awareness.infrastructure import postgres as pg  # noqa: PLC0415

    recorder = pg.PostgresReadModelRecorder
    ours, library = recorder.insert_events, PostgresApplicationRecorder.insert_events.__wrapped__  # type: ignore[attr-defined]
    fetch = PostgresApplicationRecorder._fetch_ids_after_insert_events

    def insert_events(self: Any, stored_events: Any, **kwargs: Any) -> Any:
        if not active("no-pg-write-path") or len(stored_events) >= pg.BULK_INLINE:
            return ours(self, stored_events, **kwargs)
        return library(self, stored_events, **kwargs)

    def _fetch_ids_after_insert_events(
        self: Any, curs: Any, stored_events: Any, *, projected_events: Any = (), **kwargs: Any
    ) -> Any:
        ids = fetch(self, curs, stored_events, **kwargs)
        if projected_events:
            self.apply_inline(curs, p.project(list(zip(ids, projected_events, strict=True))))
        return ids

    recorder.insert_events = insert_events  # type: ignore[method-assign]
    recorder._fetch_ids_after_insert_events = _fetch_ids_after_insert_events  # type: ignore[method-assign]


def _no_bulk_inline() -> None:
    """Saves of >= `BULK_INLINE` row changes (a drain, a wide fan-out) write in bulk (and, on
    PostgreSQL, as arrays in two pipelined round trips); off: one statement per row change,
    the small-save path."""
    from session_awareness.infrastructure import postgres, readmodel  # noqa: PLC0415

    size = readmodel.BULK_INLINE

    class Threshold:
        """`n < BULK_INLINE` / `n >= BULK_INLINE`, never reached while the patch is on."""

        def __gt__(self, n: int) -> bool:  # n < threshold
            return active("no-bulk-inline") or n < size

        def __le__(self, n: int) -> bool:  # n >= threshold
            return not active("no-bulk-inline") and n >= size

    readmodel.BULK_INLINE = postgres.BULK_INLINE = Threshold()  # type: ignore[assignment]


#: Each proposal and the installer of its (switchable) replacement.
#: P1, P5, P6 and P7 are in the product now (P1 and P6-P7 in another form: ADRs 012, 013),
#: and P2 no longer applies (the write path is the service's own); their patches are gone.
PATCHES: dict[str, Callable[[], None]] = {
    "session-snapshots": _session_snapshots,
    "no-save-override": _no_save_override,
    "no-guarded-binding": _no_guarded_binding,
    "no-aggregate-cache": _no_aggregate_cache,
    "no-grow-only-set": _no_grow_only_set,
    "no-resolved-cache": _no_resolved_cache,
    "no-statement-cache": _no_statement_cache,
    "no-pg-write-path": _no_pg_write_path,
    "no-bulk-inline": _no_bulk_inline,
}
#: Run when a proposal is switched on / off (for devices fixed when a connection opens).
ON_APPLY: dict[str, Callable[[], None]] = {}
ON_SWITCH_OFF: dict[str, Callable[[], None]] = {}
#: What `all` means: the recommended proposals not yet in the product (none left).
ALL: list[str] = []


def install(names: list[str]) -> None:
    """Install the replacements of `names` (still switched off)."""
    for name in names:
        if name not in PATCHES:
            raise SystemExit(f"unknown proposal {name!r}; known: all, {', '.join(PATCHES)}")
        installer = PATCHES[name]
        if installer.__name__ not in _INSTALLED:
            installer()
            _INSTALLED.add(installer.__name__)


def apply(names: list[str]) -> list[str]:
    """Switch the named proposals on (`all`: every one that keeps the design)."""
    expanded = [n for name in names for n in (ALL if name == "all" else [name])]
    install(expanded)
    for name in expanded:
        if name not in APPLIED:
            APPLIED.append(name)
            if name in ON_APPLY:
                ON_APPLY[name]()
    return list(APPLIED)


def switch_off(names: list[str]) -> None:
    for name in names:
        if name in APPLIED:
            APPLIED.remove(name)
            if name in ON_SWITCH_OFF:
                ON_SWITCH_OFF[name]()
