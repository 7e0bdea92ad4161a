"""BENCH-ONLY monkeypatches that measure the proposals of `bench/PROPOSALS.md`.

Nothing here is product code. Each patch swaps in a replacement for one product or library
method in this process only (writer and replay subprocesses re-apply it), so that a
proposal's effect can be measured before the lead applies the real change. Every replacement
checks whether its proposal is active and otherwise does exactly what the original does, so
`bench.ab` can switch a proposal on and off round by round in one process.

    python -m bench --proposals pg-no-notify,pg-no-table-lock --only record4
    python -m bench.ab batch-load --only fanout,drain
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any
from uuid import UUID

#: The proposals switched on in this process, in the order they were applied.
APPLIED: list[str] = []
_INSTALLED: set[str] = set()


def active(name: str) -> bool:
    return name in APPLIED


def _pg_notify_and_lock() -> None:
    """P1 `pg-no-notify`: no `NOTIFY <app>_events` per insert; nothing LISTENs on it.
    P2 `pg-no-table-lock`: no `LOCK TABLE <app>_events IN EXCLUSIVE MODE` per insert."""
    from session_awareness.infrastructure.postgres import PostgresReadModelRecorder  # noqa: PLC0415

    notify, lock = PostgresReadModelRecorder._notify_channel, PostgresReadModelRecorder._lock_table

    def notify_channel(self: Any, curs: Any) -> None:
        if not active("pg-no-notify"):
            notify(self, curs)

    def lock_table(self: Any, curs: Any) -> None:
        if not active("pg-no-table-lock"):
            lock(self, curs)

    PostgresReadModelRecorder._notify_channel = notify_channel  # type: ignore[method-assign]
    PostgresReadModelRecorder._lock_table = lock_table  # type: ignore[method-assign]


def _one_statement_status() -> None:
    """P5: every read-model query is one statement, so run it without BEGIN/ROLLBACK (two
    round trips fewer on PostgreSQL). (Its other half, `session_state` in one statement, is
    in the product since branch perf-changes.)"""
    from session_awareness.infrastructure import readmodel  # noqa: PLC0415
    from session_awareness.infrastructure.postgres import PostgresReadModelRecorder  # noqa: PLC0415
    from session_awareness.infrastructure.sqlite import SQLiteReadModelRecorder  # noqa: PLC0415

    original_fetch = readmodel.ReadModelStore.fetch

    def pg_fetch(self: Any, template: str, params: Any = ()) -> list[Any]:
        if not active("one-statement-status"):
            return original_fetch(self, template, params)
        with self.datastore.get_connection() as conn, conn.cursor() as c:
            c.execute(self.sql(template), params)
            return list(c.fetchall())

    def sqlite_fetch(self: Any, template: str, params: Any = ()) -> list[Any]:
        if not active("one-statement-status"):
            return original_fetch(self, template, params)
        with self.datastore.get_connection(commit=False) as conn:
            c = conn.cursor()
            c.execute(self.sql(template), params)
            return list(c.fetchall())

    PostgresReadModelRecorder.fetch = pg_fetch  # type: ignore[method-assign]
    SQLiteReadModelRecorder.fetch = sqlite_fetch  # type: ignore[method-assign]


def _prefetch(uow: Any, ids: list[UUID]) -> None:
    """Load many aggregates into a unit of work with one query: cached ones fast-forwarded
    from their cached version, the others read whole (what `Repository.get` does one by one,
    one round trip each). Bench-only: it skips the library's per-aggregate fast-forward locks,
    which a real `UnitOfWork.prefetch` would take."""
    from eventsourcing.persistence import StoredEvent  # noqa: PLC0415

    from session_awareness.infrastructure.sqlite import SQLiteReadModelRecorder  # noqa: PLC0415

    app, repo = uow._app, uow._app.repository
    wanted = [i for i in dict.fromkeys(ids) if i not in uow._loaded]
    if not wanted:
        return
    cached: dict[UUID, Any] = {}
    for aggregate_id in wanted:
        with contextlib.suppress(KeyError):
            cached[aggregate_id] = repo.cache.get(aggregate_id)
    after = [(i, cached[i].version if i in cached else 0) for i in wanted]
    recorder = app.recorder
    rows: list[Any] = []
    if isinstance(recorder, SQLiteReadModelRecorder):
        with recorder.datastore.transaction(commit=False) as c:
            for start in range(0, len(after), 400):
                chunk = after[start : start + 400]
                where = " OR ".join("(originator_id = ? AND originator_version > ?)" for _ in chunk)
                c.execute(
                    "SELECT originator_id, originator_version, topic, state FROM stored_events "  # noqa: S608
                    f"WHERE {where} ORDER BY originator_id, originator_version",
                    [v for i, version in chunk for v in (i.hex, version)],
                )
                rows.extend(
                    (UUID(r["originator_id"]), r["originator_version"], r["topic"], r["state"])
                    for r in c.fetchall()
                )
    else:
        table = recorder.dialect.schema_prefix + '"' + recorder.events_table_name + '"'
        with recorder.datastore.get_connection() as conn:
            found = conn.execute(
                "SELECT e.originator_id, e.originator_version, e.topic, e.state "  # noqa: S608
                f"FROM {table} e JOIN unnest(%s::uuid[], %s::bigint[]) AS w(id, v) "
                "ON e.originator_id = w.id AND e.originator_version > w.v "
                "ORDER BY e.originator_id, e.originator_version",
                ([i for i, _ in after], [v for _, v in after]),
            ).fetchall()
            rows = [
                (r["originator_id"], r["originator_version"], r["topic"], bytes(r["state"]))
                for r in found
            ]
    aggregates: dict[UUID, Any] = dict(cached)
    for originator_id, version, topic, state in rows:
        event = app.mapper.to_domain_event(StoredEvent(originator_id, version, topic, state))
        aggregates[originator_id] = event.mutate(aggregates.get(originator_id))
    for aggregate_id in wanted:
        aggregate = aggregates.get(aggregate_id)
        if aggregate is not None and aggregate_id not in cached:
            repo.cache.put(aggregate_id, aggregate)
        uow._loaded[aggregate_id] = None if aggregate is None else copy.deepcopy(aggregate)


def _batch_load() -> None:
    """P6: the watches a fan-out or a drain needs, loaded with one query per attempt instead
    of one `Repository.get` (one round trip, one pool checkout) each."""
    from typing import cast  # noqa: PLC0415

    from session_awareness.application.core import log  # noqa: PLC0415
    from session_awareness.application.producers import Producers  # noqa: PLC0415
    from session_awareness.application.watching import Watching  # noqa: PLC0415
    from session_awareness.domain.keys import watch_id  # noqa: PLC0415

    fan_out, drain = Producers._fan_out, Watching.drain_notices

    def prefetching_fan_out(self: Any, uow: Any, session: Any, *args: Any) -> None:
        if active("batch-load"):
            watchers = [*session.watchers, *([session.parent_key] if session.parent_key else [])]
            _prefetch(uow, [watch_id(w, session.id) for w in watchers])
        fan_out(self, uow, session, *args)

    def prefetching_drain(self: Any, watcher: str) -> list[str]:
        if not active("batch-load"):
            return drain(self, watcher)

        def attempt(uow: Any) -> list[str]:  # Watching.drain_notices, plus the prefetch
            rows = self.read_model.cursors_of_watcher(watcher, pending_only=True)
            _prefetch(uow, [row.watch_id for row in rows])
            now, texts, reopened = self.clock(), [], 0
            for row in rows:
                watch = uow.get(row.watch_id)
                if watch is None or not watch.pending:
                    continue
                texts.append(cast(str, watch.notice))
                reopened += watch.acknowledge(at=now)
            if texts:
                log.info("notice_drained", watcher=watcher, drained=len(texts), reopened=reopened)
            if reopened:
                uow.after_commit(lambda: self._wake([watcher]))
            return texts

        return cast(list[str], self._retrying(attempt))

    Producers._fan_out = prefetching_fan_out  # type: ignore[method-assign,assignment]
    Watching.drain_notices = prefetching_drain  # type: ignore[method-assign]


def _bigger_cache() -> None:
    """P7: an aggregate cache of 20,000 instead of 1,000 (read when a service opens): a
    drain of 1,000 pairs touches 1,000 Watch aggregates plus their 1,000 targets, so a
    1,000-entry LRU evicts every Watch before the drain needs it, and each is rebuilt from
    all its events."""
    from session_awareness.application import service  # noqa: PLC0415

    original = service.environment_for

    def environment_for(url: str) -> dict[str, str]:
        settings = original(url)
        if active("bigger-cache"):
            settings["AGGREGATE_CACHE_MAXSIZE"] = "20000"
        return settings

    service.environment_for = environment_for


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


#: Each proposal and the installer of its (switchable) replacement.
PATCHES: dict[str, Callable[[], None]] = {
    "pg-no-notify": _pg_notify_and_lock,
    "pg-no-table-lock": _pg_notify_and_lock,
    "one-statement-status": _one_statement_status,
    "batch-load": _batch_load,
    "bigger-cache": _bigger_cache,
    "session-snapshots": _session_snapshots,
}
#: What `all` means: the recommended set still to apply, P1 and P5-P7 (P3 and P4 are in the
#: product since ca4201c); name the others to add them.
ALL = [name for name in PATCHES if name not in ("pg-no-table-lock", "session-snapshots")]


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
    return list(APPLIED)


def switch_off(names: list[str]) -> None:
    for name in names:
        if name in APPLIED:
            APPLIED.remove(name)
