"""`sessions_spawn`: the agent gives the task and options, the host's spawner starts the child
and names it and its run, and the service records the spawn edge (R-T1, R-L5, R-W1).

The agent never names the child: no tool input can claim, re-parent or probe a session. What
the spawner answers is the host's word, checked like any input; a spawner that refuses or
fails, or a spawn edge the sessions refuse (a cycle, another parent: R-T3), reads the same to
the agent: `spawn_failed`, with no detail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from session_awareness.application.errors import InvalidArgumentError, SessionAwarenessError
from session_awareness.application.tools.inputs import RULES, SessionsSpawnInput
from session_awareness.application.tools.outputs import SessionsSpawnOutput
from session_awareness.application.tools.tool_errors import (
    INVALID_INPUT,
    NOT_CONFIGURED,
    SPAWN_FAILED,
    ToolError,
)
from session_awareness.application.tools.visibility import Visibility
from session_awareness.domain.keys import InvalidKeyError, agent_of, check_key, is_subagent
from session_awareness.domain.signals import MAX_LABEL_LENGTH, InvalidSignalError, one_line
from session_awareness.logs import get_logger

if TYPE_CHECKING:
    from session_awareness.application.tools.host import ToolHost

log = get_logger()
FAILED = "the child session could not be spawned"


def spawn(
    svc: ToolHost, view: Visibility, given: SessionsSpawnInput, caller: str
) -> SessionsSpawnOutput:
    """Ask the host's spawner for a child of `caller`; record the edge; name child and run."""
    request = given.request()
    if request["context"] == "fork" and request["runtime"] != "subagent":
        raise ToolError(INVALID_INPUT, RULES["context"], "context")
    if svc.spawner is None:
        raise ToolError(
            NOT_CONFIGURED, "sessions_spawn needs a spawner: open_service(..., spawner=...)"
        )
    try:
        answer = svc.spawner(caller, request)
    except Exception as error:  # noqa: BLE001 -- the host refused or failed: a typed error
        # Only the type: an exception's text may quote the task.
        log.warning("tool_spawn_failed", caller=caller, error_type=type(error).__name__)
        raise ToolError(SPAWN_FAILED, FAILED) from None
    child, run_id = _checked(answer, caller)
    agent = agent_of(child) or view.agent_id
    sandboxed = request["sandbox"] == "require" or svc.is_sandboxed(caller, agent_id=view.agent_id)
    if not svc.session_rows(keys=[child], agent_id=agent):  # a child this call opens
        kind = "subagent" if is_subagent(child) else "other"
        try:
            svc.open_session(
                child, agent_id=agent, kind=kind, label=given.label, parent=caller,
                sandboxed=sandboxed or None,
            )  # fmt: skip
        except InvalidArgumentError:  # a parent the child cannot have (R-T3)
            raise _refused(caller, child, "parent_refused") from None
    try:
        sequence = svc.record_child_spawned(child, parent=caller, run_id=run_id, agent_id=agent)
    except SessionAwarenessError:  # a strict service's refusal (R-L9): the rows below decide
        sequence = None
    rows = svc.session_rows(keys=[child], agent_id=agent)
    if not rows or rows[0].parent_key != caller:  # refused (R-T3) or not recorded (R-L8)
        raise _refused(caller, child, "edge_not_recorded")
    if sandboxed:
        svc.open_session(child, agent_id=agent, sandboxed=True)  # a sandbox only narrows
    log.info("tool_spawned", caller=caller, child=child, recorded=sequence is not None)
    return SessionsSpawnOutput(childSessionKey=child, runId=run_id)


def _checked(answer: Any, caller: str) -> tuple[str, str]:
    """The spawner's `(childSessionKey, runId)`, each a valid key and one line of text."""
    try:
        child, run_id = answer
        check_key(child)
        if child == caller:
            raise InvalidKeyError("a session cannot spawn itself")
        if not isinstance(run_id, str) or one_line(run_id, limit=MAX_LABEL_LENGTH) != run_id:
            raise InvalidSignalError("a run id is one line of text")
        if not run_id:
            raise InvalidSignalError("a run id is not blank")
    except (TypeError, ValueError):  # not a pair, a bad key, a bad run id
        log.warning("tool_spawn_unkeyed", caller=caller, got_type=type(answer).__name__)
        raise ToolError(SPAWN_FAILED, FAILED) from None
    return child, run_id


def _refused(caller: str, child: str, reason: str) -> ToolError:
    log.warning("tool_spawn_refused", caller=caller, child=child, reason=reason)
    return ToolError(SPAWN_FAILED, FAILED)
