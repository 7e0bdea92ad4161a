"""The bounded in-process backlog of signals that could not be recorded because the store
was unreachable, or failed in any other way that was not the caller's input (SPEC R-L8,
Beyond): kept in order, flushed in order when the store returns, the oldest dropped when full.
Every keep, flush, skip and drop is counted and logged; `kept` always equals `flushed` +
`skipped` + `dropped` + what is still `buffered`."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Any

from session_awareness.domain.intake import SignalRequest
from session_awareness.domain.keys import SessionRef
from session_awareness.logs import get_logger

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

    @property
    def kind(self) -> str:
        return self.request.kind.value

    def unconfirmed_too(self, event: Any) -> Delivery:
        """This delivery, also remembering `event` (None: nothing to remember)."""
        if event is None:
            return self
        return replace(self, unconfirmed=(*self.unconfirmed, event))


class SignalBacklog:
    def __init__(self, capacity: int = 1000, rest_seconds: float = 0.5) -> None:
        self.capacity = capacity
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

    def __len__(self) -> int:
        return len(self.items)

    def keep(self, item: Delivery) -> None:
        """Keep a signal for later; when full, the oldest kept signal is dropped."""
        with self.lock:
            self.kept += 1
            if self.capacity == 0:
                self.drop(item, "backlog full")
                return
            if len(self.items) >= self.capacity:
                self.drop(self.items.popleft(), "backlog full")
            self.items.append(item)
        log.warning("signal_backlog_kept", session_key=item.key, kind=item.kind, size=len(self))

    def first(self) -> Delivery | None:
        with self.lock:
            return self.items[0] if self.items else None

    def flushed_first(self, sequence: int | None) -> None:
        """The first kept signal is recorded (or had been: its commit had landed)."""
        with self.lock:
            item = self.items.popleft()
            self.flushed += 1
        log.info("signal_backlog_flushed", session_key=item.key, kind=item.kind, sequence=sequence)

    def skipped_first(self, reason: str) -> None:
        """The first kept signal was delivered and the rules record nothing for it now (a
        session deleted meanwhile, a repeat, no audience): not flushed, not lost to a fault."""
        with self.lock:
            item = self.items.popleft()
            self.skipped += 1
        log.info("signal_backlog_skipped", session_key=item.key, kind=item.kind, reason=reason)

    def replace_first(self, item: Delivery) -> None:
        with self.lock:
            self.items[0] = item

    def drop_first(self, reason: str) -> None:
        with self.lock:
            self.drop(self.items.popleft(), reason)

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
