"""The `sessions_history` view: a bounded, safety-filtered page of a transcript (SPEC R-T1).

Pure: rows come in newest first from a transcript source, the JSON goes out. Per row, tool
blocks are kept only with `include_tools`; the normalisation rules of `transcript_filter` are
applied, then credential-like text is redacted (across the row's blocks, after normalisation, so
neither a block boundary nor a stripped tag can hide a secret), long texts are cut
and a row still too large is replaced by `OMITTED`. Rows left empty count for nothing, so
offsets are stable for a given `include_tools`. A page is the newest `limit` rows after
`offset`, returned oldest first; rows that do not fit the byte budget are dropped, the older
first, and counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from session_awareness.application.redaction import redact
from session_awareness.application.transcript_filter import clean, truncate
from session_awareness.application.transcript_port import (
    OlderRowsUnread,
    TranscriptBlock,
    TranscriptRow,
)

DEFAULT_LIMIT = 20
MAX_TEXT_CHARS = 4_000
MAX_NAME_CHARS = 200
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
    rows: Iterable[TranscriptRow | OlderRowsUnread],
    *,
    limit: int | None,
    offset: int | None,
    include_tools: bool,
) -> dict[str, Any]:
    """The tool's JSON for one page of `rows` (newest first)."""
    skip, want = offset or 0, DEFAULT_LIMIT if limit is None else limit
    page: list[Shown] = []
    seen = dropped = used = 0
    more = unread = full = False
    for row in rows:
        if isinstance(row, OlderRowsUnread):
            unread = True
            break
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
    page.reverse()
    messages = [shown.message for shown in page]
    result: dict[str, Any] = {
        "sessionKey": key,
        "messages": messages,
        "truncated": bool(dropped or more or unread),
        "droppedMessages": dropped,
        "contentTruncated": any(shown.cut for shown in page),
        "contentRedacted": any(shown.redacted for shown in page),
        "bytes": len(json.dumps(messages, ensure_ascii=False).encode()),
    }
    if offset is not None:
        has_more = bool(dropped or more)
        result["offset"] = skip
        result["hasMore"] = has_more
        if has_more:
            result["nextOffset"] = skip + len(page)
    return result


def shows_anything(row: TranscriptRow, include_tools: bool) -> bool:
    """Whether the row is shown at all (what `shown_row` keeps, without shaping it):
    redaction and cutting never empty a text, so only the normalisation decides."""
    for block in row.blocks:
        if block.type == "toolCall" and include_tools:
            return True
        if (include_tools or block.type == "text") and clean(block.text):
            return True
    return False


def shown_row(row: TranscriptRow, include_tools: bool) -> Shown | None:
    """One row as the view shows it, or None when nothing of it is left to show."""
    blocks = [b for b in row.blocks if include_tools or b.type == "text"]
    texts, redacted = redact([clean(b.text) for b in blocks])
    content = []
    cut = False
    for block, whole in zip(blocks, texts, strict=True):
        text, was_cut = truncate(whole, MAX_TEXT_CHARS)
        cut = cut or was_cut
        entry = _block_json(block, text)
        if entry is not None:
            content.append(entry)
    if not content:
        return None
    message: dict[str, Any] = {"position": row.position, "role": row.role}
    if row.at is not None:
        message["timestamp"] = row.at
    message["content"] = content
    if _size(message) > MAX_ROW_BYTES:
        message["content"] = [{"type": "text", "text": OMITTED}]
        cut = True
    return Shown(message, cut, redacted)


def _block_json(block: TranscriptBlock, text: str) -> dict[str, Any] | None:
    if block.type == "toolCall":
        name, _ = truncate(clean(block.name or ""), MAX_NAME_CHARS)
        return {"type": "toolCall", "name": name or "tool", "arguments": text}
    if not text:
        return None
    if block.type == "toolResult":
        return {"type": "toolResult", "text": text, "isError": block.is_error}
    return {"type": "text", "text": text}


def _size(message: dict[str, Any]) -> int:
    return len(json.dumps(message, ensure_ascii=False).encode())
