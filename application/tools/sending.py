"""`sessions_send`: pick one visible target, deliver through the host's dispatcher, then, with
`watch: true`, watch the session that actually received the message (SPEC R-K2, R-W2)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from session_awareness.application.ports import SessionRow
from session_awareness.application.tools.errors import (
    DISPATCH_FAILED,
    INVALID_INPUT,
    NOT_CONFIGURED,
    ToolError,
    shown,
)
from session_awareness.application.tools.inputs import SessionsSendInput
from session_awareness.application.tools.outputs import SessionsSendOutput
from session_awareness.application.tools.visibility import Visibility
from session_awareness.domain.keys import InvalidKeyError, check_key, is_thread_scoped
from session_awareness.logs import get_logger

if TYPE_CHECKING:
    from session_awareness.application.service import SessionAwareness

log = get_logger()
TARGETS = ("sessionKey", "label", "agentId")


def send(
    svc: SessionAwareness, view: Visibility, given: SessionsSendInput, caller: str
) -> SessionsSendOutput:
    """Deliver `given.message` from `caller`; the message text is never stored or logged."""
    row = target(svc, view, given)
    if svc.dispatcher is None:
        raise ToolError(
            NOT_CONFIGURED, "sessions_send needs a dispatcher: open_service(..., dispatcher=...)"
        )
    try:
        received = svc.dispatcher(caller, row.key, given.message)
    except Exception as error:  # noqa: BLE001 -- the host's delivery failed: a typed error (R-W2)
        # Only the type: an exception's text may quote the message.
        log.warning("tool_dispatch_failed", caller=caller, target=row.key,
                    error_type=type(error).__name__)  # fmt: skip
        raise ToolError(
            DISPATCH_FAILED, f"the message could not be delivered to {row.key}"
        ) from None
    if not isinstance(received, str) or not received:
        log.warning("tool_dispatch_unkeyed", caller=caller, target=row.key,
                    got_type=type(received).__name__)  # fmt: skip
        received = row.key
    log.info("tool_dispatched", caller=caller, target=row.key, received=shown(received))
    receiver = _visible_receiver(svc, view, row, received)
    if receiver is None:  # routed outside the caller's view: nothing about it is told (R-T2)
        log.info("tool_receiver_hidden", caller=caller, target=row.key)
        if given.watch is None:
            return SessionsSendOutput(sessionKey=row.key)
        return SessionsSendOutput(sessionKey=row.key, watched=False)
    if given.watch is None:
        return SessionsSendOutput(sessionKey=receiver.key)
    watched = given.watch and svc.watch(caller, receiver.key, target_agent_id=receiver.agent_id)
    return SessionsSendOutput(sessionKey=receiver.key, watched=watched)


def _visible_receiver(
    svc: SessionAwareness, view: Visibility, row: SessionRow, received: str
) -> SessionRow | None:
    """The session that actually received the message (R-W2), when the caller may see it."""
    if received == row.key:
        return row
    try:
        check_key(received)
        return view.find(svc, received)
    except (InvalidKeyError, ToolError):
        return None


def target(svc: SessionAwareness, view: Visibility, given: SessionsSendInput) -> SessionRow:
    """The one visible session named by exactly one of sessionKey, label or agentId."""
    values = (given.session_key, given.label, given.agent_id)
    named = [field for field, value in zip(TARGETS, values, strict=True) if value is not None]
    if len(named) != 1:
        field = named[1] if named else "sessionKey"
        raise ToolError(
            INVALID_INPUT, "sessions_send takes exactly one of sessionKey, label or agentId", field
        )
    if given.session_key is not None:
        return view.find(svc, given.session_key, read=False)
    if given.agent_id is not None:
        return view.find(svc, f"agent:{given.agent_id}:main", "agentId", read=False)
    row = view.find_by_label(svc, str(given.label), read=False)
    if is_thread_scoped(row.key):
        raise ToolError(
            INVALID_INPUT,
            f"label {given.label} names a thread-scoped session (…:thread:<id>): send to the "
            "parent channel session",
            "label",
        )
    return row
