"""The tools' output models: the documents' camelCase names; optional fields are left out when
absent, except a row's `label` and `parentSessionKey`, which are null (R-S2, R-S5)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


def _absent(value: object) -> bool:
    return value is None


#: A run's status: running while the spawned run has no terminal report, else its outcome.
RunStatus = Literal["running", "completed", "failed", "timeout", "cancelled"]


class ToolOutput(BaseModel):
    model_config = ConfigDict(frozen=True, serialize_by_alias=True)

    def to_json(self) -> dict[str, Any]:
        """The JSON-ready dict a host hands back to the agent."""
        return self.model_dump(mode="json")


class Payload(ToolOutput):
    outcome: Literal["error", "timeout", "cancelled"] | None = Field(
        default=None, alias="outcome", exclude_if=_absent
    )
    channel: str | None = Field(default=None, alias="channel", exclude_if=_absent)
    turns: int | None = Field(default=None, alias="turns", exclude_if=_absent)


class StateChange(ToolOutput):
    """One event of the signal log as `changesSince` shows it (R-S2)."""

    sequence: int = Field(alias="sequence")
    kind: str = Field(alias="kind")
    actor_type: str = Field(alias="actorType")
    occurred_at: int = Field(alias="occurredAt")
    summary: str = Field(alias="summary")
    actor_id: str | None = Field(default=None, alias="actorId", exclude_if=_absent)
    run_id: str | None = Field(default=None, alias="runId", exclude_if=_absent)
    payload: Payload | None = Field(default=None, alias="payload", exclude_if=_absent)


class StateChanges(ToolOutput):
    events: list[StateChange] = Field(alias="events")
    truncated: bool = Field(alias="truncated")
    earliest_available_sequence: int = Field(alias="earliestAvailableSequence")
    history_gap: bool = Field(alias="historyGap")


class SessionStatusOutput(ToolOutput):
    """`{sessionKey, stateVersion, stateChanges?}` (R-S1)."""

    session_key: str = Field(alias="sessionKey")
    state_version: int = Field(alias="stateVersion")
    state_changes: StateChanges | None = Field(
        default=None, alias="stateChanges", exclude_if=_absent
    )


class SessionRow(ToolOutput):
    """One `sessions_list` row (`queries.list_row`); `stateVersion` only when it is > 0
    (R-S5); `channel`, `runStatus` and `lastRunAborted` only when the log knows them."""

    session_key: str = Field(alias="sessionKey")
    agent_id: str = Field(alias="agentId")
    kind: str = Field(alias="kind")
    label: str | None = Field(alias="label")
    parent_session_key: str | None = Field(alias="parentSessionKey")
    child_session_keys: list[str] = Field(alias="childSessionKeys")
    updated_at: int = Field(alias="updatedAt")
    state_version: int | None = Field(default=None, alias="stateVersion", exclude_if=_absent)
    channel: str | None = Field(default=None, alias="channel", exclude_if=_absent)
    pinned: bool = Field(default=False, alias="pinned")
    archived: bool = Field(default=False, alias="archived")
    run_status: RunStatus | None = Field(default=None, alias="runStatus", exclude_if=_absent)
    last_run_aborted: bool | None = Field(default=None, alias="lastRunAborted", exclude_if=_absent)


class VisibilityNote(ToolOutput):
    """The documents' metadata on a restricted view: the effective mode and a warning that
    the rows may be scope-limited (R-T2)."""

    mode: Literal["self", "tree", "agent"] = Field(alias="mode")
    warning: str = Field(alias="warning")


class SessionsListOutput(ToolOutput):
    """The visible rows, most recently updated first; `visibility` when the view is
    restricted (every mode but `all`)."""

    sessions: list[SessionRow] = Field(alias="sessions")
    visibility: VisibilityNote | None = Field(default=None, alias="visibility", exclude_if=_absent)


#: A send's status: `accepted` (handed over, no wait), or after waiting for the reply `ok`
#: (with it), `no_reply`, `timeout` or `error`.
SendStatus = Literal["accepted", "ok", "no_reply", "timeout", "error"]
SEND_STATUSES = frozenset(("accepted", "ok", "no_reply", "timeout", "error"))


class SessionsSendOutput(ToolOutput):
    """Sent to `sessionKey`, the session that actually received the message; `reply` with
    status `ok`; `watched` on every result after a successful dispatch when `watch` was
    passed (R-W2, R-T1)."""

    status: SendStatus = Field(default="accepted", alias="status")
    session_key: str = Field(alias="sessionKey")
    reply: str | None = Field(default=None, alias="reply", exclude_if=_absent)
    watched: bool | None = Field(default=None, alias="watched", exclude_if=_absent)


class SessionsSpawnOutput(ToolOutput):
    """The host accepted the spawn and named the child and its run; the spawn edge is
    recorded on the child, and the caller, its parent, watches it (R-L5, R-W1)."""

    status: Literal["accepted"] = Field(default="accepted", alias="status")
    child_session_key: str = Field(alias="childSessionKey")
    run_id: str = Field(alias="runId")


class Subagent(ToolOutput):
    """One session of the caller's tree with its latest run: when it was spawned, and when
    it ended unless it is running."""

    session_key: str = Field(alias="sessionKey")
    agent_id: str = Field(alias="agentId")
    label: str | None = Field(alias="label")
    parent_session_key: str | None = Field(alias="parentSessionKey")
    run_id: str | None = Field(alias="runId")
    run_status: RunStatus = Field(alias="runStatus")
    last_run_aborted: bool = Field(alias="lastRunAborted")
    spawned_at: int | None = Field(default=None, alias="spawnedAt", exclude_if=_absent)
    ended_at: int | None = Field(default=None, alias="endedAt", exclude_if=_absent)


class SubagentsListOutput(ToolOutput):
    """The caller's tree: running sessions first (latest spawned first), then runs that
    ended within `recentMinutes` (latest ended first)."""

    subagents: list[Subagent] = Field(alias="subagents")
    visibility: VisibilityNote | None = Field(default=None, alias="visibility", exclude_if=_absent)


class SubagentsCancelOutput(ToolOutput):
    """The host accepted to cancel the run; its end is recorded when the host reports it."""

    status: Literal["requested"] = Field(default="requested", alias="status")
    run_id: str = Field(alias="runId")
