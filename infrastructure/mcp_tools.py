"""The tools as an MCP server offers them: the catalog's session tools less those needing a
host port the server lacks, plus the notice tools an outside client needs to act on notices
(`application/tools/catalog.py`, `offered_tools`).

Declaring, validating and answering every tool is the catalog's (`SessionTools`): results and
typed errors are the JSON of `svc.tools.call` (`{"error": {"code", "field"?, "message"}}`), and
an invisible session reads exactly like a missing one (R-T2). The server adds the caller it
serves, resolved on every call, and refuses a tool it does not offer before anything runs.
A `session_notices` drain is handed over (`answer`): the server acknowledges the notices once
its answer is written (R-N8). Everything here is synchronous: the protocol layer runs it off
its event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from session_awareness.application.tools.catalog import NOTICE_TOOLS, Tool, offered_tools
from session_awareness.application.tools.notice_tools import HandingOver, notices
from session_awareness.application.tools.session_tools import SessionTools
from session_awareness.application.tools.tool_errors import (
    INVALID_CALLER,
    ToolError,
    shown,
    unknown_tool,
)
from session_awareness.application.tools.tool_schemas import schemas_of
from session_awareness.domain.keys import InvalidKeyError, check_key
from session_awareness.logs import get_logger

if TYPE_CHECKING:
    from session_awareness.application import SessionAwareness
    from session_awareness.application.tools.host import ToolHost
    from session_awareness.application.watching import Handover

log = get_logger()

#: The notice tools, by the name the server has always given them.
EXTRA_TOOLS = NOTICE_TOOLS
#: What a server offers on a service (the catalog decides).
available_tools = offered_tools
#: The tool whose drain is handed over, then acknowledged once its answer is out (R-N8).
NOTICES_TOOL = "session_notices"
#: The tool that makes the caller a watcher, which it can be only as an open session.
WATCH_TOOL = "session_watch"

#: Notices an answer hands over: the watcher, and what it read for `svc.acknowledge_handed`.
Handed = tuple[str, "Handover"]


def mcp_tool_schemas(tools: dict[str, Tool]) -> list[dict[str, Any]]:
    """`[{"name", "description", "inputSchema"}]`, the MCP shape of the exported schemas."""
    return schemas_of(tools, "mcp")


class McpSurface:
    """The tools and the notices of one MCP server process, for the caller it serves."""

    def __init__(
        self, svc: SessionAwareness, caller: Callable[[], str | None], *, named: bool = False
    ) -> None:
        self.svc = svc
        self._caller = caller
        #: The caller is named (`--caller`), not a CLI session a hook opened: it is opened
        #: at its first watch, since a watcher that names no session is refused (R-W2).
        self._named = named
        self._opened: set[str] = set()
        self.tools = available_tools(svc)
        self._answer = SessionTools(svc, self.tools)
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
        try:
            caller = self.caller()
            if name not in self.tools:
                raise unknown_tool(name, self.tools)
        except ToolError as error:
            log.info("tool_failed", tool=shown(name), code=error.code, field=error.field)
            return error.to_json()
        if name == WATCH_TOOL:
            self._open_named(caller)
        return self._answer.call(name, {} if arguments is None else arguments, caller=caller)

    def _open_named(self, caller: str) -> None:
        """Open a named caller's session before its first watch, as the `SessionStart` hook
        opens a CLI session: no hook runs for a client such as Codex. Here rather than at
        the start, which would wait on a store another process holds (R-M2, R-M4). A store
        that fails leaves it for the next watch, which the watch's own answer then says."""
        if not self._named or caller in self._opened:
            return
        try:
            self.svc.open_session(caller)
        except Exception as error:  # noqa: BLE001 -- the watch answers for the store
            log.warning("caller_open_failed", caller=caller, error=str(error)[:300])
            return
        self._opened.add(caller)

    def answer(
        self, name: str, arguments: dict[str, Any] | None
    ) -> tuple[dict[str, Any], Handed | None]:
        """As `call`, but a `session_notices` drain hands the notices over instead of
        acknowledging them: the result, and what was handed over (None: nothing to
        acknowledge), which the server acknowledges once the result is out (R-N8)."""
        if name != NOTICES_TOOL:
            return self.call(name, arguments), None
        try:
            caller = self.caller()
        except ToolError as error:
            log.info("tool_failed", tool=name, code=error.code, field=error.field)
            return error.to_json(), None
        host = HandingOver(self.svc)
        tools = SessionTools(cast("ToolHost", host), self.tools)
        result = tools.call(name, {} if arguments is None else arguments, caller=caller)
        return result, None if host.handed is None else (caller, host.handed)

    def pending(self) -> tuple[str | None, list[str]]:
        """The caller and its pending notices now (none when no caller resolves)."""
        try:
            caller = self.caller()
        except ToolError:
            return None, []
        return caller, notices(self.svc, caller, drain=False)
