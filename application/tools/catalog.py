"""The catalog of session tools: name, description for the model, and input model (R-T1–R-T3)."""

from __future__ import annotations

from dataclasses import dataclass

from session_awareness.application.tools.inputs import (
    SessionsListInput,
    SessionsSendInput,
    SessionsSpawnInput,
    SessionStatusInput,
    SubagentsInput,
    ToolInput,
)
from session_awareness.application.tools.sessions_history import SessionsHistoryInput


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    input: type[ToolInput]


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
        ),
        Tool(
            "sessions_spawn",
            "Spawn an isolated child session for a background task. Non-blocking: returns at "
            "once with the childSessionKey and runId the host chose. You become the child's "
            "parent and get one notice when another actor later changes it. Options: runtime "
            '"subagent" (default) or "acp"; model and thinking overrides; context "isolated" '
            '(default) or "fork" (subagent only); sandbox "inherit" or "require"; thread.',
            SessionsSpawnInput,
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
        ),
    )
}
