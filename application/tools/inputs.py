"""The tools' input models: camelCase fields, unknown fields refused, strict types (R-T1).

Strictness, decided once for every tool: a JSON string never stands in for a number or a
boolean, a boolean never stands in for a number, and an integer field refuses floats (even
`1.0`). The one exception is `changesSince`, which follows R-S4 through the service's own
`parse_changes_since`: an integer or a string of digits (an integral float such as `2.0` is read
as `2`, as the embedding API does); `1.5`, NaN, negatives, booleans and numbers beyond 2^53 − 1
are refused with the rules' text.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from session_awareness.application.queries import MAX_ACTIVE_MINUTES
from session_awareness.application.status import parse_changes_since
from session_awareness.domain.keys import MAX_KEY_LENGTH, check_key, is_thread_scoped
from session_awareness.domain.signals import (
    MAX_LABEL_LENGTH,
    MAX_SAFE_INTEGER,
    has_control,
    one_line,
)

#: Error types our validators raise; the reported message comes from `RULES` (or, for a
#: thread-scoped target, from `THREAD_SCOPED_RULE`), never from pydantic's wording.
INVALID, THREAD_SCOPED = "invalid", "thread_scoped"
CURRENT = "current"
#: `activeMinutes` beyond a century would overflow the clock arithmetic.
#: How far back `subagents` lists ended runs unless told (minutes).
DEFAULT_RECENT_MINUTES = 30
SessionKind = Literal["main", "group", "cron", "hook", "node", "other", "subagent"]


def _session_key(value: str) -> str:
    try:
        check_key(value)
    except ValueError:
        raise PydanticCustomError(INVALID, "not a session key") from None
    return value


def _send_target(value: str) -> str:
    if is_thread_scoped(value):
        raise PydanticCustomError(THREAD_SCOPED, "a thread-scoped key")
    return value


def _single_line(value: str) -> str:
    if not value.strip() or one_line(value, limit=MAX_SAFE_INTEGER) != value:
        raise PydanticCustomError(INVALID, "not a single line")
    return value


def _no_control(value: str) -> str:
    if has_control(value):
        raise PydanticCustomError(INVALID, "holds a control character")
    return value


def _changes_since(value: object) -> int:
    try:
        return parse_changes_since(value)
    except ValueError:  # InvalidChangesSinceError, or int() refusing a huge digit string
        raise PydanticCustomError(INVALID, "not a non-negative integer") from None


SessionKey = Annotated[
    str,
    Field(min_length=1, max_length=MAX_KEY_LENGTH),
    AfterValidator(_session_key),
]
SendTargetKey = Annotated[SessionKey, AfterValidator(_send_target)]
AgentId = Annotated[
    str,
    Field(min_length=1, max_length=MAX_KEY_LENGTH, pattern=r"^[^:\s\x00-\x1f\x7f]+$"),
    AfterValidator(_no_control),
]
Label = Annotated[
    str, Field(min_length=1, max_length=MAX_LABEL_LENGTH), AfterValidator(_single_line)
]
ChangesSince = Annotated[
    int,
    PlainValidator(_changes_since),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 0, "maximum": MAX_SAFE_INTEGER},
                {"type": "string", "pattern": "^0*[0-9]{1,16}$"},
            ],
            "description": "Return the events after this state version (an integer, or a "
            "string of digits).",
        }
    ),
]


def named(session_key: str, caller: str) -> str:
    """The key a tool's `sessionKey` names: `"current"` is the caller's own session (R-T1)."""
    return caller if session_key == CURRENT else session_key


class ToolInput(BaseModel):
    """Inputs refuse unknown fields and coerce nothing (`extra="forbid"`, strict). A field
    given as `null` is read as not given, the convention of strict function calling, where
    every key is present (`{"sessionKey": null}` is the default, "current")."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, given: Any) -> Any:
        """Only a field the input has may be `null`: an unknown one is left for `extra=
        "forbid"` to refuse, or `{"sesionKey": null}` would pass where `{"sesionKey": 1}` is
        refused. A field is known by its alias, the name agents send; its Python name is not
        accepted (`populate_by_name` is off), so a `null` under it is unknown too."""
        if isinstance(given, dict):
            known = {field.alias or name for name, field in cls.model_fields.items()}
            return {
                name: value
                for name, value in given.items()
                if value is not None or name not in known
            }
        return given


