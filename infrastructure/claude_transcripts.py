"""The transcript source for local Claude Code JSONL transcripts (`sessions_history`, ADR 018).

The same files and format as the upstream provider (`claude_code.py`): one JSON object a line,
only complete lines (a line still being written is left for the next read), and only from a
regular file (opened non-blocking and checked with `fstat`: a FIFO never blocks a call). The
file is read backward from its end in blocks, at most `max_bytes` (8 MiB) per call; what lies
beyond is reported as unread, never skipped silently. A line that cannot be read (longer than
`max_line`, malformed, nested too deep) is passed over and counted; a row is named by its
`uuid` when that is a short, safe, unique id, else by its byte offset. Rows shown are the `user` and
`assistant` messages that are not meta, not a sidechain and not a compaction summary; thinking
blocks are dropped here, tool calls and results are handed on as such (the view keeps them only
when asked). Nothing read is stored or logged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from session_awareness.application.transcript_port import (
    SKIPPED,
    UNREAD,
    OlderRowsUnread,
    TranscriptBlock,
    TranscriptRow,
    TranscriptSession,
    UnreadableLine,
)
from session_awareness.infrastructure.claude_code import (
    CATALOG_ID,
    NOT_HUMAN_PREFIXES,
    epoch_ms,
    open_regular,
    parse_row,
    row_position,
)
from session_awareness.logs import get_logger

log = get_logger()

#: How much of a transcript one `sessions_history` call may read, newest first.
MAX_READ_BYTES = 8 << 20
#: The longest line read; a longer one is skipped (and counted) without being parsed.
MAX_LINE_BYTES = 1 << 20
_BLOCK = 1 << 16
_COMPACTION = NOT_HUMAN_PREFIXES[0]


class LocalTranscriptFile:
    """A transcript source that reads one local file per session, the one noted for it under
    `source`: only a regular file, at most `max_bytes` of it and lines up to `max_line` (R-T4).
    A subclass reads the open file into rows (`_rows`)."""

    source: str
    #: The log event when a noted file cannot be opened (gone, unreadable, not regular).
    unreadable_event: str

    def __init__(self, *, max_bytes: int = MAX_READ_BYTES, max_line: int = MAX_LINE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.max_line = max_line

    def newest_first(
        self, session: TranscriptSession
    ) -> Iterator[TranscriptRow | OlderRowsUnread | UnreadableLine] | None:
        known = session.transcript
        if known is None or known.source != self.source:
            return None
        try:
            file = open_regular(Path(known.ref).expanduser())
        except OSError as error:  # gone, unreadable, not a regular file: none to show
            log.info(self.unreadable_event, session_key=session.key,
                     error_type=type(error).__name__)  # fmt: skip
            return None
        return self._rows(file)

    def _rows(self, file: IO[bytes]) -> Iterator[TranscriptRow | OlderRowsUnread | UnreadableLine]:
        raise NotImplementedError


class ClaudeCodeTranscriptSource(LocalTranscriptFile):
    """Reads the transcripts of sessions noted (or adopted) with a Claude Code JSONL path."""

    source = CATALOG_ID
    unreadable_event = "claude_transcript_unreadable"

    def _rows(self, file: IO[bytes]) -> Iterator[TranscriptRow | OlderRowsUnread | UnreadableLine]:
        with file:
            size = os.fstat(file.fileno()).st_size
            seen: set[str] = set()
            for item in lines_newest_first(file, size, self.max_bytes, self.max_line):
                if not isinstance(item, tuple):
                    yield item
                    continue
                offset, line = item
                row = parse_row(line)
                if row is None:
                    yield SKIPPED
                    continue
                shown = transcript_row(row, offset)
                if shown is not None:
                    if shown.position in seen:  # a repeated uuid: the older row by its offset
                        shown = replace(shown, position=f"offset:{offset}")
                    seen.add(shown.position)
                    yield shown


def lines_newest_first(
    file: IO[bytes], size: int, budget: int, max_line: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, bytes] | OlderRowsUnread | UnreadableLine]:
    """The complete lines of the first `size` bytes, newest first, with their offsets (the
    bytes after the last line end are a line still being written: not a line yet). At most
    `budget` bytes are read, then `UNREAD` if older lines remain; a line longer than
    `max_line` is `SKIPPED`, its bytes dropped as they are read."""
    position, read = size, 0
    pending = b""  # the bytes from `position` to the end of the line being gathered
    started = False  # a line end was seen: before it, bytes are complete lines
    oversized = False  # the line being gathered is longer than `max_line`
    while position > 0:
        if read >= budget:
            yield UNREAD
            return
        start = max(0, position - min(_BLOCK, budget - read))
        file.seek(start)
        chunk = file.read(position - start)
        if len(chunk) != position - start:  # the file shrank under the read
            yield UNREAD
            return
        read, position = read + len(chunk), start
        cut = chunk.rfind(b"\n")
        while cut >= 0:
            piece, chunk = chunk[cut + 1 :], chunk[:cut]
            if oversized:
                yield SKIPPED
            elif started and (piece + pending).strip():
                yield position + cut + 1, piece + pending
            started, pending, oversized = True, b"", False
            cut = chunk.rfind(b"\n")
        if started and not oversized:
            pending = chunk + pending
            if len(pending) > max_line:
                pending, oversized = b"", True
    if oversized:
        yield SKIPPED
    elif pending.strip():
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
    position = row_position(row, offset)
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
