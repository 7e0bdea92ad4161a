"""One reading of a process's `Metrics` (application/process_metrics.py, R-O2): the counters,
the record-latency histogram and the gauges as they stood when `metrics.figures()` was called.
Kept apart from the counting: a process that only records (a hook run, a process start per
event, issue 39) counts, and never reads its figures."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Latencies:
    """A histogram's figures: `counts[i]` observations at most `bounds[i]` (not cumulative;
    the last, beyond every bound), their sum in seconds and their number."""

    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    sum: float

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations at most it), the last bound `inf`: Prometheus's form."""
        total, out = 0, []
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            total += count
            out.append((bound, total))
        return out


@dataclass(frozen=True)
class Figures:
    """One reading of `Metrics`: the counters, and the gauges (None: could not be read)."""

    signals_recorded: dict[str, int]
    notices_opened: int
    notices_drained: int
    store_errors: int
    record_seconds: Latencies
    gauges: dict[str, int | None] = field(default_factory=dict)