class SessionStatusInput(ToolInput):
    session_key: SessionKey = Field(
        default=CURRENT,
        alias="sessionKey",
        description='The session to report on; "current" (the default) is the caller.',
    )
    changes_since: ChangesSince | None = Field(default=None, alias="changesSince")
    agent_id: AgentId | None = Field(
        default=None,
        alias="agentId",
        description="The agent a bare sessionKey (such as global) belongs to; without it, a "
        "bare key is your own agent's.",
    )


class SessionsListInput(ToolInput):
    kinds: list[SessionKind] | None = Field(
        default=None, alias="kinds", max_length=7, description="Only sessions of these kinds."
    )
    label: Label | None = Field(default=None, alias="label", description="Exact label.")
    agent_id: AgentId | None = Field(default=None, alias="agentId", description="Exact agent id.")
    search: Annotated[str, AfterValidator(_no_control)] | None = Field(
        default=None,
        alias="search",
        min_length=1,
        max_length=MAX_KEY_LENGTH,
        description="Case-insensitive substring of the session key or label.",
    )
    active_minutes: float | None = Field(
        default=None,
        alias="activeMinutes",
        gt=0,
        le=MAX_ACTIVE_MINUTES,
        allow_inf_nan=False,
        description="Only sessions updated within this many minutes.",
    )
    limit: int | None = Field(
        default=None,
        alias="limit",
        ge=1,
        le=MAX_SAFE_INTEGER,
        description="At most this many rows, most recently updated first.",
    )
    archived: bool | None = Field(
        default=None,
        alias="archived",
        description="true: list the archived sessions instead of the active ones (default false).",
    )


class SubagentsInput(ToolInput):
    action: Literal["list", "cancel"] | None = Field(
        default=None,
        alias="action",
        description='"list" (the default): the sessions you spawned, transitively, with their '
        'runs; "cancel": ask the host to cancel the run `runId` names.',
    )
    run_id: Label | None = Field(
        default=None,
        alias="runId",
        description='The run to cancel (action "cancel"): a runId the list returned.',
    )
    recent_minutes: float | None = Field(
        default=None,
        alias="recentMinutes",
        gt=0,
        le=MAX_ACTIVE_MINUTES,
        allow_inf_nan=False,
        description=f"List runs that ended within this many minutes (default "
        f"{DEFAULT_RECENT_MINUTES}) after the active ones.",
    )


class SessionsSendInput(ToolInput):
    session_key: SendTargetKey | None = Field(
        default=None,
        alias="sessionKey",
        description="The target session's key (never a thread-scoped key).",
    )
    label: Label | None = Field(
        default=None, alias="label", description="The label of exactly one visible session."
    )
    agent_id: AgentId | None = Field(
        default=None, alias="agentId", description="Send to that agent's main session."
    )
    message: str = Field(
        alias="message", min_length=1, description="The message to deliver; never stored."
    )
    watch: bool | None = Field(
        default=None,
        alias="watch",
        description="Also watch the session that received the message (notices on later "
        "changes by other actors).",
    )
    timeout_seconds: float | None = Field(
        default=None,
        alias="timeoutSeconds",
        ge=0,
        le=MAX_SAFE_INTEGER,
        allow_inf_nan=False,
        description="How long the host may wait for a reply; 0 = fire-and-forget.",
    )


#: How long a spawn's task may be: a prompt for the child, handed to the host, never stored.
MAX_TASK_LENGTH = 65_536
#: How long a model name or a thinking level may be.
MAX_OPTION_LENGTH = 200
#: Line breaks and tabs a task may hold; every other control character is refused.
_TASK_WHITESPACE = str.maketrans("", "", "\n\r\t")


def _task(value: str) -> str:
    if not value.strip() or has_control(value.translate(_TASK_WHITESPACE)):
        raise PydanticCustomError(INVALID, "not a task")
    return value


Task = Annotated[str, Field(min_length=1, max_length=MAX_TASK_LENGTH), AfterValidator(_task)]
Option = Annotated[
    str, Field(min_length=1, max_length=MAX_OPTION_LENGTH), AfterValidator(_single_line)
]


