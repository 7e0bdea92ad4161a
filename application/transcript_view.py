"""The `sessions_history` view: a bounded, safety-filtered page of a transcript (R-T1).

Pure: rows come in newest first from a transcript source, the JSON goes out. Per row, tool
blocks are kept only with `include_tools`; the normalisation rules of `transcript_filter` are
applied, then credential-like text is redacted (across the row's blocks, after normalisation, so
neither a block boundary nor a stripped tag can hide a secret; tool names and the position too),
long texts are cut and a row still too large is replaced by `OMITTED`; lone surrogates become
U+FFFD. Every string being bounded, a page stays within `MAX_PAGE_BYTES` whatever a row holds.
Rows left empty count for nothing, so offsets are stable for a given `include_tools`. A page is
the newest `limit` rows after `offset`, counted from the newest row or, with `before`, from the
row with that position (which names a row however the transcript grows), returned oldest
first; rows that do not fit the byte budget are dropped, the older first, and counted, and so
are the lines the source could not read (`skippedLines`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from session_awareness.application.errors import InvalidArgumentError
from session_awareness.application.redaction import redact, redact_text
from session_awareness.application.transcript_filter import clean, truncate
from session_awareness.application.transcript_port import (
    OlderRowsUnread,
    TranscriptBlock,
    TranscriptRow,
    UnreadableLine,
)
from session_awareness.domain.signals import MAX_SAFE_INTEGER

DEFAULT_LIMIT = 20
MAX_TEXT_CHARS = 4_000
MAX_NAME_CHARS = 200
MAX_POSITION_CHARS = 128
MAX_ROW_BYTES = 16_384
MAX_PAGE_BYTES = 65_536
OMITTED = "[sessions_history omitted: message too large]"


@dataclass(frozen=True, slots=True)
class Shown:
    """A row as the view shows it, and what the filter did to it."""

    message: dict[str, Any]
    cut: bool
    redacted: bool


def history_json(
    key: str,
    rows: Iterable[TranscriptRow | OlderRowsUnread | UnreadableLine],
    *,
    limit: int | None,
    offset: int | None,
    include_tools: bool,
    before: str | None = None,
) -> dict[str, Any]:
    """The tool's JSON for one page of `rows` (newest first): after the row whose position
    is `before` (when given) and `offset` more rows."""
    skip, want = offset or 0, DEFAULT_LIMIT if limit is None else limit
    page: list[Shown] = []
    seen = dropped = used = 0
    more = full = False
    reading = _Reading(rows, before)
    for row in reading:
        if seen < skip or full:  # only whether it shows anything counts: no need to shape it
            if shows_anything(row, include_tools):
                seen += 1
                dropped += full and seen <= skip + want
                more = more or seen > skip + want
            if more:
                break
            continue
        if seen == skip + want:
            more = shows_anything(row, include_tools)
            if more:
                break
            continue
        shown = shown_row(row, include_tools)
        if shown is None:
            continue
        seen += 1
        size = _size(shown.message) + 2  # and its separator in the list
        if page and used + size > MAX_PAGE_BYTES:  # newest first: older rows are dropped
            full, dropped = True, 1
            continue
        page.append(shown)
        used += size
    if not reading.anchored:
        raise InvalidArgumentError("before", "names no message in the part of the transcript read")
    page.reverse()
    messages = [shown.message for shown in page]
    result: dict[str, Any] = {
        "sessionKey": key,
        "messages": messages,
        "truncated": bool(dropped or more or reading.unread),
        "droppedMessages": dropped,
        "skippedLines": reading.skipped,
        "contentTruncated": any(shown.cut for shown in page),
        "contentRedacted": any(shown.redacted for shown in page),
        "bytes": len(json.dumps(messages, ensure_ascii=False).encode()),
    }
    if offset is not None or before is not None:
        has_more = bool(dropped or more)
        result["offset"] = skip
        result["hasMore"] = has_more
        if has_more:
            result["nextOffset"] = skip + len(page)
            result["nextBefore"] = page[0].message["position"]
    return result


class _Reading:
    """The rows a page is taken from: those older than the one at `before` (all without
    it), with the lines the source could not read counted and a read bound noted."""

    def __init__(
        self, rows: Iterable[TranscriptRow | OlderRowsUnread | UnreadableLine], before: str | None
    ) -> None:
        self._rows, self._before = rows, before
        self.anchored, self.skipped, self.unread = before is None, 0, False

    def __iter__(self) -> Iterator[TranscriptRow]:
        for row in self._rows:
            if isinstance(row, UnreadableLine):
                self.skipped += 1
            elif isinstance(row, OlderRowsUnread):
                self.unread = True
                return
            elif self.anchored:
                yield row
            else:  # rows up to and with `before` are newer than the page
                self.anchored = shown_position(row.position)[0] == self._before


def shows_anything(row: TranscriptRow, include_tools: bool) -> bool:
    """Whether the row is shown at all (what `shown_row` keeps, without shaping it):
    redaction and cutting never empty a text, so only the normalisation decides."""
    for block in row.blocks:
        if block.type == "toolCall" and include_tools:
            return True
        if (include_tools or block.type == "text") and clean(scrub(block.text)):
            return True
    return False


def shown_row(row: TranscriptRow, include_tools: bool) -> Shown | None:
    """One row as the view shows it, or None when nothing of it is left to show. Every
    string is redacted: texts, tool names and arguments, results and the position."""
    blocks = [b for b in row.blocks if include_tools or b.type == "text"]
    texts, redacted = redact([clean(scrub(b.text)) for b in blocks])
    content = []
    cut = False
    for block, whole in zip(blocks, texts, strict=True):
        text, was_cut = truncate(whole, MAX_TEXT_CHARS)
        name, name_redacted = redact_text(clean(scrub(block.name or "")))
        name, name_cut = truncate(name, MAX_NAME_CHARS)
        cut, redacted = cut or was_cut or name_cut, redacted or name_redacted
        entry = _block_json(block, text, name)
        if entry is not None:
            content.append(entry)
    if not content:
        return None
    position, position_cut, position_redacted = shown_position(row.position)
    message: dict[str, Any] = {"position": position, "role": row.role}
    if _is_time(row.at):
        message["timestamp"] = row.at
    message["content"] = content
    if _size(message) > MAX_ROW_BYTES:
        message["content"] = [{"type": "text", "text": OMITTED}]
        cut = True
    return Shown(message, cut or position_cut, redacted or position_redacted)


def shown_position(position: str) -> tuple[str, bool, bool]:
    """A row's position as shown: redacted and cut like any text, and whether it was cut,
    and whether redacted. A source gives short, safe positions; this holds for any other."""
    text, redacted = redact_text(scrub(str(position)))
    text, cut = truncate(" ".join(text.split()), MAX_POSITION_CHARS)
    return text, cut, redacted


def scrub(text: str) -> str:
    """`text` with any lone surrogate (valid in JSON, not in UTF-8) replaced by U+FFFD."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _is_time(at: object) -> bool:
    return isinstance(at, int) and not isinstance(at, bool) and abs(at) <= MAX_SAFE_INTEGER


def _block_json(block: TranscriptBlock, text: str, name: str) -> dict[str, Any] | None:
    if block.type == "toolCall":
        return {"type": "toolCall", "name": name or "tool", "arguments": text}
    if not text:
        return None
    if block.type == "toolResult":
        return {"type": "toolResult", "text": text, "isError": block.is_error is True}
    return {"type": "text", "text": text}


def _size(message: dict[str, Any]) -> int:
    return len(json.dumps(message, ensure_ascii=False).encode())
