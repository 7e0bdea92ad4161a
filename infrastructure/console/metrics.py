"""`/metrics`: the store's figures in Prometheus text format, read on each scrape (R-O1).

The console is a process of its own, so it cannot count what another process does as it
does it. Everything it exports is therefore read from the store when Prometheus scrapes:

- counters tallied from the event store, which is never pruned (R-R2), so they only grow:
  `session_awareness_signals_recorded_total{kind}` (signal events by kind),
  `session_awareness_notices_opened_total` (notices opened: on a synced cursor, and afresh
  by a drain that found newer material, R-N2/R-N3) and
  `session_awareness_notices_drained_total` (cursor acknowledgements, R-N3). The tally reads
  only the events added since the previous scrape (the first scrape reads the whole log);
- gauges read from the read models: `session_awareness_pending_notices`,
  `session_awareness_cursors`, `session_awareness_watchers_pending`,
  `session_awareness_retention_removable_rows` (what a prune would remove now) and
  `session_awareness_event_store_head` (the newest notification id);
- this process's own, under the names a recording host serves them by
  (`host_metrics.ServiceCollector`, R-O2): `session_awareness_store_errors_total` (the
  console's store reads that failed, pages and scrapes), `session_awareness_kept_signals`
  and `session_awareness_record_seconds` (the console records nothing: 0 and empty); and
  `session_awareness_store_up` (the last scrape could read the store).

The store's figures suit a console beside many hosts. A host exports its own counters with
`ServiceCollector`; one that would rather export the store's registers
`StoreCollector(svc)` instead (not both: the names are the same).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from session_awareness.application import SessionAwareness
from session_awareness.domain.drains import Drains, acknowledgements, notice_open
from session_awareness.domain.session import Session
from session_awareness.domain.watch import Watch
from session_awareness.infrastructure.console.host_metrics import (
    counter,
    record_seconds,
    signals_recorded,
)
from session_awareness.infrastructure.console.views import store_head
from session_awareness.logs import get_logger

log = get_logger()

#: Notifications read from the event store per query while tallying.
TALLY_PAGE = 1000


def _signal_classes() -> dict[str, str]:
    """Each stored signal event's topic and the kind it records (R-L1)."""
    return {
        cls.TOPIC: str(cls.KIND.value)
        for cls in vars(Session).values()
        if isinstance(cls, type) and issubclass(cls, Session.Signal) and "KIND" in vars(cls)
    }


class EventTally:
    """Counts of signal, notice and drain events in the event store, brought up to date on
    each call by reading only the notifications after the last one counted."""

    def __init__(self) -> None:
        self.signals: Counter[str] = Counter()
        self.opened = 0
        self.drained = 0
        self.position = 0
        self._kinds = _signal_classes()
        self._topics = [
            *self._kinds, Watch.NoticeOpened.TOPIC, Watch.Acknowledged.TOPIC,
            Drains.Started.TOPIC, Drains.Drained.TOPIC,
        ]  # fmt: skip
        self._lock = threading.Lock()

    def update(self, svc: SessionAwareness) -> None:
        with self._lock:
            recorder = svc.store.recorder
            while True:
                page = recorder.select_notifications(
                    self.position + 1, TALLY_PAGE, topics=self._topics
                )
                for notification in page:
                    self._count(svc, notification)
                if not page:
                    return
                self.position = page[-1].id

    def _count(self, svc: SessionAwareness, notification: Any) -> None:
        kind = self._kinds.get(notification.topic)
        if kind is not None:
            self.signals[kind] += 1
        elif notification.topic == Watch.NoticeOpened.TOPIC:
            self.opened += 1
        else:
            event = svc.store.mapper.to_domain_event(notification)
            if isinstance(event, Watch.Acknowledged):
                drained = [(event.acknowledged, event.notified)]
            elif isinstance(event, Drains.Started | Drains.Drained):
                drained = [(a.acknowledged, a.notified) for a in acknowledgements(event)]
            else:  # the topics asked for are only these
                return
            self.drained += len(drained)
            self.opened += sum(notice_open(*positions) for positions in drained)


class StoreCollector(Collector):
    """The console's metrics, computed from the store on every scrape."""

    def __init__(self, svc: SessionAwareness) -> None:
        self.svc = svc
        self.tally = EventTally()

    def collect(self) -> Iterator[Metric]:
        try:
            yield from self._from_store()
            up = 1
        except Exception as error:  # noqa: BLE001 -- a scrape reports the store down, never a 500
            self.svc.metrics.store_failed(error)
            log.warning("console_metrics_store_error", error=str(error))
            up = 0
        yield _gauge("session_awareness_store_up", "Whether the last scrape read the store.", up)
        own = self.svc.metrics.figures(gauges=False)  # this process's, counted as they happen
        yield counter("store_errors", "Store reads of this console that failed.",
                      own.store_errors)  # fmt: skip
        yield _gauge(
            "session_awareness_kept_signals",
            "Signals this process keeps for an unreachable store (R-L8).",
            self.svc.kept_signals,
        )
        yield record_seconds(own.record_seconds, "Producer calls of this process (the "
                             "console records nothing: always empty).")  # fmt: skip

    def _from_store(self) -> Iterable[Metric]:
        svc = self.svc
        self.tally.update(svc)
        live, pending = svc.read_model.cursor_counts()
        metrics: list[Metric] = []
        metrics.append(signals_recorded(
            self.tally.signals, "Signals recorded, by kind (from the event store)."
        ))  # fmt: skip
        for name, text, value in (
            ("notices_opened", "Notices opened (from the event store).", self.tally.opened),
            ("notices_drained", "Cursor acknowledgements (from the event store).",
             self.tally.drained),
        ):  # fmt: skip
            metrics.append(counter(name, text, value))
        preview = svc.prune_preview()
        metrics += [
            _gauge("session_awareness_pending_notices", "Cursors with a pending notice.",
                   pending),
            _gauge("session_awareness_cursors", "Live cursors.", live),
            _gauge("session_awareness_watchers_pending", "Watchers with a pending notice.",
                   svc.read_model.watchers_pending_count()),
            _gauge("session_awareness_retention_removable_rows",
                   "changesSince rows a prune would remove now (R-R1).", preview["removedRows"]),
            _gauge("session_awareness_event_store_head", "The newest notification id.",
                   store_head(svc)),
        ]  # fmt: skip
        return metrics


def _gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, text, value=value)


def registry_for(svc: SessionAwareness) -> CollectorRegistry:
    """A registry of the console's own, holding the store collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(svc))
    return registry
