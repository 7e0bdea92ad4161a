"""BENCH-ONLY monkeypatches that measure the proposals of `bench/PROPOSALS.md`.

Nothing here is product code. Each patch swaps in a replacement for one product or library
method in this process only (writer and replay subprocesses re-apply it), so that a
proposal's effect can be measured before the lead applies the real change. Every replacement
checks whether its proposal is active and otherwise does exactly what the original does, so
`bench.ab` can switch a proposal on and off round by round in one process.

    python -m bench.ab no-resolved-cache --only history
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: The proposals switched on in this process, in the order they were applied.
APPLIED: list[str] = []
_INSTALLED: set[str] = set()


def active(name: str) -> bool:
    return name in APPLIED


# -- the speed devices, switched OFF (each kept only if its A/B says it pays) -----------------
# Each `no-<device>` patch restores the plain library or straightforward path while active;
# `bench.ab no-<device>` prints the speed-up of switching the device off; the device's own
# figure, time without it / time with it (> 1: it helps), is the inverse.
# The figures and verdicts are in docs/adr/021-speed-devices-kept-by-measurement.md.


def _no_save_override() -> None:
    """`SessionStore.save` skips the library's runtime `Protocol` checks; off: the library's
    `Application.save` (which calls the same `_record`, with its `isinstance` checks)."""
    from eventsourcing.application import Application  # noqa: PLC0415

    from session_awareness.application.store import SessionStore  # noqa: PLC0415

    ours = SessionStore.save

    def save(self: Any, *aggregates: Any, **kwargs: Any) -> Any:
        if active("no-save-override"):
            return Application.save(self, *aggregates, **kwargs)
        return ours(self, *aggregates, **kwargs)

    SessionStore.save = save  # type: ignore[method-assign]


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


def _no_resolved_cache() -> None:
    """`SessionStore.resolve_id` memoises (key, agent id) -> (ref, id); off: `resolve` each
    time."""
    from session_awareness.application.store import SessionStore  # noqa: PLC0415

    ours = SessionStore.resolve_id

    def resolve_id(self: Any, key: str, agent_id: str | None = None) -> Any:
        if active("no-resolved-cache"):
            ref = self.resolve(key, agent_id)
            return ref, ref.session_id
        return ours(self, key, agent_id)

    SessionStore.resolve_id = resolve_id  # type: ignore[method-assign]


def _no_pg_write_path() -> None:
    """The service's own PostgreSQL insert in two round trips (ADR 013, the
    `PostgresRoundTripsRecorder` subclass); off: its base recorder's `insert_events`, the
    library's pipelined steps (lock, `NOTIFY`, insert, sync, ids) with the projection's rows
    before its commit. Large saves keep the bulk path either way."""
    from session_awareness.infrastructure.readmodel import pg_round_trips  # noqa: PLC0415
    from session_awareness.infrastructure.readmodel.pg_recorder import (  # noqa: PLC0415
        PostgresReadModelRecorder,
    )

    recorder = pg_round_trips.PostgresRoundTripsRecorder
    ours, library = recorder.insert_events, PostgresReadModelRecorder.insert_events

    def insert_events(self: Any, stored_events: Any, **kwargs: Any) -> Any:
        if not active("no-pg-write-path") or len(stored_events) >= pg_round_trips.BULK_INLINE:
            return ours(self, stored_events, **kwargs)
        return library(self, stored_events, **kwargs)

    recorder.insert_events = insert_events  # type: ignore[method-assign]


def _no_group_commit() -> None:
    """Concurrent saves of one process share one transaction and one commit (ADR 025); off:
    each save is a batch of its own, written by its caller in its own transaction (the
    store's lock takes the turns, as before group commit)."""
    from session_awareness.infrastructure.readmodel.group_commit import (  # noqa: PLC0415
        GroupCommit,
        Save,
    )

    ours = GroupCommit.insert

    def insert(self: Any, events: Any, kwargs: dict[str, Any]) -> Any:
        if not active("no-group-commit"):
            return ours(self, events, kwargs)
        save = Save(events, kwargs)
        self._run_batch([save])
        if save.error is not None:
            raise save.error
        return save.ids

    GroupCommit.insert = insert  # type: ignore[method-assign]


def _no_bulk_inline() -> None:
    """Saves of >= `BULK_INLINE` row changes (a drain, a wide fan-out) write in bulk (and, on
    PostgreSQL, as arrays in two pipelined round trips); off: one statement per row change,
    the small-save path."""
    from session_awareness.infrastructure.readmodel import (  # noqa: PLC0415
        bulk,
        pg_recorder,
        pg_round_trips,
    )

    size = bulk.BULK_INLINE

    class Threshold(int):
        """`BULK_INLINE` as an int, but `n < BULK_INLINE` / `n >= BULK_INLINE` never reach the
        bulk path while the patch is on."""

        def __gt__(self, n: int) -> bool:  # n < threshold
            return active("no-bulk-inline") or n < size

        def __le__(self, n: int) -> bool:  # n >= threshold
            return not active("no-bulk-inline") and n >= size

    threshold = Threshold(size)
    bulk.BULK_INLINE = pg_round_trips.BULK_INLINE = pg_recorder.BULK_INLINE = threshold


# -- cost probes: a check that correctness needs, switched off to measure what it costs -------
# Never correct while active: `bench.ab` alternates it with the real path to price it.


def _no_drains_peek() -> None:
    """The fan-out's look at each pending cursor's `Drains` (ADR 024), skipped: a cursor a
    drain synced would be read as pending. `bench.ab no-drains-peek --only fanout` prices it."""
    from session_awareness.application.unit_of_work import UnitOfWork  # noqa: PLC0415

    ours = UnitOfWork._drains_to_read

    def _drains_to_read(self: Any, watcher: str) -> Any:
        if active("no-drains-peek"):
            return None
        return ours(self, watcher)

    UnitOfWork._drains_to_read = _drains_to_read  # type: ignore[method-assign]


def _no_behind_check() -> None:
    """The save's check that no cursor it touched is synced below its target's derived M
    (ADR 023), skipped: a record racing a drain could leave a notice lost. `python -m bench
    --only record4 --backend postgresql --proposals no-behind-check` prices it where the
    table lock makes every statement inside it count."""
    from session_awareness.infrastructure.readmodel.bulk import BulkWrites  # noqa: PLC0415

    ours = BulkWrites.check_no_cursor_behind

    def check_no_cursor_behind(self: Any, c: Any, changes: Any) -> None:
        if active("no-behind-check"):
            return
        ours(self, c, changes)

    BulkWrites.check_no_cursor_behind = check_no_cursor_behind  # type: ignore[method-assign]


def _no_prepared_statements() -> None:
    """Each PostgreSQL connection prepares the statements it has seen (ADR 029); off: every
    statement of a save and of a read is bound plain, so the server parses and plans it each
    time (psycopg still prepares nothing)."""
    from session_awareness.infrastructure.readmodel.pg_prepared import Prepared  # noqa: PLC0415

    ours = Prepared.bound

    def bound(self: Any, bind: Any, query: str, params: Any = ()) -> str:
        if active("no-prepared-statements"):
            return str(bind(query, params))
        return ours(self, bind, query, params)

    ours_rows = Prepared.rows

    def rows(self: Any, conn: Any, query: str, params: Any = ()) -> Any:
        if active("no-prepared-statements"):
            return None  # the caller sends it plain
        return ours_rows(self, conn, query, params)

    Prepared.bound = bound  # type: ignore[method-assign]
    Prepared.rows = rows  # type: ignore[method-assign]


#: Each proposal and the installer of its (switchable) replacement.
#: P1, P5, P6 and P7 are in the product now (P1 and P6-P7 in another form: ADRs 012, 013),
#: and P2 no longer applies (the write path is the service's own); their patches are gone.
PATCHES: dict[str, Callable[[], None]] = {
    "no-save-override": _no_save_override,
    "no-aggregate-cache": _no_aggregate_cache,
    "no-resolved-cache": _no_resolved_cache,
    "no-pg-write-path": _no_pg_write_path,
    "no-bulk-inline": _no_bulk_inline,
    "no-group-commit": _no_group_commit,
    "no-drains-peek": _no_drains_peek,
    "no-behind-check": _no_behind_check,
    "no-prepared-statements": _no_prepared_statements,
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
