"""The session tools as an MCP server offers them: the service's tools, less those needing a
host port the server lacks, plus what an outside client needs to act on notices.

`session_notices` (the caller's pending notices; `drain: true` acknowledges them, R-N3),
`session_watch` and `session_unwatch` (the caller as watcher, R-W2, R-W6). Results and typed
errors are the JSON of `svc.tools.call` (`{"error": {"code", "field"?, "message"}}`); an
invisible session reads exactly like a missing one (R-T2). Everything here is synchronous: the
protocol layer runs it off its event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError

from session_awareness.application.errors import SessionAwarenessError, UnknownSessionError
from session_awareness.application.tools.catalog import TOOLS, Tool
from session_awareness.application.tools.inputs import SessionKey, ToolInput, named
from session_awareness.application.tools.tool_errors import (
    INTERNAL_ERROR,
    INVALID_CALLER,
    INVALID_INPUT,
    ToolError,
    from_service,
    from_validation,
    shown,
    unknown_tool,
)
from session_awareness.application.tools.tool_schemas import parameters_schema, tool_schemas
from session_awareness.application.tools.visibility import Visibility
from session_awareness.domain.keys import InvalidKeyError, check_key
from session_awareness.logs import get_logger

if TYPE_CHECKING:
    from session_awareness.application import SessionAwareness

log = get_logger()

#: The tools that need a host port, by the service attribute holding it. `subagents` is not
#: one: its list needs none, and its cancel answers `not_configured` without a canceller.
NEEDS_PORT = {
    "sessions_send": "dispatcher",
    "sessions_spawn": "spawner",
    "sessions_history": "transcript_sources",
}
EXTRA_RULES = {"drain": "drain must be a boolean (true or false)"}


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


EXTRA_TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            "session_notices",
            "Your pending notices: one line per watched session another actor changed, each "
            "naming the session_status call that reconciles it. With drain: true they are "
            "acknowledged, so the next call returns only newer changes.",
            SessionNoticesInput,
        ),
        Tool(
            "session_watch",
            "Watch a visible session: you get one notice when another actor (a human, another "
            "agent) changes it, however many changes follow, until you reconcile.",
            SessionWatchInput,
        ),
        Tool(
            "session_unwatch",
            "Stop watching a session; its pending notice, if any, goes with the watch.",
            SessionUnwatchInput,
        ),
    )
}


def available_tools(svc: SessionAwareness) -> dict[str, Tool]:
    """The service's tools whose host ports are there, then the notice tools."""
    offered = {
        name: tool
        for name, tool in TOOLS.items()
        if name not in NEEDS_PORT or getattr(svc, NEEDS_PORT[name], None)
    }
    return {**offered, **EXTRA_TOOLS}


def mcp_tool_schemas(tools: dict[str, Tool]) -> list[dict[str, Any]]:
    """`[{"name", "description", "inputSchema"}]`, the MCP shape of the exported schemas."""
    exported = {entry["name"]: entry for entry in tool_schemas("mcp")}
    return [
        exported.get(name)
        or {
            "name": name,
            "description": tool.description,
            "inputSchema": parameters_schema(tool.input.model_json_schema(by_alias=True)),
        }
        for name, tool in tools.items()
    ]


class McpSurface:
    """The tools and the notices of one MCP server process, for the caller it serves."""

    def __init__(self, svc: SessionAwareness, caller: Callable[[], str | None]) -> None:
        self.svc = svc
        self._caller = caller
        self.tools = available_tools(svc)
        #: The caller last resolved: wakes for other watchers are ignored.
        self.last_caller: str | None = None

    def caller(self) -> str:
        """The caller's session key, resolved now (a Claude Code session can change)."""
        key = self._caller()
        if key is None:
            raise ToolError(
                INVALID_CALLER,
                "no caller session: start the server with --caller KEY, or under Claude Code "
                "with the session-awareness hooks installed (session-awareness install "
                "claude-code)",
            )
        try:
            check_key(key)
        except InvalidKeyError:
            raise ToolError(INVALID_CALLER, "the caller must be a session key") from None
        self.last_caller = key
        return key

    def call(self, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
        """Run one tool call; the JSON result or typed error, never an exception. The name
        is the client's, so it is echoed and logged as `svc.tools.call` shows a made-up one:
        bounded, its control and format characters escaped."""
        arguments = {} if arguments is None else arguments
        try:
            caller = self.caller()
            if name not in self.tools:
                raise unknown_tool(name, self.tools)
        except ToolError as error:
            log.info("tool_failed", tool=shown(name), code=error.code, field=error.field)
            return error.to_json()
        if name not in EXTRA_TOOLS:
            return self.svc.tools.call(name, arguments, caller=caller)
        return self._extra(name, arguments, caller)

    def _extra(self, name: str, arguments: dict[str, Any], caller: str) -> dict[str, Any]:
        log.info("tool_called", tool=name, caller=caller)
        try:
            try:
                given = EXTRA_TOOLS[name].input.model_validate(arguments)
            except ValidationError as error:
                refused = from_validation(error, name)
                if refused.field in EXTRA_RULES and refused.code == INVALID_INPUT:
                    refused = ToolError(INVALID_INPUT, EXTRA_RULES[refused.field], refused.field)
                raise refused from None
            try:
                result: dict[str, Any] = getattr(self, name)(given, caller)
            except SessionAwarenessError as error:
                raise from_service(error) from None
        except ToolError as error:
            log.info("tool_failed", tool=name, caller=caller, code=error.code, field=error.field)
            return error.to_json()
        except Exception as error:  # noqa: BLE001 -- an agent gets a typed error, never a traceback
            log.error(
                "tool_failed", tool=name, caller=caller, code=INTERNAL_ERROR, error=repr(error)
            )
            return ToolError(INTERNAL_ERROR, f"{name} failed unexpectedly").to_json()
        log.info("tool_completed", tool=name, caller=caller)
        return result

    # -- the notice tools --------------------------------------------------------------------

    def session_notices(self, given: SessionNoticesInput, caller: str) -> dict[str, Any]:
        drain = bool(given.drain)
        return {"sessionKey": caller, "notices": self._notices(caller, drain), "drained": drain}

    def _notices(self, caller: str, drain: bool) -> list[str]:
        """The caller's notices; none while no hook has opened its session yet (R-L9: the
        service refuses a key it has never seen)."""
        try:
            return self.svc.drain_notices(caller) if drain else self.svc.pending_notices(caller)
        except UnknownSessionError:
            return []

    def session_watch(self, given: SessionWatchInput, caller: str) -> dict[str, Any]:
        row = self._visible(given.session_key, caller)
        watched = self.svc.watch(caller, row.key, target_agent_id=row.agent_id)
        return {"sessionKey": row.key, "watched": watched}

    def session_unwatch(self, given: SessionUnwatchInput, caller: str) -> dict[str, Any]:
        row = self._visible(given.session_key, caller)
        removed = self.svc.unwatch(caller, row.key, target_agent_id=row.agent_id)
        return {"sessionKey": row.key, "unwatched": removed}

    def _visible(self, key: str, caller: str) -> Any:
        """The visible session a key names; "current" is the caller, as in every session
        tool (a watch of it is the refused self-watch, R-W3)."""
        return Visibility.of(self.svc, self.svc.visibility, caller).find(
            self.svc, named(key, caller)
        )

    def pending(self) -> tuple[str | None, list[str]]:
        """The caller and its pending notices now (none when no caller resolves)."""
        try:
            caller = self.caller()
        except ToolError:
            return None, []
        return caller, self._notices(caller, drain=False)
