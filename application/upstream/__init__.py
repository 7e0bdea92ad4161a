"""Upstream monitoring of adopted sessions (R-U1–R-U5, ADR 008).

Adoption writes the session's upstream link with the `adopted` event (R-U1, R-L5); the
monitor scans watched, idle links and the service writes what it finds, re-checking on fresh
state that the link is the one the scan read before anything is written (R-U3, R-U4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from session_awareness.application.errors import (
    AmbiguousSessionError,
    ConfigurationError,
    UnknownSessionError,
)
from session_awareness.application.ports import UpstreamLinkRow
from session_awareness.application.store import log
from session_awareness.application.unit_of_work import UnitOfWork
from session_awareness.application.upstream import turns as upstream_signals
from session_awareness.application.upstream.link_writes import UpstreamWrites
from session_awareness.application.upstream.monitor import PROVIDER_TIMEOUT, UpstreamMonitor
from session_awareness.application.upstream.outcomes import LinkOutcome, Written
from session_awareness.application.upstream.provider_ports import (
    OwnUserTexts,
    RunActivity,
    Scheduler,
    UpstreamProvider,
)
from session_awareness.domain.upstream import UpstreamSource, check_marker


class Upstream(UpstreamWrites):
    """Adoption, upstream links and the monitor that scans them."""

    _upstream_monitor: UpstreamMonitor | None = None

    def configure_upstream(
        self,
        *,
        providers: Mapping[str, UpstreamProvider] | None = None,
        is_run_active: RunActivity | None = None,
        own_user_texts: OwnUserTexts | None = None,
        scheduler: Scheduler | None = None,
        timeout: float = PROVIDER_TIMEOUT,
    ) -> UpstreamMonitor:
        """Set up the monitor: providers by catalog id, the host's ports, the scheduler (a
        thread timer by default) and the per-provider timeout in seconds (R-U2)."""
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigurationError(f"upstream_timeout must be a positive number, got {timeout!r}")
        if self._upstream_monitor is not None:
            self._upstream_monitor.stop()
        self._upstream_monitor = UpstreamMonitor(
            self,
            providers=providers,
            scheduler=scheduler,
            is_run_active=is_run_active,
            own_user_texts=own_user_texts,
            timeout=float(timeout),
        )
        return self._upstream_monitor

    @property
    def upstream_monitor(self) -> UpstreamMonitor:
        if self._upstream_monitor is None:
            self._upstream_monitor = UpstreamMonitor(self)
        return self._upstream_monitor

    def start_upstream_monitor(self) -> None:
        """For hosts: scan after 15 s, then every 60 s, until stopped or closed (R-U2)."""
        self.upstream_monitor.start()

    def stop_upstream_monitor(self) -> None:
        if self._upstream_monitor is not None:
            self._upstream_monitor.stop()

    def scan_upstream_once(self) -> list[LinkOutcome] | None:
        """One scan now (tests, the CLI); None when a scan is already in flight."""
        return self.upstream_monitor.scan()

    # -- adoption (R-U1, R-L5) ----------------------------------------------------------------

    def record_adopted(
        self,
        key: str,
        *,
        catalog_id: str,
        host_id: str,
        thread_id: str,
        upstream_kind: str,
        upstream_ref: str,
        agent_id: str | None = None,
        marker: str | None = None,
    ) -> int | None:
        """Write the upstream link and record `adopted` (once per session) in one save.
        Adopting the same source again keeps its marker; a changed source starts from
        `marker` (None: the provider's first scan sets the baseline). Never raises (R-L8):
        returns the `adopted` sequence, or None when nothing new was recorded."""
        try:
            source = UpstreamSource(catalog_id, host_id, thread_id, upstream_kind, upstream_ref)
            check_marker(marker)
            request = upstream_signals.adopted(source.catalog_id, self.store.clock())
            ref = self.store.resolve(key, agent_id)
        except (UnknownSessionError, AmbiguousSessionError) as error:
            log.info("signal_skipped", session_key=key, kind="adopted", reason=str(error))
            return None
        except ValueError as error:
            log.warning("signal_rejected", session_key=key, kind="adopted", reason=str(error))
            return None

        def attempt(uow: UnitOfWork) -> int | None:
            session, now = uow.live(ref), self.store.clock()
            if session is None:
                raise UnknownSessionError(key)
            sequence = self.intake.record_once(uow, ref, request, now)
            session.link_upstream(source, marker=marker, at=now)
            generation = session.link_generation
            uow.after_commit(lambda: log.info(
                "upstream_linked", session_key=ref.key, agent_id=ref.agent_id,
                catalog_id=source.catalog_id, generation=generation,
            ))  # fmt: skip
            return sequence

        return self._best_effort(ref, "adopted", attempt, failed=None, changed=None)

    def upstream_link(self, key: str, *, agent_id: str | None = None) -> dict[str, Any] | None:
        """The session's upstream link as JSON, or None when it has none."""
        row = self.store.read_model.upstream_link(self.store.resolve(key, agent_id).session_id)
        return None if row is None else link_json(row)


def link_json(row: UpstreamLinkRow) -> dict[str, Any]:
    source = row.link.source
    return {
        "sessionKey": row.session_key,
        "agentId": row.agent_id,
        "catalogId": source.catalog_id,
        "hostId": source.host_id,
        "threadId": source.thread_id,
        "upstreamKind": source.upstream_kind,
        "upstreamRef": source.upstream_ref,
        "marker": row.link.marker,
        "lastPosition": row.link.position,
        "generation": row.link.generation,
        "updatedAt": row.updated_at,
    }


__all__ = ["LinkOutcome", "Upstream", "UpstreamMonitor", "Written", "link_json"]
