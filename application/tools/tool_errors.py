"""Typed tool errors: `{"error": {"code", "field"?, "message"}}`, never a stack trace (R-T1)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from session_awareness.application.errors import (
    AmbiguousSessionError,
    InvalidArgumentError,
    SessionAwarenessError,
    UnknownSessionError,
)
from session_awareness.application.tools.inputs import RULES, THREAD_SCOPED, THREAD_SCOPED_RULE
from session_awareness.domain.signals import CONTROL_CHARACTERS
from session_awareness.logs import get_logger

log = get_logger()

INVALID_INPUT = "invalid_input"
UNKNOWN_SESSION = "unknown_session"
UNKNOWN_TOOL = "unknown_tool"
AMBIGUOUS_TARGET = "ambiguous_target"
DISPATCH_FAILED = "dispatch_failed"
NOT_CONFIGURED = "not_configured"
INTERNAL_ERROR = "internal_error"
SERVICE_ERROR = "service_error"
INVALID_CALLER = "invalid_caller"
SPAWN_FAILED = "spawn_failed"
CANCEL_FAILED = "cancel_failed"
UNKNOWN_RUN = "unknown_run"

#: What an agent is told when the service cannot answer: the reason is logged, never shown.
SERVICE_UNAVAILABLE = "the session service is unavailable; try again later"
#: How much of a name an agent made up (an unknown field or tool) is echoed or logged.
MAX_ECHO = 64
_UNPRINTABLE = re.compile(f"[{CONTROL_CHARACTERS}]")


def shown(name: object) -> str:
    """A name an agent made up, safe to echo: at most `MAX_ECHO` characters (then `…`), every
    control, format or line-separator character escaped as `\\uXXXX`, so a hostile name can
    neither flood a message nor break its line. A non-string shows as its type."""
    if not isinstance(name, str):
        return f"<{type(name).__name__}>"
    cut = name[:MAX_ECHO]
    escaped = _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", cut)
    return escaped + ("…" if len(name) > MAX_ECHO else "")


class ToolError(SessionAwarenessError):
    """A tool call that cannot be answered; `code` is stable, `field` names the input field."""

    def __init__(self, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.field = code, message, field

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code}
        if self.field is not None:
            body["field"] = self.field
        body["message"] = self.message
        return {"error": body}


def unknown_tool(name: object, known: Iterable[str]) -> ToolError:
    """A tool name the caller made up, shown bounded and escaped (`shown`), with the names
    it may call: the session tools' and the MCP server's answer alike."""
    return ToolError(UNKNOWN_TOOL, f"Unknown tool: {shown(name)} (known: {', '.join(known)})")


def unknown_session(key: str, field: str = "sessionKey") -> ToolError:
    """Unknown, deleted and invisible sessions all read the same (R-S4, R-T2)."""
    return ToolError(UNKNOWN_SESSION, str(UnknownSessionError(key)), field)


def from_validation(error: ValidationError, tool: str) -> ToolError:
    """The first problem of a refused input, as the rule its field breaks; an unknown field is
    reported before the others, since it often explains them (a misspelt name)."""
    problems = sorted(error.errors(), key=lambda e: e["type"] != "extra_forbidden")
    problem = problems[0]
    loc = [str(part) for part in problem["loc"]]
    field = shown(".".join(loc)) if loc else None
    unknown = problem["type"] == "extra_forbidden"
    if field is None and problem["type"] == "string_unicode":
        # A key holding a lone surrogate is not text pydantic-core can read: it refuses the
        # whole object at no location, the key as the input, before `extra="forbid"` looks.
        # No field has such a name, so it is an unknown field like any other.
        field, unknown = shown(problem["input"]), True
    if field is None:
        return ToolError(INVALID_INPUT, "the arguments must be a JSON object", "arguments")
    if unknown:
        return ToolError(INVALID_INPUT, f"{field} is not a parameter of {tool}", field)
    if problem["type"] == "missing":
        return ToolError(INVALID_INPUT, f"{field} is required", field)
    if problem["type"] == THREAD_SCOPED:
        return ToolError(INVALID_INPUT, THREAD_SCOPED_RULE, field)
    rule = RULES.get(loc[0], f"{shown(loc[0])} is not valid")
    return ToolError(INVALID_INPUT, rule, field)


def from_service(error: SessionAwarenessError, field: str = "sessionKey") -> ToolError:
    """A service error, typed for the agent (messages are the rules' texts)."""
    if isinstance(error, ToolError):
        return error
    if isinstance(error, UnknownSessionError):
        return unknown_session(error.key, field)
    if isinstance(error, AmbiguousSessionError):
        return ToolError(AMBIGUOUS_TARGET, str(error), field)
    if isinstance(error, InvalidArgumentError):
        return ToolError(INVALID_INPUT, RULES.get(error.field, str(error)), error.field)
    if isinstance(error, ValueError):
        return ToolError(INVALID_INPUT, str(error), field)
    # The store is unreachable (or another failure of the service's own): the reason names
    # the database's host, port or file, which are the host's business, not the agent's.
    log.warning("tool_service_error", error_type=type(error).__name__, reason=str(error))
    return ToolError(SERVICE_ERROR, SERVICE_UNAVAILABLE)
