"""The recording process's metrics in Prometheus's form (R-O2), and the metric families the
console's `/metrics` shares with it: one name for one figure, wherever it is served.

A host that records serves its own counters (`svc.metrics`, counted where things happen)
from its own endpoint:

    registry.register(ServiceCollector(svc))

`session_awareness_signals_recorded_total{kind}`, `session_awareness_notices_opened_total`,
`session_awareness_notices_drained_total` and `session_awareness_store_errors_total` count
from zero when the service opens; `session_awareness_record_seconds` is the histogram of
the producers' calls; `session_awareness_pending_notices` (read from the read model on each
scrape), `session_awareness_kept_signals` and `session_awareness_spooled_signals` are
gauges. Importing this module needs only `prometheus-client`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from session_awareness.application import SessionAwareness
from session_awareness.application.figures import Latencies
from session_awareness.domain.signals import SignalKind

PREFIX = "session_awareness_"
#: Every signal kind a store can hold (R-L1): each is exported, 0 until one is recorded.
KINDS = tuple(sorted(kind.value for kind in SignalKind))


def signals_recorded(counts: Mapping[str, int], text: str) -> CounterMetricFamily:
    family = CounterMetricFamily(PREFIX + "signals_recorded", text, labels=["kind"])
    for kind in sorted({*KINDS, *counts}):
        family.add_metric([kind], counts.get(kind, 0))
    return family


def counter(name: str, text: str, value: float) -> CounterMetricFamily:
    family = CounterMetricFamily(PREFIX + name, text)
    family.add_metric([], value)
    return family


def gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, text, value=value)


def record_seconds(latencies: Latencies, text: str) -> HistogramMetricFamily:
    buckets = [
        ("+Inf" if bound == float("inf") else repr(bound), count)
        for bound, count in latencies.cumulative()
    ]
    return HistogramMetricFamily(
        PREFIX + "record_seconds", text, buckets=buckets, sum_value=latencies.sum
    )


#: What each gauge of `svc.metrics` says, by its name there.
GAUGES = {
    "pending_notices": "Cursors with a pending notice (read from the store on each scrape).",
    "kept_signals": "Signals this process keeps for an unreachable store (R-L8).",
    "spooled_signals": "Signals the store's spool on this host holds, every process's (R-L10).",
}


class ServiceCollector(Collector):
    """The figures `svc.metrics` counted in this process, on each scrape."""

    def __init__(self, svc: SessionAwareness) -> None:
        self.svc = svc

    def collect(self) -> Iterator[Metric]:
        figures = self.svc.metrics.figures()
        yield signals_recorded(figures.signals_recorded, "Signals this process recorded, by kind.")
        yield counter("notices_opened", "Notices this process opened (a drain's reopened "
                      "ones too).", figures.notices_opened)  # fmt: skip
        yield counter("notices_drained", "Notices this process's drains acknowledged.",
                      figures.notices_drained)  # fmt: skip
        yield counter("store_errors", "Reads and commands of this process the store could "
                      "not answer.", figures.store_errors)  # fmt: skip
        yield record_seconds(
            figures.record_seconds, "How long this process's producer calls took (seconds)."
        )
        for name, text in GAUGES.items():
            value = figures.gauges.get(name)
            if value is not None:  # unreadable now, or no spool: left out, not a false 0
                yield gauge(name, text, value)
