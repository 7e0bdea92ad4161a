"""The upstream monitor (R-U2…R-U4, ADR 008): a scan of the watched, idle links at a
fixed cadence, single-flight, over the providers; what it finds is written by the service.

The missing streaks and the schedule live in memory (ADR 008): a restart starts the streaks
over, which only delays an `upstream_missing` by up to three scans.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future
from uuid import UUID

from session_awareness.application.errors import StoreUnavailableError
from session_awareness.application.ports import UpstreamLinkRow
from session_awareness.application.upstream.outcomes import LinkOutcome, LinkWriter
from session_awareness.application.upstream.probing import Answer, ProviderCalls
from session_awareness.application.upstream.provider_ports import (
    OWN_TEXTS,
    OwnUserTexts,
    RunActivity,
    ScheduledCall,
    Scheduler,
    UpstreamActivity,
    UpstreamMissing,
    UpstreamProbe,
    UpstreamProvider,
    normalise_text,
)
from session_awareness.application.upstream.scheduler import ThreadScheduler
from session_awareness.logs import get_logger

log = get_logger()
FIRST_SCAN_DELAY = 15.0
SCAN_INTERVAL = 60.0
PROVIDER_TIMEOUT = 45.0
#: Consecutive scans without the source before `upstream_missing` is recorded (R-U4).
MISSING_SCANS = 3


class UpstreamMonitor:
    """Scans watched, idle links on a schedule; keeps each link's missing streak."""

    def __init__(
        self,
        writer: LinkWriter,
        *,
        providers: Mapping[str, UpstreamProvider] | None = None,
        scheduler: Scheduler | None = None,
        is_run_active: RunActivity | None = None,
        own_user_texts: OwnUserTexts | None = None,
        timeout: float = PROVIDER_TIMEOUT,
    ) -> None:
        self.providers: dict[str, UpstreamProvider] = dict(providers or {})
        self.timeout = timeout
        self._writer, self._scheduler = writer, scheduler
        self._is_run_active, self._own_user_texts = is_run_active, own_user_texts
        self._streaks: dict[UUID, tuple[int, int]] = {}  # session -> (link generation, misses)
        self._calls = ProviderCalls()
        self._state, self._scanning = threading.Lock(), threading.Lock()
        self._handle: ScheduledCall | None = None
        self._running = False
        self._abort: Future[None] = Future()
        self._scan_thread: int | None = None

    # -- the cadence ------------------------------------------------------------------------

    def start(self) -> None:
        """Scan after 15 s, then every 60 s (R-U2); starting twice does nothing."""
        with self._state:
            if self._running:
                return
            self._scheduler = self._scheduler or ThreadScheduler()
            self._running = True
            self._handle = self._scheduler.call_later(FIRST_SCAN_DELAY, self._tick)
        log.info("upstream_monitor_started", providers=sorted(self.providers))

    def stop(self) -> None:
        """No further scans; a scan in flight stops waiting for its providers and writes
        nothing more, and is waited for (so the store can close after this)."""
        with self._state:
            was_running, self._running = self._running, False
            if self._handle is not None:
                self._handle.cancel()
                self._handle = None
            if not self._abort.done():
                self._abort.set_result(None)
        if self._scan_thread != threading.get_ident() and self._scanning.acquire(timeout=30):
            self._scanning.release()
        if was_running:
            log.info("upstream_monitor_stopped")

    def _tick(self) -> None:
        if not self._running:
            return
        try:
            self.scan()
        except Exception as error:  # noqa: BLE001 -- one bad scan never ends the cadence
            log.error("upstream_scan_failed", error=repr(error))
        finally:
            with self._state:
                if self._running and self._scheduler is not None:
                    self._handle = self._scheduler.call_later(SCAN_INTERVAL, self._tick)

    # -- one scan ---------------------------------------------------------------------------

    def scan(self) -> list[LinkOutcome] | None:
        """Scan every watched, idle link once; None when another scan is in flight."""
        if not self._scanning.acquire(blocking=False):
            log.info("upstream_scan_skipped", reason="scan_in_flight")
            return None
        try:
            with self._state:
                self._abort, self._scan_thread = Future(), threading.get_ident()
            return self._scan(self._abort)
        finally:
            self._scan_thread = None
            self._scanning.release()

    def _scan(self, abort: Future[None]) -> list[LinkOutcome]:
        try:
            rows = self._writer.read_model.upstream_links(watched_only=True)
        except StoreUnavailableError as error:
            log.error("upstream_scan_failed", error=str(error))
            return []
        watched = {row.session_id for row in rows}
        for gone in set(self._streaks) - watched:  # left the watched set: streak broken (R-U4)
            del self._streaks[gone]
        outcomes: dict[UUID, LinkOutcome] = {}
        batches: dict[str, list[tuple[UpstreamLinkRow, UpstreamProbe]]] = {}
        for row in rows:
            probe = self._probe(row)
            if isinstance(probe, str):
                outcomes[row.session_id] = self._outcome(row, probe)
            else:
                batches.setdefault(row.link.source.catalog_id, []).append((row, probe))
        answers = self._calls.run(
            {c: (self.providers[c], [probe for _, probe in b]) for c, b in batches.items()},
            timeout=self.timeout,
            abort=abort,
        )
        for catalog_id, batch in batches.items():
            for row, _ in batch:
                answer = Answer(failure="stopped") if abort.done() else answers[catalog_id]
                outcomes[row.session_id] = self._settle(row, answer)
        result = [outcomes[row.session_id] for row in rows]
        counts: dict[str, int] = {}
        for outcome in result:
            counts[outcome.outcome] = counts.get(outcome.outcome, 0) + 1
        log.info("upstream_scanned", links=len(rows), outcomes=counts)
        return result

    def _probe(self, row: UpstreamLinkRow) -> UpstreamProbe | str:
        """The probe for a link, or why it is not probed this time (its streak is kept)."""
        key, agent_id = row.session_key, row.agent_id
        if row.link.source.catalog_id not in self.providers:
            return "no_provider"
        try:
            if self._is_run_active is not None and self._is_run_active(key, agent_id):
                return "deferred"  # an active run defers the check, keeping its place (R-U2)
            texts = self._own_user_texts(key, agent_id) if self._own_user_texts else ()
            own = frozenset(normalise_text(t) for t in list(texts)[-OWN_TEXTS:]) - {""}
        except Exception as error:  # noqa: BLE001 -- a host port's failure defers one link
            log.warning("upstream_host_port_failed", session_key=key, error=repr(error))
            return "deferred"
        source, marker = row.link.source, row.link.marker
        return UpstreamProbe(row.session_id, key, agent_id, source, marker, own)

    def _settle(self, row: UpstreamLinkRow, answer: Answer) -> LinkOutcome:
        if answer.failure is not None:
            return self._outcome(row, answer.failure)
        if self._run_started(row):
            # A run started while the provider read: the outcome waits for the next scan, with
            # nothing written, the marker kept and no miss counted (R-U2).
            return self._outcome(row, "deferred")
        result = answer.results.get(row.session_id)
        if isinstance(result, UpstreamMissing):
            return self._missed(row)
        # The provider answered and did not say missing: the streak is broken (R-U4), even
        # when it found nothing usable for this link (no activity, an unreadable source).
        self._streaks.pop(row.session_id, None)
        if not isinstance(result, UpstreamActivity) or not _valid(result):
            if result is not None:
                log.warning("upstream_result_invalid", session_key=row.session_key)
            return self._outcome(row, "nothing")
        if result.human_turns == 0 and result.marker == row.link.marker:
            return self._outcome(row, "idle")
        written = self._writer.record_upstream_activity(row, result)
        return self._outcome(row, written.status, result.human_turns, written.sequence)

    def _run_started(self, row: UpstreamLinkRow) -> bool:
        """Run activity checked again after the provider returned, before anything is
        written (R-U2); a failing host port defers too, as it does before the read."""
        if self._is_run_active is None:
            return False
        try:
            return bool(self._is_run_active(row.session_key, row.agent_id))
        except Exception as error:  # noqa: BLE001 -- a host port's failure defers one link
            log.warning("upstream_host_port_failed", session_key=row.session_key,
                        error_type=type(error).__name__)  # fmt: skip
            return True

    def _missed(self, row: UpstreamLinkRow) -> LinkOutcome:
        generation, misses = self._streaks.get(row.session_id, (row.link.generation, 0))
        if generation != row.link.generation:
            misses = 0  # a refreshed link starts a new streak (R-U4)
        misses += 1
        self._streaks[row.session_id] = (row.link.generation, misses)
        if misses < MISSING_SCANS:
            log.info("upstream_missing_seen", session_key=row.session_key, streak=misses)
            return self._outcome(row, "missing", streak=misses)
        written = self._writer.record_upstream_missing(row)
        if written.status in ("recorded", "skipped", "changed"):
            del self._streaks[row.session_id]
        outcome = (
            "missing_recorded" if written.status in ("recorded", "skipped") else written.status
        )
        return self._outcome(row, outcome, sequence=written.sequence, streak=misses)

    def _outcome(
        self,
        row: UpstreamLinkRow,
        outcome: str,
        turns: int = 0,
        sequence: int | None = None,
        *,
        streak: int | None = None,
    ) -> LinkOutcome:
        if streak is None:
            streak = self._streaks.get(row.session_id, (0, 0))[1]
        catalog_id = row.link.source.catalog_id
        return LinkOutcome(
            row.session_key, row.agent_id, catalog_id, outcome, turns, sequence, streak
        )


def _valid(activity: UpstreamActivity) -> bool:
    turns = activity.human_turns
    return isinstance(turns, int) and not isinstance(turns, bool) and turns >= 0
