"""`sessions_history`: a bounded, safety-filtered page of a visible session's transcript
(R-T1, R-T2). An invisible session reads exactly as an unknown one; a visible session
no transcript source can read answers `not_available`, the same for every such session.
Paging: `before` names a message's position (a page's `nextBefore`), stable while the
transcript grows; `offset` counts messages (R-T4)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from session_awareness.application.tools.inputs import SessionKey, ToolInput, named
from session_awareness.application.tools.outputs import ToolOutput, _absent
from session_awareness.application.tools.tool_errors import ToolError
from session_awareness.application.tools.visibility import Visibility
from session_awareness.application.transcript_view import DEFAULT_LIMIT, MAX_POSITION_CHARS
from session_awareness.application.transcripts import TranscriptNotAvailableError
from session_awareness.domain.signals import MAX_SAFE_INTEGER

if TYPE_CHECKING:
    from session_awareness.application.tools.host import ToolHost

NOT_AVAILABLE = "not_available"


class SessionsHistoryInput(ToolInput):
    session_key: SessionKey = Field(
        alias="sessionKey",
        description='The session whose transcript to read; "current" is your own.',
    )
    limit: int | None = Field(
        default=None,
        alias="limit",
        ge=1,
        le=MAX_SAFE_INTEGER,
        description=f"At most this many messages, the newest (default {DEFAULT_LIMIT}).",
    )
    offset: int | None = Field(
        default=None,
        alias="offset",
        ge=0,
        le=MAX_SAFE_INTEGER,
        description="Skip this many newer messages (counted from the newest, or from before); "
        "pass 0 to get hasMore, nextOffset and nextBefore.",
    )
    before: str | None = Field(
        default=None,
        alias="before",
        min_length=1,
        max_length=MAX_POSITION_CHARS,
        description="Only messages older than the one at this position: pass each page's "
        "nextBefore to page backward, never repeating or skipping a message while the "
        "transcript grows.",
    )
    include_tools: bool | None = Field(
        default=None,
        alias="includeTools",
        description="Also show tool calls and tool results (default false).",
    )


class HistoryBlock(ToolOutput):
    type: Literal["text", "toolCall", "toolResult"] = Field(alias="type")
    text: str | None = Field(default=None, alias="text", exclude_if=_absent)
    name: str | None = Field(default=None, alias="name", exclude_if=_absent)
    arguments: str | None = Field(default=None, alias="arguments", exclude_if=_absent)
    is_error: bool | None = Field(default=None, alias="isError", exclude_if=_absent)


class HistoryMessage(ToolOutput):
    position: str = Field(alias="position")
    role: Literal["user", "assistant"] = Field(alias="role")
    timestamp: int | None = Field(default=None, alias="timestamp", exclude_if=_absent)
    content: list[HistoryBlock] = Field(alias="content")


class SessionsHistoryOutput(ToolOutput):
    """The page, oldest first, with what the filter and the bounds did to it."""

    session_key: str = Field(alias="sessionKey")
    messages: list[HistoryMessage] = Field(alias="messages")
    truncated: bool = Field(alias="truncated")
    dropped_messages: int = Field(alias="droppedMessages")
    skipped_lines: int = Field(alias="skippedLines")
    content_truncated: bool = Field(alias="contentTruncated")
    content_redacted: bool = Field(alias="contentRedacted")
    bytes: int = Field(alias="bytes")
    offset: int | None = Field(default=None, alias="offset", exclude_if=_absent)
    has_more: bool | None = Field(default=None, alias="hasMore", exclude_if=_absent)
    next_offset: int | None = Field(default=None, alias="nextOffset", exclude_if=_absent)
    next_before: str | None = Field(default=None, alias="nextBefore", exclude_if=_absent)


def history(
    svc: ToolHost, view: Visibility, given: SessionsHistoryInput, caller: str
) -> SessionsHistoryOutput:
    """The page of a visible session's transcript."""
    key = named(given.session_key, caller)
    row = view.find(svc, key)
    try:
        page: dict[str, Any] = svc.sessions_history(
            row.key,
            limit=given.limit,
            offset=given.offset,
            include_tools=bool(given.include_tools),
            agent_id=row.agent_id,
            before=given.before,
        )
    except TranscriptNotAvailableError as error:
        raise ToolError(NOT_AVAILABLE, str(error), "sessionKey") from None
    return SessionsHistoryOutput.model_validate(page)
