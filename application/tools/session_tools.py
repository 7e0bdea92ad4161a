"""`SessionTools`: the agent-facing session tools over one service (R-T1–R-T3).

A host calls `svc.tools.call(name, arguments, caller=key)` with the arguments an agent produced
(the JSON string as the model wrote it, or the object decoded from it) and hands the returned
dict back; Python hosts may call the typed methods instead, which raise `ToolError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from session_awareness.application.errors import SessionAwarenessError
from session_awareness.application.queries import children_by_pair, list_row
from session_awareness.application.tools.catalog import TOOLS, Tool
from session_awareness.application.tools.inputs import (
    SessionsListInput,
    SessionsSendInput,
    SessionsSpawnInput,
    SessionStatusInput,
    SubagentsInput,
    named,
)
from session_awareness.application.tools.notice_tools import (
    SessionNoticesInput,
    SessionNoticesOutput,
    SessionUnwatchInput,
    SessionUnwatchOutput,
    SessionWatchInput,
    SessionWatchOutput,
    session_notices,
    session_unwatch,
    session_watch,
)
from session_awareness.application.tools.outputs import (
    SessionRow,
    SessionsListOutput,
    SessionsSendOutput,
    SessionsSpawnOutput,
    SessionStatusOutput,
    SubagentsCancelOutput,
    SubagentsListOutput,
)
from session_awareness.application.tools.sending import send
from session_awareness.application.tools.sessions_history import (
    SessionsHistoryInput,
    SessionsHistoryOutput,
    history,
)
from session_awareness.application.tools.spawning import spawn
from session_awareness.application.tools.subagents import subagents
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
from session_awareness.application.tools.visibility import Visibility
from session_awareness.domain.keys import MAX_KEY_LENGTH, InvalidKeyError, check_key
from session_awareness.logs import get_logger

if TYPE_CHECKING:
    from session_awareness.application.tools.host import ToolHost

log = get_logger()


class SessionTools:
    """`session_status`, `sessions_list`, `sessions_send`, `sessions_spawn`, `subagents` and
    `sessions_history` for callers; a host that offers more of the catalog (the MCP server:
    `session_notices`, `session_watch`, `session_unwatch`) names the tools it offers."""

    def __init__(self, svc: ToolHost, tools: Mapping[str, Tool] = TOOLS) -> None:
        self.svc = svc
        self.tools = tools

    def call(self, name: str, arguments: str | dict[str, Any], *, caller: str) -> dict[str, Any]:
        """Run tool `name` for `caller` on the agent's arguments: the JSON text a model
        produced, or the object decoded from it (`null` fields count as not given). The
        JSON-ready result, or `{"error": {"code", "field"?, "message"}}`. Never raises, never
        shows a traceback."""
        tool_name = shown(name)
        who = caller if isinstance(caller, str) and len(caller) <= MAX_KEY_LENGTH else shown(caller)
        log.info("tool_called", tool=tool_name, caller=who)
        try:
            tool = self.tools.get(name) if isinstance(name, str) else None
            if tool is None:
                raise unknown_tool(name, self.tools)
            try:
                given = tool.input.model_validate(decoded(arguments))
            except ValidationError as error:
                raise from_validation(error, tool.name) from None
            output: Any = getattr(self, tool.name)(given, caller=caller)
        except ToolError as error:
            log.info("tool_failed", tool=tool_name, caller=who, code=error.code, field=error.field)
            return error.to_json()
        except Exception as error:  # noqa: BLE001 -- an agent gets a typed error, never a traceback
            log.error("tool_failed", tool=tool_name, caller=who, code=INTERNAL_ERROR,
                      error_type=type(error).__name__)  # fmt: skip
            return ToolError(INTERNAL_ERROR, f"{tool_name} failed unexpectedly").to_json()
        log.info("tool_completed", tool=tool_name, caller=who)
        result: dict[str, Any] = output.to_json()
        return result

    # -- the tools -------------------------------------------------------------------------------

    def session_status(self, given: SessionStatusInput, *, caller: str) -> SessionStatusOutput:
        """`{sessionKey, stateVersion, stateChanges?}` of a visible session (R-S1, R-T2)."""
        view = self._view(caller)
        key = named(given.session_key, caller)
        with _service_errors():
            row = view.find(self.svc, key, agent_id=given.agent_id)
            status = self.svc.session_status(
                row.key, changes_since=given.changes_since, agent_id=row.agent_id
            )
        return SessionStatusOutput.model_validate(status)

    def sessions_list(self, given: SessionsListInput, *, caller: str) -> SessionsListOutput:
        """The visible sessions with their parent and visible children (R-T1, R-S5)."""
        view = self._view(caller)
        with _service_errors():
            rows = view.rows(
                self.svc,
                agent_id=given.agent_id,
                kinds=given.kinds,
                label=given.label,
                search=given.search,
                active_minutes=given.active_minutes,
                limit=given.limit,
                archived=bool(given.archived),
            )
            pairs = [(row.agent_id, row.key) for row in rows]
            children = children_by_pair(self.svc.read_model, pairs)
            visible = view.visible_pairs(self.svc, {c for kids in children.values() for c in kids})
        sessions = [
            SessionRow.model_validate(
                list_row(row, [k for a, k in children[row.agent_id, row.key] if (a, k) in visible])
            )
            for row in rows
        ]
        return SessionsListOutput(sessions=sessions, visibility=view.note)

    def sessions_send(self, given: SessionsSendInput, *, caller: str) -> SessionsSendOutput:
        """Deliver through the host's dispatcher; with `watch`, watch the receiver (R-W2)."""
        with _service_errors():
            return send(self.svc, self._view(caller), given, caller)

    def sessions_spawn(self, given: SessionsSpawnInput, *, caller: str) -> SessionsSpawnOutput:
        """The host's spawner starts the child; the spawn edge is recorded (R-L5, R-W1)."""
        with _service_errors():
            return spawn(self.svc, self._view(caller), given, caller)

    def subagents(
        self, given: SubagentsInput, *, caller: str
    ) -> SubagentsListOutput | SubagentsCancelOutput:
        """The caller's tree with its runs; cancel a run in it through the host's canceller."""
        with _service_errors():
            return subagents(self.svc, self._view(caller), given, caller)

    def sessions_history(
        self, given: SessionsHistoryInput, *, caller: str
    ) -> SessionsHistoryOutput:
        """A bounded, safety-filtered page of a visible session's transcript (R-T1, R-T2)."""
        with _service_errors():
            return history(self.svc, self._view(caller), given, caller)

    def session_notices(self, given: SessionNoticesInput, *, caller: str) -> SessionNoticesOutput:
        """The caller's pending notices; with `drain`, acknowledged (R-N3)."""
        with _service_errors():
            return session_notices(self.svc, given, _checked(caller))

    def session_watch(self, given: SessionWatchInput, *, caller: str) -> SessionWatchOutput:
        """The caller watches a visible session (R-W2)."""
        with _service_errors():
            return session_watch(self.svc, self._view(caller), given, caller)

    def session_unwatch(self, given: SessionUnwatchInput, *, caller: str) -> SessionUnwatchOutput:
        """The caller stops watching a visible session (R-W6)."""
        with _service_errors():
            return session_unwatch(self.svc, self._view(caller), given, caller)

    def _view(self, caller: str) -> Visibility:
        return Visibility.of(self.svc, self.svc.visibility, _checked(caller))


