"""What upstream monitoring records (R-L5, R-U3, R-U4): pure builders of `SignalRequest`s."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from session_awareness.application.upstream.provider_ports import UpstreamActivity
from session_awareness.domain import intake as produce
from session_awareness.domain.intake import SignalRequest
from session_awareness.domain.signals import (
    ActorType,
    InvalidSignalError,
    Payload,
    SignalKind,
    adopted_summary,
    to_ms,
    upstream_missing_summary,
)
from session_awareness.domain.upstream import UpstreamLink, check_marker

#: `adopted` is recorded once per session, however often it is adopted again (R-L5).
ADOPTED_KEY = "adopted"


def adopted(catalog_id: str, now: datetime) -> SignalRequest:
    """`adopted from <catalogId>`, by a human, log only, idempotent per session (R-L5)."""
    return SignalRequest(
        SignalKind.ADOPTED,
        ActorType.HUMAN,
        adopted_summary(catalog_id),
        to_ms(now),
        dedupe_key=ADOPTED_KEY,
    )


def activity(link: UpstreamLink, found: UpstreamActivity, now: datetime) -> SignalRequest:
    """One `human_direct_message` for a scan's new human turns: `channel` = catalog id,
    `turns` when > 1, the time clamped (R-L7), idempotent per upstream position (R-U3)."""
    catalog_id = link.source.catalog_id
    position = check_marker(found.position, "position") or check_marker(found.marker)
    if position is None:
        raise InvalidSignalError("upstream activity needs a position or a marker")
    try:
        produce.clamp_occurred_at(found.occurred_at, now)
        occurred_at = found.occurred_at
    except InvalidSignalError:
        occurred_at = None  # an unreadable upstream time is "now", not a lost turn
    request = produce.human_direct_message(
        channel=catalog_id,
        actor_id=None,
        run_id=None,
        occurred_at=occurred_at,
        idempotency_key=None,
        turns=found.human_turns,
        now=now,
    )
    return replace(request, dedupe_key=f"upstream:{catalog_id}:{position}")


def missing(link: UpstreamLink, now: datetime) -> SignalRequest:
    """`upstream missing via <catalogId>`, by the system, with `payload.channel`; once per
    link generation (R-U4)."""
    catalog_id = link.source.catalog_id
    return SignalRequest(
        SignalKind.UPSTREAM_MISSING,
        ActorType.SYSTEM,
        upstream_missing_summary(catalog_id),
        to_ms(now),
        payload=Payload(channel=catalog_id),
        dedupe_key=f"upstream-missing:{link.generation}",
    )
