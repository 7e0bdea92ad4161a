"""The catalog of tools: name, description for the model, input model and the host port the
tool needs, if any (R-T1–R-T3). `TOOLS` are the session tools every host's `svc.tools` answers
and `tool_schemas` exports; `NOTICE_TOOLS` put the caller's own notices and watches in reach of
an agent that cannot call the embedding API (the MCP server offers them, `offered_tools`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from session_awareness.application.tools.inputs import (
    SessionsListInput,
    SessionsSendInput,
    SessionsSpawnInput,
    SessionStatusInput,
    SubagentsInput,
    ToolInput,
)
from session_awareness.application.tools.notice_tools import (
    SessionNoticesInput,
    SessionUnwatchInput,
    SessionWatchInput,
)
from session_awareness.application.tools.sessions_history import SessionsHistoryInput

if TYPE_CHECKING:
    from session_awareness.application.tools.host import ToolHost


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    input: type[ToolInput]
    #: The service attribute holding the host port the tool cannot work without, if any.
    #: `subagents` needs none: its list needs no port, and its cancel answers
    #: `not_configured` without a canceller.
    port: str | None = None


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            "session_status",
            "Report a visible session's stateVersion; with changesSince, the exact state "
            "changes after that version (events, truncated, earliestAvailableSequence, "
            "historyGap). Reconcile with it when a notice says a session changed. "
            'sessionKey "current" (the default) is your own session; a bare sessionKey (such '
            "as global) is your own agent's unless agentId names another.",
            SessionStatusInput,
        ),
        Tool(
            "sessions_list",
            "List the sessions you can see, most recently updated first: key, agent, kind, "
            "label, parent and child sessions, last update, and stateVersion when above 0. "
            "Filter by kinds, exact label, exact agentId, search (a substring of the key or "
            "label), activeMinutes and limit.",
            SessionsListInput,
        ),
        Tool(
            "sessions_send",
            "Send a message to another visible session, chosen by exactly one of sessionKey, "
            "label or agentId (that agent's main session); thread-scoped keys "
            "(…:thread:<id>) are refused. With watch: true you get one notice when another "
            "actor later changes the session that received it.",
            SessionsSendInput,
            port="dispatcher",
        ),
        Tool(
            "sessions_spawn",
            "Spawn an isolated child session for a background task. Non-blocking: returns at "
            "once with the childSessionKey and runId the host chose. You become the child's "
            "parent and get one notice when another actor later changes it. Options: runtime "
            '"subagent" (default) or "acp"; model and thinking overrides; context "isolated" '
            '(default) or "fork" (subagent only); sandbox "inherit" or "require"; thread.',
            SessionsSpawnInput,
            port="spawner",
        ),
        Tool(
            "subagents",
            'action "list" (the default): the sessions you spawned, transitively, each with '
            "its runId, runStatus (running, completed, failed, timeout, cancelled), spawn "
            "time and end time; running ones first, then runs that ended within "
            'recentMinutes (default 30). action "cancel" with a runId from the list: ask the '
            "host to cancel that run (only inside your own tree); its end shows once the "
            "host reports it.",
            SubagentsInput,
        ),
        Tool(
            "sessions_history",
            "Read a visible session's transcript: the newest messages (limit, default 20), "
            "oldest first, safety-filtered (scaffolding and control tokens stripped, "
            "credentials redacted, long texts cut) and bounded. Tool calls and results only "
            "with includeTools: true. Pass offset: 0 for hasMore and nextBefore, then each "
            "nextBefore as before to page backward (stable while the transcript grows). "
            "Answers not_available when the service cannot read that session's transcript.",
            SessionsHistoryInput,
            port="transcript_sources",
        ),
    )
}

NOTICE_TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            "session_notices",
            "Your pending notices: one line per watched session another actor changed, each "
            "naming the session_status call that reconciles it. With drain: true they are "
            "acknowledged once this answer has reached you (drained: true), so the next call "
            "returns only newer changes; an answer that never reached you leaves them pending.",
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


def offered_tools(svc: ToolHost) -> dict[str, Tool]:
    """The session tools whose host ports `svc` has, then the notice tools: what a host that
    serves agents the whole catalog (the MCP server) offers."""
    offered = {
        name: tool
        for name, tool in TOOLS.items()
        if tool.port is None or getattr(svc, tool.port, None)
    }
    return {**offered, **NOTICE_TOOLS}
