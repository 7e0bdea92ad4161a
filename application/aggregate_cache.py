"""Aggregates as this process last saw them, kept fresh by reading the notification log.

The library's cache fast-forwards every cached aggregate on every load: one `SELECT` of the
events after the cached version, per aggregate, per command (two or more per record). This
cache instead asks the store once per attempt which aggregates anyone changed since it last
looked (`originators_after`: notification id, originator id and version, no state) and marks
only those stale; a stale aggregate is fast-forwarded when it is next loaded. A single
writer thus loads its aggregates without a query, and several writers pay one query per
attempt plus one per aggregate another writer actually changed.

Why reading the log is exact: every event gets its notification id under the event table's
lock (PostgreSQL) or the database's single write lock (SQLite), so ids become visible in
order; once the log shows id `n`, every event with a smaller id is visible too. An aggregate
is put back only when no look at the log can have passed one of its newer events:
- after a save, when the log position is still below the save's own notification id;
- after a load or fast-forward, when the position has not moved since before its read.
Otherwise it is dropped (the next load reads it from the store), except a saved one whose
notification id a look has already passed (another thread looked between the commit and
this caller's turn, as when several saves commit together, ADR 025): it is kept, and fresh
only if the looks read every notification after the save and none was a newer event of it
(each look notes the newest version it read of every aggregate, cached or not, since a
bounded window's start); otherwise stale, so its next load reads the events after the saved
version.
Optimistic concurrency still guards every write: a command that decided on a copy that went
stale meanwhile loses the race on save and runs again (docs/architecture.md), after the next
look at the log has marked the aggregate stale.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from copy import deepcopy
from typing import Any, Protocol
from uuid import UUID

#: Notifications read per page of a look at the log, and pages per look; a longer gap
#: empties the cache instead (cheaper than reading all of it).
LOOK_LIMIT = 1000
LOOK_PAGES = 10
#: Aggregates whose newest version read by the looks is noted; past it the notes start afresh.
PASSED_BOUND = LOOK_LIMIT * LOOK_PAGES


#: How a look's failed read is answered: `again(error, started, look)` reads again or raises.
Again = Callable[[Exception, float, Callable[[], int]], int]


class NotificationLog(Protocol):
    def originators_after(self, position: int, limit: int) -> Sequence[tuple[int, UUID, int]]:
        """`(notification id, originator id, originator version)` after `position`, in order."""

    def max_notification_id(self) -> int | None: ...


class AggregateCache:
    """A bounded, thread-safe map of aggregate id → the latest copy this process has seen.

    Copies go out (`get`), never the cached object, so a command's changes reach the cache
    only through `saved`."""

    def __init__(self, log: NotificationLog, maxsize: int) -> None:
        self._log = log
        self._maxsize = maxsize
        self._items: OrderedDict[UUID, Any] = OrderedDict()
        self._stale: set[UUID] = set()
        #: The newest version the looks read of each aggregate after `_passed_from`.
        self._passed: dict[UUID, int] = {}
        self._passed_from: int | None = None
        self._lock = threading.Lock()
        self.position: int | None = None  # None: not looked yet (the cache is empty)
        #: How many looks failed, and the latest failure: what the looks that waited for it
        #: raise, as a future's waiters do, rather than each waiting out its own deadline.
        self._failures = 0
        self._failure: Exception | None = None

    def look(self, again: Again | None = None) -> int:
        """Read the log since the last look, mark what others changed as stale, and return
        the new position (what a later `loaded` must still see). One look reads at a time; a
        look that failed fails the looks that were waiting for it with the same error: a
        hung store makes threads that look at once wait out one deadline, not one each.
        `again(error, started, look)` answers a failed read (the caller's retry and typing of
        store errors), so what the waiters share is the final failure, not one they would
        each try again."""
        arrived = self._failures
        with self._lock:
            if self._failures != arrived and self._failure is not None:
                raise self._failure
            started = time.monotonic()
            try:
                try:
                    return self._look()
                except Exception as error:
                    if again is None:
                        raise
                    return again(error, started, self._look)
            except Exception as error:
                self._failures += 1
                self._failure = error
                raise

    def _look(self) -> int:
        """The look itself, under the lock."""
        if self.position is None:
            self.position = self._log.max_notification_id() or 0
            self._passed_from = self.position
            return self.position
        passed = self._passed
        for _ in range(LOOK_PAGES):
            if len(passed) >= PASSED_BOUND:
                passed.clear()
                self._passed_from = self.position
            found = self._log.originators_after(self.position, LOOK_LIMIT)
            for _, originator_id, version in found:
                if passed.get(originator_id, 0) < version:
                    passed[originator_id] = version
                cached = self._items.get(originator_id)
                if cached is not None and cached.version < version:
                    self._stale.add(originator_id)
            if found:
                self.position = found[-1][0]
            if len(found) < LOOK_LIMIT:
                return self.position
        # A long gap: forgetting everything is cheaper than reading all of it.
        self._items.clear()
        self._stale.clear()
        self.position = self._log.max_notification_id() or self.position
        passed.clear()
        self._passed_from = self.position
        return self.position

    def get(
        self, aggregate_id: UUID, fast_forward: Callable[[Any], Any]
    ) -> tuple[Any, bool] | None:
        """A copy of the cached aggregate, fast-forwarded when stale, and whether it was; None
        when it is not cached."""
        with self._lock:
            cached = self._items.get(aggregate_id)
            if cached is None:
                return None
            self._items.move_to_end(aggregate_id)
            stale = aggregate_id in self._stale
        copy = _copy(cached)
        return (fast_forward(copy), True) if stale else (copy, False)

    def peek(self, aggregate_id: UUID) -> Any | None:
        """The cached aggregate itself, not a copy, when it is cached and not stale: for a
        caller that only reads it (and copies it with `get` before changing it)."""
        with self._lock:
            return None if aggregate_id in self._stale else self._items.get(aggregate_id)

    def peek_many(self, aggregate_ids: Sequence[UUID]) -> list[Any | None]:
        """`peek` of each id, in order, under one hold of the lock (a drain's cursors)."""
        with self._lock:
            stale, items = self._stale, self._items
            if not stale:  # one hash of each id, not two (a `UUID`'s is a Python call)
                return [items.get(i) for i in aggregate_ids]
            return [None if i in stale else items.get(i) for i in aggregate_ids]

    def loaded(self, aggregate: Any, seen_at: int) -> None:
        """Keep an aggregate read from the store after the look at `seen_at`."""
        with self._lock:
            if self.position == seen_at:
                self._put(aggregate.id, _copy(aggregate))
            else:
                self._drop(aggregate.id)

    def saved(
        self,
        aggregates: Iterable[Any],
        notification_ids: dict[UUID, int],
        ids: Sequence[int] | None = None,
    ) -> None:
        """Keep the aggregates of a committed save (not copied: the command is over);
        `notification_ids` holds each one's last notification id. One whose save a look has
        already passed is stale unless the looks read every notification after the save and
        none was a newer event of it; a newer copy already kept (a later save whose caller
        was first) stays. When the save's ids follow the position directly, the log up to
        them is this save alone: the position moves past them, noted as a look would note
        them, so the next look does not read them back."""
        saved = list(aggregates)
        with self._lock:
            for aggregate in saved:
                at = notification_ids.get(aggregate.id)
                if at is None or self.position is None:
                    self._drop(aggregate.id)
                    continue
                kept = self._items.get(aggregate.id)
                if kept is not None and kept.version > aggregate.version:
                    continue
                self._put(aggregate.id, aggregate)
                if self.position >= at and not self._read_nothing_newer(aggregate, at):
                    self._stale.add(aggregate.id)
            if (
                self.position is not None
                and ids
                and sorted(ids) == list(range(self.position + 1, self.position + 1 + len(ids)))
            ):
                self.position += len(ids)
                for aggregate in saved:
                    if self._passed.get(aggregate.id, 0) < aggregate.version:
                        self._passed[aggregate.id] = aggregate.version

    def _read_nothing_newer(self, aggregate: Any, at: int) -> bool:
        """Whether the looks read every notification after id `at` (the window of their
        notes began at or before it) and none was an event of `aggregate` newer than its
        version. Versions follow ids, so a newer event of it would have a larger id."""
        start = self._passed_from
        if start is None or start > at:
            return False
        newest: int = aggregate.version
        return self._passed.get(aggregate.id, 0) <= newest

    def forget(self, aggregate_ids: Iterable[UUID]) -> None:
        """Drop aggregates whose fate is unknown (a lost race, an unconfirmed commit)."""
        with self._lock:
            for aggregate_id in aggregate_ids:
                self._drop(aggregate_id)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._stale.clear()
            self._passed.clear()
            self._passed_from = None
            self.position = None

    def __len__(self) -> int:
        return len(self._items)

    def _put(self, aggregate_id: UUID, aggregate: Any) -> None:
        self._items[aggregate_id] = aggregate
        self._items.move_to_end(aggregate_id)
        self._stale.discard(aggregate_id)
        while len(self._items) > self._maxsize:
            evicted, _ = self._items.popitem(last=False)
            self._stale.discard(evicted)

    def _drop(self, aggregate_id: UUID) -> None:
        self._items.pop(aggregate_id, None)
        self._stale.discard(aggregate_id)


def _copy(aggregate: Any) -> Any:
    """The aggregate's own copy (`__deepcopy__`: one level deep for ours), without the
    `copy` module's dispatch; `deepcopy` for anything else."""
    own = getattr(type(aggregate), "__deepcopy__", None)
    return own(aggregate, {}) if own is not None else deepcopy(aggregate)