def _checked(caller: str) -> str:
    """The caller's key, or `invalid_caller`: the host's mistake, never the agent's."""
    try:
        check_key(caller)
    except InvalidKeyError:
        raise ToolError(INVALID_CALLER, "the caller must be a session key") from None
    return caller


def _refuse_constant(name: str) -> Any:
    """JSON's grammar has no NaN or Infinity, which Python's decoder would otherwise read."""
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    decoded = dict(pairs)
    if len(decoded) != len(pairs):
        raise ValueError("a repeated key")
    return decoded


def decoded(arguments: object) -> object:
    """The arguments object: JSON text as a model wrote it is decoded (an empty text is `{}`,
    as the OpenAI Agents SDK reads it); anything else is passed on for validation."""
    if isinstance(arguments, bytes | bytearray):
        try:
            arguments = arguments.decode()
        except UnicodeDecodeError:
            raise _malformed("not UTF-8") from None
    if not isinstance(arguments, str):
        return arguments
    if not arguments.strip():
        return {}
    try:
        return json.loads(
            arguments, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys
        )
    except json.JSONDecodeError as error:
        raise _malformed(f"{error.msg} at line {error.lineno} column {error.colno}") from None
    except (ValueError, RecursionError) as error:  # NaN, a repeated key, absurd nesting
        reason = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        raise _malformed(reason) from None


def _malformed(reason: str) -> ToolError:
    message = f"the arguments must be a JSON object; got malformed JSON ({reason})"
    return ToolError(INVALID_INPUT, message, "arguments")


@contextmanager
def _service_errors(field: str = "sessionKey") -> Iterator[None]:
    """Turn the service's typed errors into tool errors."""
    try:
        yield
    except SessionAwarenessError as error:
        raise from_service(error, field) from None
