"""The upstream provider for local Claude Code transcripts (R-U3, R-U5, ADR 008).

A transcript is `~/.claude/projects/<project>/<session-uuid>.jsonl`, one JSON object a line.
The marker is a byte offset just past a complete line. A scan reads at most 1 MiB from it and
classifies only complete lines; a single line larger than that blocks the link (no byte is
ever skipped unread) and is logged once. A missing file is `missing`; any other read error is
"nothing this time". Only a regular file is read: it is opened non-blocking and checked with
`fstat` first, so a FIFO or a device in its place never blocks a scan. A line that cannot be
read (malformed, nested deeper than `MAX_JSON_DEPTH`) is passed over and the marker moves past
it; a turn whose `uuid` is not a short, safe id is named by its offset instead.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any
from uuid import UUID

from session_awareness.application.redaction import secret_spans
from session_awareness.application.upstream.provider_ports import (
    UpstreamActivity,
    UpstreamMissing,
    UpstreamProbe,
    UpstreamResult,
    normalise_text,
)
from session_awareness.logs import get_logger

log = get_logger()

CATALOG_ID = "claude-code"
HOST_ID = "local"
UPSTREAM_KIND = "local-transcript"
MAX_SCAN_BYTES = 1 << 20  # R-R3, R-U5
_BACKWARD_BLOCK = 1 << 16
#: The deepest JSON nesting a transcript line may have; a deeper line is not read.
MAX_JSON_DEPTH = 64
#: A row's `uuid` used as its position: short, one token, no secret (else its offset is).
_SAFE_ID = re.compile(r"(?!offset:)[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
#: Rows that are user-typed in form only: a compaction summary and an inter-session message.
NOT_HUMAN_PREFIXES = (
    "This session is being continued from a previous conversation",
    "[Inter-session message",
)


class ClaudeCodeTranscripts:
    """Counts new human turns in local Claude Code transcripts, from each link's marker."""

    catalog_id = CATALOG_ID

    def __init__(self, *, max_bytes: int = MAX_SCAN_BYTES) -> None:
        self.max_bytes = max_bytes
        self._reported: set[tuple[str, int]] = set()  # (path, offset) of lines too large

    def scan(self, probes: Sequence[UpstreamProbe]) -> Mapping[UUID, UpstreamResult | None]:
        return {probe.session_id: self.scan_one(probe) for probe in probes}

    def scan_one(self, probe: UpstreamProbe) -> UpstreamResult | None:
        path = probe.source.upstream_ref
        try:
            with open_regular(Path(path)) as file:
                size = os.fstat(file.fileno()).st_size
                offset = _offset(probe.marker)
                if offset is None or offset > size:
                    if offset is not None:
                        log.warning(
                            "claude_transcript_rebased", path=path, marker=offset, size=size
                        )
                    # Not based yet (or the file shrank): start after its last complete line.
                    return UpstreamActivity(0, str(complete_end(file, size, self.max_bytes)))
                file.seek(offset)
                chunk = file.read(min(self.max_bytes, size - offset))
        except FileNotFoundError:
            return UpstreamMissing()
        except OSError as error:
            log.warning("claude_transcript_read_failed", path=path, error=repr(error))
            return None
        end = chunk.rfind(b"\n") + 1
        if end == 0:
            if len(chunk) >= self.max_bytes:
                self._too_large(path, offset)
                return None
            return UpstreamActivity(0, probe.marker)  # a line still being written
        return count_turns(chunk[:end], offset, probe.own_user_texts)

    def _too_large(self, path: str, offset: int) -> None:
        if (path, offset) not in self._reported:
            self._reported.add((path, offset))
            log.error(
                "claude_transcript_line_too_large", path=path, offset=offset, cap=self.max_bytes
            )


def count_turns(lines: bytes, offset: int, own_texts: frozenset[str]) -> UpstreamActivity:
    """The human turns in complete `lines` read from `offset`; the marker moves past them."""
    turns, newest, position = 0, None, None
    start = offset
    for line in lines.splitlines(keepends=True):
        row = parse_row(line)
        text = human_text(row) if row is not None else None
        if row is not None and text is not None and text not in own_texts:
            turns += 1
            newest, position = row.get("timestamp"), row_position(row, start)
        start += len(line)
    return UpstreamActivity(turns, str(offset + len(lines)), epoch_ms(newest), position)


def human_text(row: Mapping[str, Any]) -> str | None:
    """The normalised text of a row a human typed, else None: a `user` row whose content is
    text (a string or `text` blocks, no `tool_result`), not meta, not a sidechain, not a
    compaction continuation and not an inter-session message."""
    if row.get("type") != "user" or row.get("isMeta") or row.get("isSidechain"):
        return None
    if row.get("isCompactSummary"):
        return None
    message = row.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        blocks = [b for b in content if isinstance(b, dict)]
        if any(b.get("type") == "tool_result" for b in blocks):
            return None
        texts = [b.get("text") for b in blocks if b.get("type") == "text"]
        content = " ".join(t for t in texts if isinstance(t, str))
    if not isinstance(content, str):
        return None
    text = normalise_text(content)
    if not text or text.startswith(NOT_HUMAN_PREFIXES):
        return None
    return text


def complete_end(file: IO[bytes], size: int, budget: int = MAX_SCAN_BYTES) -> int:
    """The offset just past the last complete line of the first `size` bytes, looking back
    at most `budget` bytes: with no line end there, `size` (what lies before is one line too
    large to read, R-U5, and is never counted)."""
    end = size
    while end > 0 and size - end < budget:
        start = max(0, end - _BACKWARD_BLOCK, size - budget)
        file.seek(start)
        newline = file.read(end - start).rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0 if end == 0 else size


def transcript_baseline(path: Path) -> str:
    """The marker of a transcript as it is now: new turns are those written after it."""
    with open_regular(path) as file:
        return str(complete_end(file, os.fstat(file.fileno()).st_size))


class NotARegularFileError(OSError):
    """A transcript path that names a FIFO, a device, a directory: never read."""


def open_regular(path: Path) -> IO[bytes]:
    """`path` opened for reading if it is a regular file. Opened non-blocking, so a FIFO
    cannot hold the caller, and checked with `fstat` before a byte is read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotARegularFileError(f"not a regular file: {path}")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _offset(marker: str | None) -> int | None:
    if marker is None or not marker.isdigit():
        return None
    return int(marker)


def parse_row(line: bytes) -> dict[str, Any] | None:
    """A line's JSON object, or None for a line that is not one, or is nested deeper than
    `MAX_JSON_DEPTH` (checked only when it has that many brackets at all)."""
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(row, dict):
        return None
    if line.count(b"{") + line.count(b"[") > MAX_JSON_DEPTH and _depth(row) > MAX_JSON_DEPTH:
        return None
    return row


def _depth(value: object) -> int:
    """How deeply containers nest in `value`, walked without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in item)
    return deepest


def row_position(row: Mapping[str, Any], offset: int) -> str:
    """A row's position: its `uuid` when that is a short, safe id that looks like no secret,
    else `offset:N`, its byte offset (stable, since a transcript only grows)."""
    uuid = row.get("uuid")
    if isinstance(uuid, str) and _SAFE_ID.fullmatch(uuid) and not secret_spans(uuid):
        return uuid
    return f"offset:{offset}"


def epoch_ms(timestamp: object) -> int | None:
    if not isinstance(timestamp, str):
        return None
    try:
        at = datetime.fromisoformat(timestamp)
    except ValueError:
        return None
    return int(at.timestamp() * 1000) if at.tzinfo is not None else None
