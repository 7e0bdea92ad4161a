"""The bounded in-process backlog of signals that could not be recorded because the store
was unreachable, or failed in any other way that was not the caller's input (R-L8,
Beyond): kept in order, flushed in order when the store returns, the oldest dropped when full.
Every keep, flush, skip and drop is counted and logged; `kept` always equals `flushed` +
`skipped` + `dropped` + what is still `buffered` (signals adopted from the spool count as
kept). With a spool (application/spool.py, R-L10) every kept signal is also written to disk
before its producer returns, and forgotten there once it is recorded, skipped or dropped."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from session_awareness.domain.intake import SignalRequest
from session_awareness.domain.keys import SessionRef
from session_awareness.logs import get_logger

if TYPE_CHECKING:
    from pathlib import Path

log = get_logger()


@dataclass(frozen=True, slots=True)
class Delivery:
    """A signal on its way to a session: a bare key is resolved when it is recorded."""

    key: str
    agent_id: str | None
    request: SignalRequest
    spawn: SessionRef | None = None  # the child's ref, for a spawn edge
    #: The first event of each earlier attempt whose commit could not be confirmed: if one is
    #: in the store, the signal was recorded and is not recorded again. Every one is kept,
    #: since an attempt cut off before its commit was sent never lands, while one cut off
    #: after may land late, after later attempts were cut off too.
    unconfirmed: tuple[Any, ...] = ()
    #: Its row in the spool (R-L10); None when it is kept in memory only.
    spooled: int | None = None

    @property
    def kind(self) -> str:
        return self.request.kind.value

    def unconfirmed_too(self, event: Any) -> Delivery:
        """This delivery, also remembering `event` (None: nothing to remember)."""
        if event is None:
            return self
        return replace(self, unconfirmed=(*self.unconfirmed, event))


@dataclass(frozen=True, slots=True)
class Adopted:
    """Spooled signals claimed from services that closed or died, oldest first; `broken`
    ones could not be read back (counted and removed)."""

    items: tuple[Delivery, ...]
    broken: int = 0


class SpoolError(Exception):
    """The spool cannot be written or read (a read-only folder, a full disk, a broken file)."""


class SpoolReleasedError(SpoolError):
    """The spooled signal is no longer this service's (it closed): it must not be recorded
    here, since the next service of the store will."""


class Spool(Protocol):
    """Where kept signals outlive the process (R-L10; application/spool.py). Each method
    raises `SpoolError` when the spool cannot be used."""

    path: Path
    closed: bool

    def add(self, item: Delivery) -> Delivery:
        """Write a kept signal, synced; the item with its row."""

    def attempting(self, row: int, event: Any) -> None:
        """Before an attempt to record a spooled signal saves: remember its first event."""

    def remove(self, row: int) -> None:
        """Forget a spooled signal that is recorded, skipped or dropped."""

    def adopt(self) -> Adopted:
        """Claim the signals services of the store that closed or died left, oldest first."""

    def count(self) -> int:
        """How many signals the spool holds for the store (every service's)."""

    def close(self) -> None:
        """Let this service's rows go to the next service of the store."""


class SignalBacklog:
    def __init__(
        self, capacity: int = 1000, rest_seconds: float = 0.5, spool: Spool | None = None
    ) -> None:
        self.capacity = capacity
        #: Where kept signals outlive the process (R-L10); None: in memory only.
        self.spool = spool
        self.rest_seconds = rest_seconds
        #: Guards the items and the counters; held only for a moment, never across a call
        #: to the store.
        self.lock = threading.RLock()
        #: Held by whoever is recording the kept signals (one at a time, in order).
        self.flushing = threading.Lock()
        #: The kept signals, oldest first (guarded by `lock`; a glance needs no lock).
        self.items: deque[Delivery] = deque()
        self._rest_until = 0.0
        self.kept = self.flushed = self.skipped = self.dropped = 0
        #: Kept signals the spool could not take (in memory only), and those adopted from it.
        self.unspooled = self.adopted = 0

    def __len__(self) -> int:
        return len(self.items)

    def keep(self, item: Delivery) -> None:
        """Keep a signal for later, written to the spool first when there is one (R-L10);
        when full, the oldest kept signal is dropped."""
        oldest: Delivery | None = None
        with self.lock:
            self.kept += 1
            if self.capacity == 0:
                self.drop(item, "backlog full")
                return
            item = self._spooled(item)
            if len(self.items) >= self.capacity:
                oldest = self.items.popleft()
                self.drop(oldest, "backlog full")
            self.items.append(item)
        self._forget(oldest)
        log.warning("signal_backlog_kept", session_key=item.key, kind=item.kind, size=len(self),
                    spooled=item.spooled is not None)  # fmt: skip

    def _spooled(self, item: Delivery) -> Delivery:
        """The item as written to the spool; as it is (kept in memory only, an ERROR naming
        how many are) when the spool cannot take it. Under `lock`: rows keep the order."""
        spool = self.spool
        if spool is None or spool.closed:
            return item
        try:
            return spool.add(item)
        except SpoolError as error:
            self.unspooled += 1
            log.error("signal_spool_failed", session_key=item.key, kind=item.kind,
                      count=self.unspooled, path=str(spool.path), error=str(error))  # fmt: skip
            return item

    def _forget(self, item: Delivery | None) -> None:
        """The signal is recorded, skipped or dropped: its spool row goes too. Should that
        fail, the row's attempts still keep the next service from recording it twice."""
        spool = self.spool
        if item is None or item.spooled is None or spool is None or spool.closed:
            return
        try:
            spool.remove(item.spooled)
        except SpoolError as error:
            log.error("signal_spool_failed", session_key=item.key, kind=item.kind, count=1,
                      path=str(spool.path), error=str(error))  # fmt: skip

    def adopt(self, items: tuple[Delivery, ...]) -> None:
        """Signals another service of the store left in the spool (it closed or died): kept
        here, before the ones this service keeps. Called while holding `flushing`, so the
        first item is not being recorded meanwhile."""
        if not items:
            return
        with self.lock:
            self.items.extendleft(reversed(items))
            self.kept += len(items)
            self.adopted += len(items)
        log.warning("signal_spool_adopted", count=len(items), size=len(self))

    def first(self) -> Delivery | None:
        with self.lock:
            return self.items[0] if self.items else None

    def flushed_first(self, sequence: int | None) -> None:
        """The first kept signal is recorded (or had been: its commit had landed)."""
        with self.lock:
            item = self.items.popleft()
            self.flushed += 1
        self._forget(item)
        log.info("signal_backlog_flushed", session_key=item.key, kind=item.kind, sequence=sequence)

    def skipped_first(self, reason: str) -> None:
        """The first kept signal was delivered and the rules record nothing for it now (a
        session deleted meanwhile, a repeat, no audience): not flushed, not lost to a fault."""
        with self.lock:
            item = self.items.popleft()
            self.skipped += 1
        self._forget(item)
        log.info("signal_backlog_skipped", session_key=item.key, kind=item.kind, reason=reason)

    def replace_first(self, item: Delivery) -> None:
        with self.lock:
            self.items[0] = item

    def drop_first(self, reason: str) -> None:
        with self.lock:
            item = self.items.popleft()
            self.drop(item, reason)
        self._forget(item)

    def drop(self, item: Delivery, reason: str) -> None:
        self.dropped += 1
        log.error("signal_backlog_dropped", session_key=item.key, kind=item.kind, reason=reason)

    def rest(self) -> None:
        """The store just failed an attempt: do not try it again for a moment (new signals are
        kept meanwhile); only a failed attempt rests, never a keep."""
        self._rest_until = time.monotonic() + self.rest_seconds

    def resting(self) -> bool:
        return time.monotonic() < self._rest_until

    def rest_left(self) -> float:
        """Seconds until the store may be tried again (0 when it may be now)."""
        return max(0.0, self._rest_until - time.monotonic())

    def stats(self) -> dict[str, int]:
        with self.lock:
            return {
                "buffered": len(self.items),
                "kept": self.kept,
                "flushed": self.flushed,
                "skipped": self.skipped,
                "dropped": self.dropped,
            }

    def unspooled_now(self) -> int:
        """How many kept signals are in memory only (the spool could not take them)."""
        with self.lock:
            return sum(1 for item in self.items if item.spooled is None)
