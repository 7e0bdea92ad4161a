"""The service's writes of what the monitor found (R-U3, R-U4): each re-checks, on fresh
state after the provider's I/O, that the session still holds the link the scan read, and
writes the signal and the link change in one save, or nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from session_awareness.application.errors import StoreUnavailableError, UnknownSessionError
from session_awareness.application.ports import ReadModel, UpstreamLinkRow
from session_awareness.application.recording import Intake
from session_awareness.application.store import SessionStore, log
from session_awareness.application.unit_of_work import UnitOfWork
from session_awareness.application.upstream import turns as upstream_signals
from session_awareness.application.upstream.outcomes import Written
from session_awareness.application.upstream.provider_ports import UpstreamActivity
from session_awareness.domain.keys import SessionRef
from session_awareness.domain.session import Session
from session_awareness.domain.upstream import UpstreamChangedError

R = TypeVar("R")
FAILED, CHANGED = Written("failed"), Written("changed")


class UpstreamWrites:
    """Records upstream activity and disappearance, best-effort (R-L8), through the intake's
    own record step, so each write records its signal as a producer would."""

    def __init__(self, store: SessionStore, intake: Intake) -> None:
        self.store, self.intake = store, intake

    @property
    def read_model(self) -> ReadModel:
        return self.store.read_model

    def record_upstream_activity(self, row: UpstreamLinkRow, activity: UpstreamActivity) -> Written:
        """One `human_direct_message` for the new turns, and the marker advanced, in one save;
        zero turns only advance the marker. Nothing is written over a changed link."""
        ref, now = SessionRef(row.agent_id, row.session_key), self.store.clock()
        try:
            request = (
                upstream_signals.activity(row.link, activity, now) if activity.human_turns else None
            )
        except ValueError as error:
            log.warning("upstream_result_invalid", session_key=row.session_key, reason=str(error))
            return Written("rejected")

        def attempt(uow: UnitOfWork) -> Written:
            session = self._linked(uow, ref, row)
            sequence = None if request is None else self.intake.record_once(uow, ref, request, now)
            session.advance_upstream(
                row.link, marker=activity.marker, position=activity.position, at=now
            )
            if request is None:
                return Written("advanced")
            if sequence is not None:
                uow.after_commit(lambda: log.info(
                    "upstream_activity_recorded", session_key=ref.key, agent_id=ref.agent_id,
                    turns=activity.human_turns, sequence=sequence,
                ))  # fmt: skip
            return Written("recorded" if sequence is not None else "skipped", sequence)

        return self._best_effort(
            ref, "human_direct_message", attempt, failed=FAILED, changed=CHANGED
        )

    def record_upstream_missing(self, row: UpstreamLinkRow) -> Written:
        """One `upstream_missing` for the watchers, and the link removed, in one save."""
        ref, now = SessionRef(row.agent_id, row.session_key), self.store.clock()
        request = upstream_signals.missing(row.link, now)

        def attempt(uow: UnitOfWork) -> Written:
            session = self._linked(uow, ref, row)
            sequence = self.intake.record_once(uow, ref, request, now)
            session.unlink_upstream(row.link, reason="missing", at=now)
            uow.after_commit(lambda: log.info(
                "upstream_missing_recorded", session_key=ref.key, agent_id=ref.agent_id,
                catalog_id=row.link.source.catalog_id, sequence=sequence,
            ))  # fmt: skip
            return Written("recorded" if sequence is not None else "skipped", sequence)

        return self._best_effort(ref, "upstream_missing", attempt, failed=FAILED, changed=CHANGED)

    def _linked(self, uow: UnitOfWork, ref: SessionRef, row: UpstreamLinkRow) -> Session:
        """The live session, still holding the link the scan read (re-checked after I/O)."""
        session = uow.live(ref)
        if session is None:
            raise UpstreamChangedError(f"{ref.key!r} is gone")
        session.check_upstream(row.link)
        return session

    def _best_effort(
        self,
        ref: SessionRef,
        kind: str,
        attempt: Callable[[UnitOfWork], R],
        *,
        failed: R,
        changed: R,
    ) -> R:
        """Run a write; log and return `failed` instead of raising (R-L8), or `changed` when
        the link or the session is not the one the scan read."""
        try:
            return self.store.run(attempt)
        except UpstreamChangedError as error:
            log.info("upstream_link_changed", session_key=ref.key, kind=kind, reason=str(error))
            return changed
        except UnknownSessionError as error:
            log.info("signal_skipped", session_key=ref.key, kind=kind, reason=str(error))
        except StoreUnavailableError as error:
            log.error("signal_record_failed", session_key=ref.key, kind=kind, error=str(error))
        except ValueError as error:
            log.warning("signal_rejected", session_key=ref.key, kind=kind, reason=str(error))
        except Exception as error:  # noqa: BLE001 -- best-effort recording (R-L8)
            log.error("signal_record_failed", session_key=ref.key, kind=kind, error=repr(error))
        return failed
