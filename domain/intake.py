"""What each producer records: its kind, actor, summary, payload and idempotency key (R-L5).

Pure functions from a producer's arguments to a `SignalRequest`; invalid input raises
`InvalidSignalError`, which the service logs and turns into "nothing recorded" (R-L8).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from session_awareness.domain.keys import check_key
from session_awareness.domain.signals import (
    CHILD_SPAWNED_SUMMARY,
    COMPACTED_SUMMARY,
    FAILED_RUN_SUMMARIES,
    RUN_COMPLETED_SUMMARY,
    ActorType,
    InvalidSignalError,
    Payload,
    RunOutcome,
    SignalKind,
    check_turns,
    goal_summary,
    human_message_summary,
    normalise_channel,
    one_line,
    to_ms,
)

OCCURRED_AT_WINDOW = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class SignalRequest:
    kind: SignalKind
    actor_type: ActorType
    summary: str
    occurred_at: int
    actor_id: str | None = None
    run_id: str | None = None
    payload: Payload | None = None
    dedupe_key: str | None = None
    needs_audience: bool = False  # R-L6: only recorded when someone would be told


def clamp_occurred_at(occurred_at: int | float | datetime | None, now: datetime) -> int:
    """Clamp a producer's time into [now − 24 h, now]; missing means now (R-L7)."""
    high, low = to_ms(now), to_ms(now - OCCURRED_AT_WINDOW)
    if occurred_at is None:
        return high
    if isinstance(occurred_at, datetime):
        if occurred_at.tzinfo is None:
            raise InvalidSignalError("occurred_at must be timezone-aware")
        value = to_ms(occurred_at)
    elif isinstance(occurred_at, bool) or not isinstance(occurred_at, int | float):
        raise InvalidSignalError("occurred_at must be epoch milliseconds or a datetime")
    elif not math.isfinite(occurred_at):
        raise InvalidSignalError("occurred_at must be finite")
    else:
        value = int(occurred_at)
    return min(max(value, low), high)


def _ident(value: str | None, name: str) -> str | None:
    if value is None:
        return None
    text = one_line(value)
    if not text:
        raise InvalidSignalError(f"{name} must not be blank")
    return text


def human_direct_message(
    *,
    channel: str | None,
    actor_id: str | None,
    run_id: str | None,
    occurred_at: int | float | datetime | None,
    idempotency_key: str | None,
    turns: int | None,
    now: datetime,
) -> SignalRequest:
    channel = normalise_channel(channel)
    key = _ident(idempotency_key, "idempotency_key")
    return SignalRequest(
        SignalKind.HUMAN_DIRECT_MESSAGE,
        ActorType.HUMAN,
        human_message_summary(channel),
        clamp_occurred_at(occurred_at, now),
        actor_id=_ident(actor_id, "actor_id"),
        run_id=_ident(run_id, "run_id"),
        payload=Payload(channel=channel, turns=check_turns(turns)),
        dedupe_key=f"human:{key}" if key else None,
        needs_audience=True,
    )


def goal_changed(
    *, summary: str, actor_type: str, actor_id: str | None, now: datetime
) -> SignalRequest:
    try:
        actor = ActorType(actor_type)
    except ValueError:
        raise InvalidSignalError("actor_type must be human, agent or system") from None
    return SignalRequest(
        SignalKind.GOAL_CHANGED,
        actor,
        goal_summary(summary),
        to_ms(now),
        actor_id=_ident(actor_id, "actor_id"),
    )


def child_spawned(*, parent: str, run_id: str, now: datetime) -> SignalRequest:
    check_key(parent)  # the parent becomes a watcher key and a stored actor id
    run = _ident(run_id, "run_id")
    return SignalRequest(
        SignalKind.CHILD_SPAWNED,
        ActorType.AGENT,
        CHILD_SPAWNED_SUMMARY,
        to_ms(now),
        actor_id=parent,
        run_id=run,
        dedupe_key=f"spawn:{run}",
    )


def run_terminal(*, run_id: str, outcome: str, now: datetime) -> SignalRequest:
    run = _ident(run_id, "run_id")
    try:
        result = RunOutcome(outcome)
    except ValueError:
        raise InvalidSignalError("outcome must be ok, error, timeout or cancelled") from None
    if result is RunOutcome.OK:
        kind, summary, payload = SignalKind.RUN_COMPLETED, RUN_COMPLETED_SUMMARY, None
    else:
        kind, summary = SignalKind.RUN_FAILED, FAILED_RUN_SUMMARIES[result]
        payload = Payload(outcome=result)
    return SignalRequest(
        kind,
        ActorType.SYSTEM,
        summary,
        to_ms(now),
        run_id=run,
        payload=payload,
        dedupe_key=f"run:{run}",
    )


def compacted(*, operation_id: str, now: datetime) -> SignalRequest:
    operation = _ident(operation_id, "operation_id")
    return SignalRequest(
        SignalKind.COMPACTED,
        ActorType.SYSTEM,
        COMPACTED_SUMMARY,
        to_ms(now),
        dedupe_key=f"compaction:{operation}",
    )
