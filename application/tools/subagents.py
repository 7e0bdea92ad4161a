"""`subagents`: the caller's tree with its runs, and cancelling a run inside it through the
host's canceller (R-T1, R-T2).

The tree is the sessions the caller spawned, transitively, as far as the caller may see them.
A run is named by its `runId`; one outside the caller's tree, or in a session it may not see,
reads exactly like a run id that names nothing. The cancellation itself is recorded only when
the host reports the run's end (`record_run_terminal(..., outcome="cancelled")`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from session_awareness.application.ports import SessionRow
from session_awareness.application.tools.inputs import DEFAULT_RECENT_MINUTES, SubagentsInput
from session_awareness.application.tools.outputs import (
    Subagent,
    SubagentsCancelOutput,
    SubagentsListOutput,
)
from session_awareness.application.tools.tool_errors import (
    CANCEL_FAILED,
    INVALID_INPUT,
    NOT_CONFIGURED,
    UNKNOWN_RUN,
    ToolError,
)
from session_awareness.application.tools.visibility import Visibility, tree_of
from session_awareness.domain.signals import to_ms
from session_awareness.logs import get_logger

if TYPE_CHECKING:
    from session_awareness.application.tools.host import ToolHost

log = get_logger()
CANCEL_REFUSED = "the run could not be cancelled"


def subagents(
    svc: ToolHost, view: Visibility, given: SubagentsInput, caller: str
) -> SubagentsListOutput | SubagentsCancelOutput:
    if given.action == "cancel":
        if given.run_id is None:
            raise ToolError(INVALID_INPUT, 'runId is required for action "cancel"', "runId")
        return cancel(svc, view, given.run_id, caller)
    if given.run_id is not None:
        raise ToolError(INVALID_INPUT, 'runId is only for action "cancel"', "runId")
    minutes = given.recent_minutes or DEFAULT_RECENT_MINUTES
    since = to_ms(svc.clock() - timedelta(minutes=minutes))
    rows = tree_runs(svc, view, caller)
    running = sorted(
        (r for r in rows if r.run_status == "running"),
        key=lambda r: (-(r.run_started_at or 0), r.key),
    )
    ended = sorted(
        (r for r in rows if r.run_status != "running" and (r.run_ended_at or 0) >= since),
        key=lambda r: (-(r.run_ended_at or 0), r.key),
    )
    return SubagentsListOutput(
        subagents=[subagent(row) for row in running + ended], visibility=view.note
    )


def cancel(svc: ToolHost, view: Visibility, run_id: str, caller: str) -> SubagentsCancelOutput:
    """Ask the host to cancel `run_id`, the running run of a session in the caller's tree."""
    rows = [row for row in tree_runs(svc, view, caller, read=False) if row.run_id == run_id]
    if not rows:
        raise ToolError(UNKNOWN_RUN, f"Unknown runId: {run_id}", "runId")
    row = rows[0]
    if row.run_status != "running":
        raise ToolError(INVALID_INPUT, f"runId {run_id} is not running ({row.run_status})", "runId")
    if svc.canceller is None:
        raise ToolError(
            NOT_CONFIGURED, 'subagents "cancel" needs a canceller: open_service(..., canceller=...)'
        )
    try:
        svc.canceller(caller, row.key, run_id)
    except Exception as error:  # noqa: BLE001 -- the host refused or failed: a typed error
        log.warning("tool_cancel_failed", caller=caller, child=row.key,
                    error_type=type(error).__name__)  # fmt: skip
        raise ToolError(CANCEL_FAILED, CANCEL_REFUSED, "runId") from None
    log.info("tool_cancel_requested", caller=caller, child=row.key, run_id=run_id)
    return SubagentsCancelOutput(runId=run_id)


def tree_runs(
    svc: ToolHost, view: Visibility, caller: str, *, read: bool = True
) -> list[SessionRow]:
    """The visible sessions the caller spawned, transitively, that ran as a child."""
    me = (view.agent_id, caller)
    tree = tree_of(svc, me) - {me}
    if not tree:
        return []
    rows = svc.session_rows(keys=list({key for _, key in tree}))
    return [
        row
        for row in rows
        if (row.agent_id, row.key) in tree
        and row.run_status is not None
        and view.admits(row, read=read)
    ]


def subagent(row: SessionRow) -> Subagent:
    return Subagent.model_validate(
        {
            "sessionKey": row.key,
            "agentId": row.agent_id,
            "label": row.label,
            "parentSessionKey": row.parent_key,
            "runId": row.run_id,
            "runStatus": row.run_status,
            "lastRunAborted": bool(row.last_run_aborted),
            "spawnedAt": row.run_started_at,
            "endedAt": row.run_ended_at,
        }
    )