#: What a spawn request holds for an option the agent left out.
SPAWN_DEFAULTS: dict[str, object] = {
    "runtime": "subagent",
    "context": "isolated",
    "sandbox": "inherit",
    "thread": False,
}


class SessionsSpawnInput(ToolInput):
    """What an agent asks of a spawn; the host starts the child and names it and its run."""

    task: Task = Field(alias="task", description="What the child session is to do.")
    label: Label | None = Field(default=None, alias="label", description="A label for the child.")
    runtime: Literal["subagent", "acp"] | None = Field(
        default=None,
        alias="runtime",
        description='"subagent" (the default) or "acp" for an external harness agent.',
    )
    model: Option | None = Field(
        default=None, alias="model", description="A model override for the child."
    )
    thinking: Option | None = Field(
        default=None, alias="thinking", description="A thinking-level override for the child."
    )
    context: Literal["isolated", "fork"] | None = Field(
        default=None,
        alias="context",
        description='"isolated" (the default): a clean child; "fork": the child starts from '
        'your transcript (only with runtime "subagent").',
    )
    sandbox: Literal["inherit", "require"] | None = Field(
        default=None,
        alias="sandbox",
        description='"inherit" (the default) your sandboxing, or "require" it for the child.',
    )
    thread: bool | None = Field(
        default=None, alias="thread", description="Bind the child to a chat thread (default false)."
    )

    def request(self) -> dict[str, object]:
        """The validated request the host's spawner gets, with the documents' camelCase names
        and every default filled in; options left out stay out."""
        given = self.model_dump(by_alias=True, exclude_none=True)
        return {**given, **{name: given.get(name, value) for name, value in SPAWN_DEFAULTS.items()}}


_KEY = "must be a session key (1 to 512 characters, no surrounding whitespace, no line breaks)"
_LINE = "must be one line of 1 to 120 characters, without surrounding or repeated whitespace"
#: The rule each field breaks, whatever pydantic found wrong with it (R-T1, R-S4).
RULES: dict[str, str] = {
    "sessionKey": f"sessionKey {_KEY}",
    "changesSince": "changesSince must be a non-negative integer",
    "kinds": "kinds must be an array of: main, group, cron, hook, node, other, subagent",
    "label": f"label {_LINE}",
    "task": f"task must be a non-blank string of at most {MAX_TASK_LENGTH} characters, "
    "without control characters other than line breaks and tabs",
    "runtime": 'runtime must be "subagent" or "acp"',
    "model": f"model must be one line of 1 to {MAX_OPTION_LENGTH} characters",
    "thinking": f"thinking must be one line of 1 to {MAX_OPTION_LENGTH} characters",
    "context": 'context must be "isolated" or "fork" (fork only with runtime "subagent")',
    "sandbox": 'sandbox must be "inherit" or "require"',
    "thread": "thread must be a boolean (true or false)",
    "agentId": "agentId must be an agent id (1 to 512 characters, no ':' and no whitespace)",
    "search": "search must be a string of 1 to 512 characters, without control characters",
    "activeMinutes": (
        f"activeMinutes must be a positive number of minutes, at most {MAX_ACTIVE_MINUTES}"
    ),
    "limit": f"limit must be a positive integer, at most {MAX_SAFE_INTEGER}",
    "message": "message must be a non-empty string",
    "watch": "watch must be a boolean (true or false)",
    "drain": "drain must be a boolean (true or false)",
    "archived": "archived must be a boolean (true or false)",
    "action": 'action must be "list" or "cancel"',
    "runId": f"runId {_LINE}",
    "recentMinutes": (
        f"recentMinutes must be a positive number of minutes, at most {MAX_ACTIVE_MINUTES}"
    ),
    "offset": f"offset must be a non-negative integer, at most {MAX_SAFE_INTEGER}",
    "includeTools": "includeTools must be a boolean (true or false)",
    "timeoutSeconds": f"timeoutSeconds must be a non-negative number, at most {MAX_SAFE_INTEGER}",
}
THREAD_SCOPED_RULE = (
    "sessionKey must not be thread-scoped (…:thread:<id>): send to the parent channel session"
)
