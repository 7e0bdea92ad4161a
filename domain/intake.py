"""What each producer records: its kind, actor, summary, payload and idempotency key (R-L5).

Pure functions from a producer's arguments to a `SignalRequest`; invalid input raises
`InvalidSignalError`, which the service logs and turns into "nothing recorded" (R-L8).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from session_awareness.domain.keys import check_key
from session_awareness.domain.signals import (
    CHILD_SPAWNED_SUMMARY,
    COMPACTED_SUMMARY,
    FAILED_RUN_SUMMARIES,
    OUTCOME_WORDS,
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
T = TypeVar("T")


def checked(field: str, check: Callable[..., T], *args: object) -> T:
    """`check(*args)`, its refusal naming the producer's argument `field` (its message
    kept), so that the service can tell the caller which argument it refused."""
    try:
        return check(*args)
    except ValueError as error:  # InvalidSignalError, InvalidKeyError
        if getattr(error, "field", None):
            raise
        raise InvalidSignalError(str(error), field=field) from None


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
    field = "occurred_at"
    if occurred_at is None:
        return high
    if isinstance(occurred_at, datetime):
        if occurred_at.tzinfo is None:
            raise InvalidSignalError("occurred_at must be timezone-aware", field=field)
        value = to_ms(occurred_at)
    elif isinstance(occurred_at, bool) or not isinstance(occurred_at, int | float):
        raise InvalidSignalError(
            "occurred_at must be epoch milliseconds or a datetime", field=field
        )
    elif not math.isfinite(occurred_at):
        raise InvalidSignalError("occurred_at must be finite", field=field)
    else:
        value = int(occurred_at)
    return min(max(value, low), high)


def _ident(value: str | None, name: str) -> str | None:
    if value is None:
        return None
    text = checked(name, one_line, value)
    if not text:
        raise InvalidSignalError(f"{name} must not be blank", field=name)
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
    channel = checked("channel", normalise_channel, channel)
    key = _ident(idempotency_key, "idempotency_key")
    return SignalRequest(
        SignalKind.HUMAN_DIRECT_MESSAGE,
        ActorType.HUMAN,
        human_message_summary(channel),
        clamp_occurred_at(occurred_at, now),
        actor_id=_ident(actor_id, "actor_id"),
        run_id=_ident(run_id, "run_id"),
        payload=Payload(channel=channel, turns=checked("turns", check_turns, turns)),
        dedupe_key=f"human:{key}" if key else None,
        needs_audience=True,
    )


def goal_changed(
    *, summary: str, actor_type: str, actor_id: str | None, now: datetime
) -> SignalRequest:
    try:
        actor = ActorType(actor_type)
    except ValueError:
        raise InvalidSignalError(
            "actor_type must be human, agent or system", field="actor_type"
        ) from None
    return SignalRequest(
        SignalKind.GOAL_CHANGED,
        actor,
        checked("summary", goal_summary, summary),
        to_ms(now),
        actor_id=_ident(actor_id, "actor_id"),
    )


def child_spawned(*, parent: str, run_id: str, now: datetime) -> SignalRequest:
    checked("parent", check_key, parent)  # it becomes a watcher key and a stored actor id
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
    """A run's end: `outcome` in the rows' words (`completed`, `failed`, `timeout`,
    `cancelled`) or the older ones (`ok`, `error`); both record the same event (R-L5)."""
    run = _ident(run_id, "run_id")
    result = OUTCOME_WORDS.get(outcome) if isinstance(outcome, str) else None
    if result is None:
        raise InvalidSignalError(
            "outcome must be completed, failed, timeout or cancelled (or ok, error)",
            field="outcome",
        )
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
