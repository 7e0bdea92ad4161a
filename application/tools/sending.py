"""`sessions_send`: pick one visible target, deliver through the host's dispatcher, then, with
`watch: true`, watch the session that actually received the message (R-K2, R-W2, R-T1).

A dispatcher that declares a `timeout_seconds` keyword receives the call's `timeoutSeconds`
(None when not given) and may answer `{"sessionKey", "status", "reply"}`: `accepted`, or after
waiting `ok` (with the reply), `no_reply`, `timeout` or `error`. `timeoutSeconds: 0` is
fire-and-forget: the result is `accepted` whatever the host says. A plain key, what a
`(sender, target, message) -> key` dispatcher returns, is `accepted`. The message and the reply
are never stored nor logged.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from session_awareness.application.errors import SessionAwarenessError
from session_awareness.application.ports import SessionRow
from session_awareness.application.tools.inputs import SessionsSendInput
from session_awareness.application.tools.outputs import (
    SEND_STATUSES,
    SendStatus,
    SessionsSendOutput,
)
from session_awareness.application.tools.tool_errors import (
    DISPATCH_FAILED,
    INVALID_INPUT,
    NOT_CONFIGURED,
    ToolError,
    shown,
)
from session_awareness.application.tools.visibility import Visibility
from session_awareness.domain.keys import InvalidKeyError, check_key, is_thread_scoped
from session_awareness.logs import get_logger

if TYPE_CHECKING:
    from session_awareness.application.tools.host import ToolHost

log = get_logger()
TARGETS = ("sessionKey", "label", "agentId")


def send(
    svc: ToolHost, view: Visibility, given: SessionsSendInput, caller: str
) -> SessionsSendOutput:
    """Deliver `given.message` from `caller`; the message text is never stored or logged."""
    row = target(svc, view, given)
    if svc.dispatcher is None:
        raise ToolError(
            NOT_CONFIGURED, "sessions_send needs a dispatcher: open_service(..., dispatcher=...)"
        )
    try:
        if accepts_timeout(svc.dispatcher):
            answer = svc.dispatcher(
                caller, row.key, given.message, timeout_seconds=given.timeout_seconds
            )
        else:
            answer = svc.dispatcher(caller, row.key, given.message)
    except Exception as error:  # noqa: BLE001 -- the host's delivery failed: a typed error (R-W2)
        # Only the type: an exception's text may quote the message.
        log.warning("tool_dispatch_failed", caller=caller, target=row.key,
                    error_type=type(error).__name__)  # fmt: skip
        raise ToolError(
            DISPATCH_FAILED, f"the message could not be delivered to {row.key}"
        ) from None
    received, status, reply = _answer(answer, row.key, given.timeout_seconds, caller)
    if not isinstance(received, str) or not received:
        log.warning("tool_dispatch_unkeyed", caller=caller, target=row.key,
                    got_type=type(received).__name__)  # fmt: skip
        received = row.key
    log.info("tool_dispatched", caller=caller, target=row.key, received=shown(received))
    # The message is delivered: from here on a failure of the store's is not the send's. An
    # error would make the agent send it again, so the send is reported, watched or not.
    try:
        receiver = _visible_receiver(svc, view, row, received)
    except SessionAwarenessError as error:  # unreadable: told as hidden, never as visible
        log.warning("tool_receiver_unknown", caller=caller, target=row.key,
                    error_type=type(error).__name__)  # fmt: skip
        receiver = None
    shown_key, watched = row.key, False
    if receiver is None:  # routed outside the caller's view: nothing about it is told (R-T2)
        log.info("tool_receiver_hidden", caller=caller, target=row.key)
    else:
        shown_key = receiver.key
        if given.watch:
            watched = _watched(svc, caller, receiver)
    return SessionsSendOutput(
        status=status,
        sessionKey=shown_key,
        reply=reply,
        watched=None if given.watch is None else watched,
    )


def _watched(svc: ToolHost, caller: str, receiver: SessionRow) -> bool:
    """Watch the receiver (R-W2); False, logged, when the store refuses or cannot answer."""
    try:
        return svc.watch(caller, receiver.key, target_agent_id=receiver.agent_id)
    except SessionAwarenessError as error:
        log.warning("tool_watch_failed", caller=caller, target=receiver.key,
                    error_type=type(error).__name__, reason=str(error))  # fmt: skip
        return False


def accepts_timeout(dispatcher: Callable[..., Any]) -> bool:
    """Whether the host's dispatcher declares a `timeout_seconds` keyword (or takes any)."""
    try:
        parameters = inspect.signature(dispatcher).parameters.values()
    except (TypeError, ValueError):  # no signature to read: called the old way
        return False
    return any(
        p.kind is p.VAR_KEYWORD or (p.name == "timeout_seconds" and p.kind is not p.POSITIONAL_ONLY)
        for p in parameters
    )


def _answer(
    answer: object, target: str, timeout: float | None, caller: str
) -> tuple[object, SendStatus, str | None]:
    """(receiving key, status, reply) of the dispatcher's answer: a key alone is `accepted`;
    a mapping is the host's word, checked like any input; fire-and-forget is `accepted`."""
    if not isinstance(answer, Mapping):
        return answer, "accepted", None
    received = answer.get("sessionKey", target)
    given, reply = answer.get("status", "accepted"), answer.get("reply")
    status: SendStatus = "accepted"
    if given in SEND_STATUSES:
        status = given
    else:
        log.warning("tool_dispatch_status_unknown", caller=caller, target=target,
                    got_type=type(given).__name__)  # fmt: skip
    if timeout == 0:
        return received, "accepted", None
    if status != "ok" or not isinstance(reply, str):
        reply = None
    return received, status, reply


def _visible_receiver(
    svc: ToolHost, view: Visibility, row: SessionRow, received: str
) -> SessionRow | None:
    """The session that actually received the message (R-W2), when the caller may see it."""
    if received == row.key:
        return row
    try:
        check_key(received)
        return view.find(svc, received)
    except (InvalidKeyError, ToolError):
        return None


def target(svc: ToolHost, view: Visibility, given: SessionsSendInput) -> SessionRow:
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
