"""The `sessions_history` view: a bounded, safety-filtered page of a transcript (SPEC R-T1).

Pure: rows come in newest first from a transcript source, the JSON goes out. Per row, tool
blocks are kept only with `include_tools`; credential-like text is redacted (across the row's
blocks, before and after normalisation, so neither a block boundary nor a stripped tag can
hide a secret), the normalisation rules of `transcript_filter` are applied, long texts are cut
and a row still too large is replaced by `OMITTED`. Rows left empty count for nothing, so
offsets are stable for a given `include_tools`. A page is the newest `limit` rows after
`offset`, returned oldest first; rows that do not fit the byte budget are dropped, the older
first, and counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from session_awareness.application.transcript_filter import clean, redact, truncate
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
    window: list[Shown] = []
    more, unread = False, False
    for index, message in enumerate(_shaped(rows, include_tools)):
        if message is None:
            unread = True
            break
        if index < skip:
            continue
        if len(window) == want:
            more = True
            break
        window.append(message)
    page: list[Shown] = []
    used = 0
    for message in window:  # newest first: older rows are the ones dropped
        size = _size(message.message)
        if page and used + size > MAX_PAGE_BYTES:
            break
        page.append(message)
        used += size
    dropped = len(window) - len(page)
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


def _shaped(
    rows: Iterable[TranscriptRow | OlderRowsUnread], include_tools: bool
) -> Iterator[Shown | None]:
    """Each row as shown, empty ones left out; `None` where older rows went unread."""
    for row in rows:
        if isinstance(row, OlderRowsUnread):
            yield None
            return
        shown = shown_row(row, include_tools)
        if shown is not None:
            yield shown


def shown_row(row: TranscriptRow, include_tools: bool) -> Shown | None:
    """One row as the view shows it, or None when nothing of it is left to show."""
    blocks = [b for b in row.blocks if include_tools or b.type == "text"]
    texts, redacted = redact([b.text for b in blocks])
    texts, again = redact([clean(text) for text in texts])
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
    return Shown(message, cut, redacted or again)


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
