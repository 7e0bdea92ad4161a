"""The transcript source for Gemini CLI's chat files (`sessions_history`, ADR 018).

Gemini CLI (0.61) records a session in `~/.gemini/tmp/<project>/chats/session-<…>.jsonl`, the
`transcript_path` its hooks are given: one JSON record a line, replayed in order as Gemini CLI
itself loads it. A record with an `id` is a message, set in place (a later record with the
same id replaces it, where it stood); `{"$set": {"messages": [...]}}` replaces every message
(the session's set-up, a compression); `{"$rewindTo": id}` drops that message and every one
after it; other records (the session's metadata, other `$set` fields) carry no message.

So the file is replayed forward, not read backward as a Claude Code transcript is, within the
same bounds (R-T4) and through the same reader: only a regular file, at most `max_bytes` of
its newest complete lines (a line still being written is left for the next read), whose rows
are then handed on newest first; when older lines were left unread that is said (`UNREAD`),
never skipped silently, and a line that cannot be read (longer than `max_line`, malformed,
nested too deep) is passed over and counted (`SKIPPED`). A row is named by its `id` when that
is a short, safe, unique id, else by its byte offset. Rows shown are `user` messages (what
the human typed, `displayContent`, when Gemini CLI kept it apart from the context a hook
added) and `gemini` messages (their text, tool calls and the calls' results); the session
set-up Gemini CLI sends as a first user message, thoughts, and `info`/`error`/`warning`
records are not shown. Nothing read is stored or logged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import replace
from typing import IO, Any

from session_awareness.application.transcript_port import (
    SKIPPED,
    UNREAD,
    OlderRowsUnread,
    TranscriptBlock,
    TranscriptRow,
    UnreadableLine,
)
from session_awareness.infrastructure.claude_code import (
    epoch_ms,
    parse_row,
    row_position,
)
from session_awareness.infrastructure.claude_hooks import GEMINI_CLI
from session_awareness.infrastructure.claude_transcripts import (
    LocalTranscriptFile,
    lines_newest_first,
)

SOURCE = GEMINI_CLI.name
#: The first user message of every session: the environment Gemini CLI describes to the model.
SETUP_PREFIX = "<session_context>"


class GeminiCliTranscriptSource(LocalTranscriptFile):
    """Reads the chat files of sessions noted with a Gemini CLI `transcript_path`."""

    source = SOURCE
    unreadable_event = "gemini_transcript_unreadable"

    def _rows(self, file: IO[bytes]) -> Iterator[TranscriptRow | OlderRowsUnread | UnreadableLine]:
        with file:
            lines, skipped, unread = self._lines(file)
        messages, malformed = replay(lines)
        return _newest_first(messages, skipped=skipped + malformed, unread=unread)

    def _lines(self, file: IO[bytes]) -> tuple[list[tuple[int, bytes]], int, bool]:
        """The complete lines read, oldest first with their offsets; how many could not be
        read; whether older lines were left unread."""
        size = os.fstat(file.fileno()).st_size
        lines, skipped, unread = [], 0, False
        for item in lines_newest_first(file, size, self.max_bytes, self.max_line):
            if isinstance(item, tuple):
                lines.append(item)
            elif isinstance(item, OlderRowsUnread):
                unread = True
            else:
                skipped += 1
        lines.reverse()
        return lines, skipped, unread


def replay(lines: list[tuple[int, bytes]]) -> tuple[list[dict[str, Any]], int]:
    """The messages a chat file's records leave, in order, each with the `offset` of the line
    that put it in place; and how many lines were not records."""
    messages: dict[str, dict[str, Any]] = {}
    malformed = 0
    for offset, line in lines:
        record = parse_row(line)
        if record is None:
            malformed += 1
            continue
        rewind, update, key = record.get("$rewindTo"), record.get("$set"), record.get("id")
        if isinstance(rewind, str):
            ids = list(messages)
            for dropped in ids[ids.index(rewind) :] if rewind in messages else ids:
                del messages[dropped]
        elif isinstance(key, str):
            place = messages[key]["offset"] if key in messages else offset
            messages[key] = {**record, "offset": place}
        elif isinstance(update, dict) and isinstance(update.get("messages"), list):
            messages = {m["id"]: {**m, "offset": offset} for m in update["messages"]
                        if isinstance(m, dict) and isinstance(m.get("id"), str)}  # fmt: skip
    return list(messages.values()), malformed


def _newest_first(
    messages: list[dict[str, Any]], *, skipped: int, unread: bool
) -> Iterator[TranscriptRow | OlderRowsUnread | UnreadableLine]:
    seen: set[str] = set()
    for message in reversed(messages):
        row = transcript_row(message)
        if row is None:
            continue
        if row.position in seen:  # a repeated or unsafe id: named by its line and place
            row = replace(row, position=f"offset:{message['offset']}.{len(seen)}")
        seen.add(row.position)
        yield row
    yield from [SKIPPED] * skipped
    if unread:
        yield UNREAD


def transcript_row(message: dict[str, Any]) -> TranscriptRow | None:
    """A chat file message as a row of the view, or None for what is not a message shown."""
    kind = message.get("type")
    at = epoch_ms(message.get("timestamp"))
    position = row_position({"uuid": message.get("id")}, message.get("offset", 0))
    if kind == "user":
        shown = message.get("displayContent", message.get("content"))
        blocks = _text_blocks(shown)
        if not blocks or blocks[0].text.lstrip().startswith(SETUP_PREFIX):
            return None
        return TranscriptRow(position, "user", blocks, at)
    if kind != "gemini":
        return None
    calls = message.get("toolCalls")
    blocks = _text_blocks(message.get("content"))
    for call in calls if isinstance(calls, list) else []:
        blocks += _call_blocks(call)
    return TranscriptRow(position, "assistant", blocks, at) if blocks else None


def _text_blocks(content: object) -> tuple[TranscriptBlock, ...]:
    """A message's text: a string, or parts of which the `text` ones are shown."""
    if isinstance(content, str):
        return (TranscriptBlock("text", content),) if content else ()
    parts = content if isinstance(content, list) else []
    texts = [p.get("text") for p in parts if isinstance(p, dict) and not p.get("thought")]
    return tuple(TranscriptBlock("text", t) for t in texts if isinstance(t, str) and t)


def _call_blocks(call: object) -> tuple[TranscriptBlock, ...]:
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return ()
    arguments = json.dumps(call.get("args"), ensure_ascii=False, default=str)
    blocks = (TranscriptBlock("toolCall", arguments, call["name"]),)
    if call.get("result") is None:
        return blocks
    failed = call.get("status") == "error"
    result = TranscriptBlock("toolResult", _result_text(call["result"]), is_error=failed)
    return (*blocks, result)


def _result_text(result: object) -> str:
    """A tool call's result: its function response's output (or the response as JSON)."""
    parts = result if isinstance(result, list) else [result]
    texts = []
    for part in parts:
        response = part.get("functionResponse") if isinstance(part, dict) else None
        body = response.get("response") if isinstance(response, dict) else None
        if isinstance(body, dict) and isinstance(body.get("output"), str):
            texts.append(body["output"])
        elif body is not None:
            texts.append(json.dumps(body, ensure_ascii=False, default=str))
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "\n".join(texts)
