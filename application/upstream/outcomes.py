"""What a scan reports per link, and what the monitor needs of the service (R-U1–R-U5).

Outcomes of a link in one scan: `recorded` (human turns became one event), `advanced` (only
the marker moved), `idle` (nothing new), `skipped` (no audience, or a position already
recorded), `missing` (a miss, not yet the third), `missing_recorded`, `deferred` (an active
run or a failing host port), `no_provider`, `nothing` (the provider knew nothing this time),
`failed`, `timed_out`, `busy` (its provider still runs from an earlier scan), `stopped`,
`changed` (the link or session changed during the scan: nothing written) and `rejected`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from session_awareness.application.ports import ReadModel, UpstreamLinkRow
from session_awareness.application.upstream.provider_ports import UpstreamActivity


@dataclass(frozen=True, slots=True)
class Written:
    """What the service wrote for a link: `recorded`, `advanced`, `skipped` (R-L6 or a
    duplicate position), `changed` (the link moved meanwhile), `rejected` or `failed`."""

    status: str
    sequence: int | None = None


@dataclass(frozen=True, slots=True)
class LinkOutcome:
    """What one scan did with one watched link."""

    session_key: str
    agent_id: str
    catalog_id: str
    outcome: str
    turns: int = 0
    sequence: int | None = None
    missing_streak: int = 0

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sessionKey": self.session_key,
            "agentId": self.agent_id,
            "catalogId": self.catalog_id,
            "outcome": self.outcome,
        }
        if self.turns:
            out["turns"] = self.turns
        if self.sequence is not None:
            out["sequence"] = self.sequence
        if self.missing_streak:
            out["missingStreak"] = self.missing_streak
        return out


class LinkWriter(Protocol):
    """The service, as the monitor sees it: the links, and the two writes (re-checked)."""

    @property
    def read_model(self) -> ReadModel: ...

    def record_upstream_activity(
        self, row: UpstreamLinkRow, activity: UpstreamActivity
    ) -> Written: ...

    def record_upstream_missing(self, row: UpstreamLinkRow) -> Written: ...
