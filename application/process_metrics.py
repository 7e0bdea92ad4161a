"""What this process did, counted where it happens (R-O2): signals recorded by kind, notices
opened and drained, failed store calls, and how long each producer call took; with gauges
read when asked (signals kept and spooled, pending notices).

`svc.metrics` is a `Metrics`; it needs no library: a host exports it however it likes, or
through Prometheus with `ServiceCollector` (the console extra,
`session_awareness.infrastructure.console.host_metrics`). The counters only grow, from zero
when the service opens; the console, a process of its own, shows the store's figures under
the same names instead (docs/console.md).

Counting costs a lock and an addition: nothing is read from the store to count, and a count
is only made once the save that did it has committed.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from session_awareness.application.errors import StoreUnavailableError
from session_awareness.application.unit_of_work import CLOSED

if TYPE_CHECKING:
    from session_awareness.application.backlog import SignalBacklog
    from session_awareness.application.figures import Figures, Latencies
    from session_awareness.application.ports import ReadModel

#: The record-latency histogram's upper bounds, in seconds (a last, unbounded one follows).
RECORD_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
#: The attribute that marks a failure as counted: it is counted once however many layers
#: it passes (a read inside a command, then the command).
_COUNTED = "_session_awareness_counted"


class Metrics:
    """This process's counters and its record-latency histogram; `timer` is monotonic, in
    seconds (the producers read it, never the domain)."""

    def __init__(self, timer: Callable[[], float] = time.perf_counter) -> None:
        self.timer = timer
        self._lock = threading.Lock()
        self._signals: Counter[str] = Counter()
        self._opened = self._drained = self._errors = 0
        self._buckets = [0] * (len(RECORD_BUCKETS) + 1)
        self._seconds = 0.0
        self._gauges: dict[str, Callable[[], int | None]] = {}

    # -- counting, where it happens ---------------------------------------------------------

    def signal_recorded(self, kind: str) -> None:
        """A signal of `kind` was recorded (its save committed)."""
        with self._lock:
            self._signals[kind] += 1

    def notices_opened(self, count: int = 1) -> None:
        """Notices opened (on a synced cursor, or afresh by a drain, R-N2, R-N3)."""
        with self._lock:
            self._opened += count

    def notices_drained(self, count: int, reopened: int = 0) -> None:
        """A drain acknowledged `count` notices and reopened `reopened` of them (R-N3)."""
        with self._lock:
            self._drained += count
            self._opened += reopened

    def record_took(self, seconds: float) -> None:
        """A producer call took `seconds`, from its call to its answer."""
        index = bisect_left(RECORD_BUCKETS, seconds)
        with self._lock:
            self._buckets[index] += 1
            self._seconds += seconds

    def store_failed(self, error: BaseException) -> None:
        """The store could not answer a read or a command; a failure passing several layers
        is counted once. A closed service's refusals are not the store's failures."""
        if getattr(error, _COUNTED, False):
            return
        if isinstance(error, StoreUnavailableError) and error.reason == CLOSED:
            return
        with suppress(AttributeError):  # an error without attributes: counted each time
            setattr(error, _COUNTED, True)
        with self._lock:
            self._errors += 1

    # -- gauges, read when asked ------------------------------------------------------------

    def gauge(self, name: str, read: Callable[[], int | None]) -> None:
        """A figure read when the metrics are (`read` may raise: the gauge is then None)."""
        self._gauges[name] = read

    def figures(self, *, gauges: bool = True) -> Figures:
        """The counters as they stand, and (unless told not to) every gauge read now."""
        from session_awareness.application.figures import Figures, Latencies  # noqa: PLC0415 -- read, never counted

        read_now: dict[str, int | None] = {}
        for name, read in self._gauges.items() if gauges else ():
            try:
                value = read()
            except Exception:  # noqa: BLE001 -- unreadable now (a store read counts itself)
                read_now[name] = None
            else:
                read_now[name] = value
        with self._lock:
            return Figures(
                signals_recorded=dict(self._signals),
                notices_opened=self._opened,
                notices_drained=self._drained,
                store_errors=self._errors,
                record_seconds=Latencies(RECORD_BUCKETS, tuple(self._buckets), self._seconds),
                gauges=read_now,
            )


def watch_gauges(metrics: Metrics, backlog: SignalBacklog, read_model: ReadModel) -> None:
    """The service's gauges: signals kept for an unreachable store (R-L8), signals the
    store's spool on this host holds (R-L10; None without a spool) and pending notices."""

    def spooled() -> int | None:
        return None if backlog.spool is None else backlog.spool.count()

    def pending() -> int:
        return sum(
            len(read_model.cursors_of_watcher(watcher, pending_only=True))
            for watcher in read_model.watchers_with_pending()
        )

    metrics.gauge("kept_signals", lambda: len(backlog))
    metrics.gauge("spooled_signals", spooled)
    metrics.gauge("pending_notices", pending)


def __getattr__(name: str) -> Any:
    """`Figures` and `Latencies` by the names they were imported by before they moved to
    application/figures.py, loaded then (a process that only counts never reads them)."""
    if name not in ("Figures", "Latencies"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from session_awareness.application import figures  # noqa: PLC0415

    return getattr(figures, name)


#: `Figures` and `Latencies` are still exported by their old names (`__getattr__`).
__all__ = ["RECORD_BUCKETS", "Figures", "Latencies", "Metrics", "watch_gauges"]
