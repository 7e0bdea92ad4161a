"""What every scenario shares: rounds interleaved with their baseline, medians, and results.

A scenario measures `ours` and `baseline` alternately, round after round, after a warm-up,
so that a noisy neighbour slows both sides of a round alike. Each round yields one ratio;
a figure is the median of those ratios (and of each side's per-round values).
"""

from __future__ import annotations

import logging
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import structlog

#: "higher": a throughput, the ratio is ours / baseline. "lower": a time, ours / baseline too,
#: but smaller is better. The target compares the ratio, or `ours` itself when `absolute`.
Better = Literal["higher", "lower"]


def quiet_logs() -> None:
    """The host decides what to log; the benchmark keeps warnings and errors only, so a
    record's cost is not a console write (a host logging `info` pays that on top). They go
    to stderr: a benchmark's stdout is its figures (`bench.scale` prints JSON there)."""
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


def clock() -> float:
    return time.perf_counter()


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


@dataclass
class Rounds:
    """Per-round values of both sides (seconds per operation, or operations per second)."""

    ours: list[float] = field(default_factory=list)
    baseline: list[float] = field(default_factory=list)

    def ratios(self) -> list[float]:
        return [o / b for o, b in zip(self.ours, self.baseline, strict=True)]


def record_seconds(svc: Any, key: str, count: int) -> float:
    """Mean seconds per `record_human_direct_message` on `key`, over `count` records in a
    row (each its own transaction); a record that is not recorded stops the run."""
    started = clock()
    for _ in range(count):
        if svc.record_human_direct_message(key, channel="bench") is None:
            raise RuntimeError("the record was not recorded")
    return (clock() - started) / count


def interleave(
    ours: Callable[[], float],
    baseline: Callable[[], float],
    *,
    rounds: int,
    warmup: int = 1,
) -> Rounds:
    """Run `warmup` unrecorded rounds, then `rounds` recorded ones; each side returns its
    round's value. Which side goes first alternates, so neither always runs on a cold cache."""
    for _ in range(warmup):
        ours()
        baseline()
    out = Rounds()
    for number in range(rounds):
        if number % 2 == 0:
            out.ours.append(ours())
            out.baseline.append(baseline())
        else:
            out.baseline.append(baseline())
            out.ours.append(ours())
    return out


def median(values: list[float]) -> float:
    return statistics.median(values)


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (`fraction` in 0..1)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(fraction * len(ordered) + 0.5)))
    return ordered[rank - 1]


@dataclass
class Result:
    """One row of the results table."""

    scenario: str
    backend: str
    metric: str
    ours: float
    baseline: float | None
    unit: str
    ratio: float | None
    target: str  # e.g. "ratio >= 0.5", "p99 < 5 ms"
    passed: bool
    details: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def ratio_result(
    scenario: str,
    backend: str,
    metric: str,
    rounds: Rounds,
    *,
    unit: str,
    better: Better,
    target: float,
    scale: float = 1.0,
    details: dict[str, Any] | None = None,
) -> Result:
    """A result whose target is on the median of the per-round ratios ours / baseline.
    `scale` converts the stored values to `unit` for display (e.g. 1e6 for µs)."""
    ratio = median(rounds.ratios())
    passed = ratio >= target if better == "higher" else ratio <= target
    op = ">=" if better == "higher" else "<="
    return Result(
        scenario,
        backend,
        metric,
        median(rounds.ours) * scale,
        median(rounds.baseline) * scale,
        unit,
        ratio,
        f"ratio {op} {target:g}",
        passed,
        {
            "rounds": len(rounds.ours),
            "ratios": [round(r, 4) for r in rounds.ratios()],
            "ours_rounds": [v * scale for v in rounds.ours],
            "baseline_rounds": [v * scale for v in rounds.baseline],
            **(details or {}),
        },
    )


def absolute_result(
    scenario: str,
    backend: str,
    metric: str,
    ours: float,
    *,
    unit: str,
    limit: float,
    baseline: float | None = None,
    details: dict[str, Any] | None = None,
) -> Result:
    """A result whose target is an absolute ceiling on our value (e.g. p99 < 5 ms)."""
    return Result(
        scenario,
        backend,
        metric,
        ours,
        baseline,
        unit,
        None if not baseline else ours / baseline,
        f"< {limit:g} {unit}",
        ours < limit,
        details or {},
    )


def info_result(
    scenario: str, backend: str, metric: str, ours: float, *, unit: str,
    baseline: float | None = None, details: dict[str, Any] | None = None,
) -> Result:  # fmt: skip
    """A figure shown for context, with no target."""
    ratio = None if not baseline else ours / baseline
    return Result(scenario, backend, metric, ours, baseline, unit, ratio, "info", True,
                  details or {})  # fmt: skip
