"""The reconciliation answer: `session_status` with `changesSince` (R-S1…R-S4)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
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


#: Decoded payloads by their stored JSON text: a handful of distinct values (outcome, channel,
#: turns) repeat across every page. Callers get copies; cleared when it grows past the bound.
_PAYLOADS: dict[str, dict[str, Any]] = {}
_PAYLOADS_BOUND = 4096


def _payload(text: str) -> dict[str, Any]:
    decoded = _PAYLOADS.get(text)
    if decoded is None:
        if len(_PAYLOADS) >= _PAYLOADS_BOUND:
            _PAYLOADS.clear()
        decoded = _PAYLOADS[text] = dict(json.loads(text))
    return decoded


def events_json(rows: Iterable[ChangeRow]) -> list[dict[str, Any]]:
    """The events as the response shows them; optional fields only when present (R-S2).
    Built straight from the row tuples: this loop is most of a 200-event page's own cost."""
    out = []
    for sequence, kind, actor_type, actor_id, run_id, occurred_at, summary, payload in rows:
        event: dict[str, Any] = {
            "sequence": sequence,
            "kind": kind,
            "actorType": actor_type,
            "occurredAt": occurred_at,
            "summary": summary,
        }
        if actor_id is not None:
            event["actorId"] = actor_id
        if run_id is not None:
            event["runId"] = run_id
        if payload is not None:
            decoded = _payload(payload)
            if decoded:
                event["payload"] = decoded.copy()
        out.append(event)
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
        "events": events_json(events),
        "truncated": len(state.changes) > PAGE_SIZE,
        "earliestAvailableSequence": earliest,
        "historyGap": since < head.pruned_watermark,
    }
    return out
