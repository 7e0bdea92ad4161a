"""The transcript port: where `sessions_history` reads a session's transcript (SPEC R-T1).

A source is asked for one session at a time and answers its rows newest first, or `None` when
it has no transcript for that session. The service stores no transcript content: it reads on
demand and hands the rows to the safety filter (`transcript_view`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

#: A block of a row: text, a tool call (`name`, `text` its arguments as JSON text) or a
#: tool result (`text` its output, `is_error`). Thinking blocks are never handed on.
BlockType = Literal["text", "toolCall", "toolResult"]


@dataclass(frozen=True, slots=True)
class TranscriptRef:
    """Where a transcript is: `source` names its format (`claude-code`), `ref` locates it."""

    source: str
    ref: str


@dataclass(frozen=True, slots=True)
class TranscriptSession:
    """What a source is asked about: the session, and the transcript it is known to have."""

    key: str
    agent_id: str
    transcript: TranscriptRef | None


@dataclass(frozen=True, slots=True)
class TranscriptBlock:
    type: BlockType
    text: str
    name: str | None = None
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class TranscriptRow:
    """One message: `position` is stable (it names the row across reads), `at` in epoch ms."""

    position: str
    role: Literal["user", "assistant"]
    blocks: tuple[TranscriptBlock, ...]
    at: int | None = None


class OlderRowsUnread:
    """Yielded last by a source that stopped at its read bound: older rows exist, unread."""


UNREAD = OlderRowsUnread()


@runtime_checkable
class TranscriptSource(Protocol):
    def newest_first(
        self, session: TranscriptSession
    ) -> Iterable[TranscriptRow | OlderRowsUnread] | None:
        """The session's rows, newest first, read lazily (the caller stops when it has
        enough); `UNREAD` last when a read bound left older rows unread. `None`: this source
        has no transcript for the session."""
        ...
