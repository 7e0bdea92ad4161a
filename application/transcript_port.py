"""The transcript port: where `sessions_history` reads a session's transcript (R-T1).

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
    """One message: `position` is stable and unique (it names the row across reads, and a
    page's `nextBefore` is one), a short id that is no secret; `at` in epoch ms. The view
    redacts and cuts a position that is not."""

    position: str
    role: Literal["user", "assistant"]
    blocks: tuple[TranscriptBlock, ...]
    at: int | None = None


class OlderRowsUnread:
    """Yielded last by a source that stopped at its read bound: older rows exist, unread."""


UNREAD = OlderRowsUnread()


class UnreadableLine:
    """Yielded by a source in place of a line it could not read (malformed, nested too deep,
    too long): skipped and counted, never spoiling the rest."""


SKIPPED = UnreadableLine()


@runtime_checkable
class TranscriptSource(Protocol):
    def newest_first(
        self, session: TranscriptSession
    ) -> Iterable[TranscriptRow | OlderRowsUnread | UnreadableLine] | None:
        """The session's rows, newest first, read lazily (the caller stops when it has
        enough); `SKIPPED` where a line could not be read; `UNREAD` last when a read bound
        left older rows unread. `None`: this source has no transcript for the session."""
        ...
