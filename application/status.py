"""The reconciliation answer: `session_status` with `changesSince` (SPEC R-S1…R-S4)."""

from __future__ import annotations

import math
import re
from typing import Any

from session_awareness.application.errors import InvalidChangesSinceError
from session_awareness.application.ports import ChangeRow, SessionState
from session_awareness.domain.signals import MAX_SAFE_INTEGER

PAGE_SIZE = 200
_DIGITS = re.compile(r"[0-9]+")


def parse_changes_since(value: object) -> int:
    """A non-negative integer, or a string of digits; anything else is refused (R-S4)."""
    if isinstance(value, bool):
        raise InvalidChangesSinceError
    if isinstance(value, int):
        number = value
    elif isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise InvalidChangesSinceError
        number = int(value)
    elif isinstance(value, str) and _DIGITS.fullmatch(value):
        digits = value.lstrip("0") or "0"
        if len(digits) > 16:  # 2^53 − 1 has 16 digits; never parse a huge string
            raise InvalidChangesSinceError
        number = int(digits)
    else:
        raise InvalidChangesSinceError
    if not 0 <= number <= MAX_SAFE_INTEGER:
        raise InvalidChangesSinceError
    return number


def event_json(row: ChangeRow) -> dict[str, Any]:
    """One event as the response shows it; optional fields only when present (R-S2)."""
    out: dict[str, Any] = {
        "sequence": row.sequence,
        "kind": row.kind,
        "actorType": row.actor_type,
        "occurredAt": row.occurred_at,
        "summary": row.summary,
    }
    if row.actor_id is not None:
        out["actorId"] = row.actor_id
    if row.run_id is not None:
        out["runId"] = row.run_id
    if row.payload:
        out["payload"] = dict(row.payload)
    return out


def status_json(key: str, state: SessionState, since: int | None) -> dict[str, Any]:
    """`{sessionKey, stateVersion, stateChanges?}`; `state.changes` holds up to PAGE_SIZE + 1."""
    head = state.head
    out: dict[str, Any] = {"sessionKey": key, "stateVersion": head.state_version}
    if since is None:
        return out
    events = state.changes[:PAGE_SIZE]
    if state.earliest_retained is not None:
        earliest = state.earliest_retained
    else:
        earliest = head.state_version + 1 if head.state_version > 0 else 0
    out["stateChanges"] = {
        "events": [event_json(row) for row in events],
        "truncated": len(state.changes) > PAGE_SIZE,
        "earliestAvailableSequence": earliest,
        "historyGap": since < head.pruned_watermark,
    }
    return out
