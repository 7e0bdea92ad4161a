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
)
from session_awareness.application.tools.inputs import SessionsSendInput
from session_awareness.application.tools.outputs import SessionsSendOutput
from session_awareness.application.tools.visibility import Visibility
from session_awareness.domain.keys import is_thread_scoped
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
        log.warning("tool_dispatch_failed", caller=caller, target=row.key, error=repr(error))
        raise ToolError(
            DISPATCH_FAILED, f"the message could not be delivered to {row.key}"
        ) from None
    if not isinstance(received, str) or not received:
        log.warning("tool_dispatch_unkeyed", caller=caller, target=row.key, got=repr(received))
        received = row.key
    log.info("tool_dispatched", caller=caller, target=row.key, received=received)
    if given.watch is None:
        return SessionsSendOutput(sessionKey=received)
    agent = row.agent_id if received == row.key else None
    watched = given.watch and svc.watch(caller, received, target_agent_id=agent)
    return SessionsSendOutput(sessionKey=received, watched=watched)


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
        return view.find(svc, given.session_key)
    if given.agent_id is not None:
        return view.find(svc, f"agent:{given.agent_id}:main", "agentId")
    row = view.find_by_label(svc, str(given.label))
    if is_thread_scoped(row.key):
        raise ToolError(
            INVALID_INPUT,
            f"label {given.label} names a thread-scoped session (…:thread:<id>): send to the "
            "parent channel session",
            "label",
        )
    return row
