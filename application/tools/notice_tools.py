"""The caller as watcher: `session_notices` (its pending notices; `drain: true` acknowledges
them, R-N3), `session_watch` and `session_unwatch` (R-W2, R-W6). A host whose agents wake on
their own notices (the MCP server) offers them beside the session tools; an invisible session
reads exactly like a missing one (R-T2), and `"current"` is the caller (a watch of it is the
refused self-watch, R-W3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from session_awareness.application.errors import UnknownSessionError
from session_awareness.application.tools.inputs import SessionKey, ToolInput, named
from session_awareness.application.tools.outputs import ToolOutput
from session_awareness.application.tools.visibility import Visibility

if TYPE_CHECKING:
    from session_awareness.application.tools.host import ToolHost


class SessionNoticesInput(ToolInput):
    drain: bool | None = Field(
        default=None,
        alias="drain",
        description="Acknowledge the notices returned (the next call returns only newer ones).",
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
