"""The transcript source for local Claude Code JSONL transcripts (`sessions_history`, ADR 018).

The same files and format as the upstream provider (`claude_code.py`): one JSON object a line,
only complete lines (a line still being written is left for the next read). The file is read
backward from its last complete line in blocks, at most `max_bytes` per call; what lies
beyond is reported as unread, never skipped silently. Rows shown are the `user` and
`assistant` messages that are not meta, not a sidechain and not a compaction summary; thinking
blocks are dropped here, tool calls and results are handed on as such (the view keeps them only
when asked). Nothing read is stored or logged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from session_awareness.application.transcript_port import (
    UNREAD,
    OlderRowsUnread,
    TranscriptBlock,
    TranscriptRow,
    TranscriptSession,
)
from session_awareness.infrastructure.claude_code import (
    CATALOG_ID,
    NOT_HUMAN_PREFIXES,
    complete_end,
    epoch_ms,
    parse_row,
)
from session_awareness.logs import get_logger

log = get_logger()

#: How much of a transcript one `sessions_history` call may read, newest first.
MAX_READ_BYTES = 8 << 20
_BLOCK = 1 << 16
_COMPACTION = NOT_HUMAN_PREFIXES[0]


class ClaudeCodeTranscriptSource:
    """Reads the transcripts of sessions noted (or adopted) with a Claude Code JSONL path."""

    source = CATALOG_ID

    def __init__(self, *, max_bytes: int = MAX_READ_BYTES) -> None:
        self.max_bytes = max_bytes

    def newest_first(
        self, session: TranscriptSession
    ) -> Iterator[TranscriptRow | OlderRowsUnread] | None:
        known = session.transcript
        if known is None or known.source != CATALOG_ID:
            return None
        path = Path(known.ref).expanduser()
        try:
            file = path.open("rb")
        except OSError as error:  # gone, unreadable: no transcript to show
            log.info("claude_transcript_unreadable", session_key=session.key,
                     error_type=type(error).__name__)  # fmt: skip
            return None
        return self._rows(file)

    def _rows(self, file: IO[bytes]) -> Iterator[TranscriptRow | OlderRowsUnread]:
        with file:
            file.seek(0, 2)
            end = complete_end(file, file.tell())
            for item in lines_newest_first(file, end, self.max_bytes):
                if isinstance(item, OlderRowsUnread):
                    yield item
                    return
                offset, line = item
                row = parse_row(line)
                shown = transcript_row(row, offset) if row is not None else None
                if shown is not None:
                    yield shown


def lines_newest_first(
    file: IO[bytes], end: int, budget: int
) -> Iterator[tuple[int, bytes] | OlderRowsUnread]:
    """The complete lines before `end` (a line boundary), newest first, with their offsets;
    `UNREAD` when `budget` bytes were read and older lines remain."""
    position, pending, read = end, b"", 0
    while position > 0:
        if read >= budget:
            yield UNREAD
            return
        start = max(0, position - min(_BLOCK, budget - read))
        file.seek(start)
        pending = file.read(position - start) + pending
        read += position - start
        position = start
        cut = pending.rfind(b"\n", 0, len(pending) - 1)
        while cut >= 0:
            line = pending[cut + 1 :]
            pending = pending[: cut + 1]
            yield position + cut + 1, line
            cut = pending.rfind(b"\n", 0, len(pending) - 1)
    if pending:
        yield 0, pending


def transcript_row(row: Mapping[str, Any], offset: int) -> TranscriptRow | None:
    """A transcript line as a row of the view, or None for what is not a message shown."""
    kind = row.get("type")
    if kind not in ("user", "assistant") or row.get("isMeta") or row.get("isSidechain"):
        return None
    if row.get("isCompactSummary"):
        return None
    message = row.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        if content.startswith(_COMPACTION):
            return None
        blocks: tuple[TranscriptBlock, ...] = (TranscriptBlock("text", content),)
    elif isinstance(content, list):
        blocks = tuple(b for b in map(_block, content) if b is not None)
    else:
        return None
    uuid = row.get("uuid")
    position = uuid if isinstance(uuid, str) and uuid else f"offset:{offset}"
    role = "user" if kind == "user" else "assistant"
    return TranscriptRow(position, role, blocks, epoch_ms(row.get("timestamp")))


def _block(block: object) -> TranscriptBlock | None:
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return TranscriptBlock("text", block["text"])
    if kind == "tool_use":
        name = block.get("name")
        arguments = json.dumps(block.get("input"), ensure_ascii=False, default=str)
        return TranscriptBlock("toolCall", arguments, name if isinstance(name, str) else None)
    if kind == "tool_result":
        return TranscriptBlock("toolResult", _result_text(block.get("content")),
                               is_error=block.get("is_error") is True)  # fmt: skip
    return None  # thinking, redacted thinking, images: not shown


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        return "\n".join(t for t in texts if isinstance(t, str))
    return ""
