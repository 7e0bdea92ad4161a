"""The caller as watcher: `session_notices` (its pending notices; `drain: true` acknowledges
them, R-N3), `session_watch` and `session_unwatch` (R-W2, R-W6). A host whose agents wake on
their own notices (the MCP server) offers them beside the session tools; an invisible session
reads exactly like a missing one (R-T2), and `"current"` is the caller (a watch of it is the
refused self-watch, R-W3).

A host whose answer can fail on its way to the agent (the MCP server: a cancelled request, a
stop, a broken pipe) runs `session_notices` on `HandingOver(svc)`: its drain hands the
notices over and keeps what it read (`handed`), for the host to acknowledge once the answer
is out (`svc.acknowledge_handed`, R-N8); called directly, `drain_notices` acknowledges as it
reads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from session_awareness.application.errors import UnknownSessionError
from session_awareness.application.tools.inputs import SessionKey, ToolInput, named
from session_awareness.application.tools.outputs import ToolOutput
from session_awareness.application.tools.visibility import Visibility

if TYPE_CHECKING:
    from session_awareness.application.tools.host import ToolHost
    from session_awareness.application.watching import Handover


class SessionNoticesInput(ToolInput):
    drain: bool | None = Field(
        default=None,
        alias="drain",
        description="Acknowledge the notices returned once this answer has reached you (the "
        "next call returns only newer ones).",
    )


class SessionWatchInput(ToolInput):
    session_key: SessionKey = Field(
        alias="sessionKey", description='The session to watch; "current" is your own.'
    )


class SessionUnwatchInput(ToolInput):
    session_key: SessionKey = Field(
        alias="sessionKey", description='The session to stop watching; "current" is your own.'
    )


class SessionNoticesOutput(ToolOutput):
    session_key: str = Field(alias="sessionKey")
    notices: list[str] = Field(alias="notices")
    drained: bool = Field(alias="drained")


class SessionWatchOutput(ToolOutput):
    session_key: str = Field(alias="sessionKey")
    watched: bool = Field(alias="watched")


class SessionUnwatchOutput(ToolOutput):
    session_key: str = Field(alias="sessionKey")
    unwatched: bool = Field(alias="unwatched")


def notices(svc: ToolHost, caller: str, *, drain: bool) -> list[str]:
    """The caller's notices; none while no hook has opened its session yet (R-L9: the
    service refuses a key it has never seen)."""
    try:
        return svc.drain_notices(caller) if drain else svc.pending_notices(caller)
    except UnknownSessionError:
        return []


def session_notices(svc: ToolHost, given: SessionNoticesInput, caller: str) -> SessionNoticesOutput:
    drain = bool(given.drain)
    return SessionNoticesOutput(sessionKey=caller, notices=notices(svc, caller, drain=drain),
                                drained=drain)  # fmt: skip


class HandingOver:
    """The service as a host that acknowledges only what it delivered sees it (R-N8): a drain
    reads the notices without acknowledging them and keeps what it read in `handed` (None:
    nothing to acknowledge); every other call is the service's."""

    def __init__(self, svc: ToolHost) -> None:
        self.svc = svc
        self.handed: Handover | None = None

    def drain_notices(self, watcher: str) -> list[str]:
        handover = self.svc.hand_over_notices(watcher)
        self.handed = handover if handover.handed else None
        return list(handover.notices)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.svc, name)


def session_watch(
    svc: ToolHost, view: Visibility, given: SessionWatchInput, caller: str
) -> SessionWatchOutput:
    row = view.find(svc, named(given.session_key, caller))
    watched = svc.watch(caller, row.key, target_agent_id=row.agent_id)
    return SessionWatchOutput(sessionKey=row.key, watched=watched)


def session_unwatch(
    svc: ToolHost, view: Visibility, given: SessionUnwatchInput, caller: str
) -> SessionUnwatchOutput:
    row = view.find(svc, named(given.session_key, caller))
    removed = svc.unwatch(caller, row.key, target_agent_id=row.agent_id)
    return SessionUnwatchOutput(sessionKey=row.key, unwatched=removed)
