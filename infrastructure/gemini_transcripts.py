"""The transcript source for Gemini CLI's chat files (`sessions_history`, ADR 018).

Gemini CLI (0.61) records a session in `~/.gemini/tmp/<project>/chats/session-<…>.jsonl`, the
`transcript_path` its hooks are given: one JSON record a line, replayed in order as Gemini CLI
itself loads it. A record with an `id` is a message, set in place (a later record with the
same id replaces it, where it stood); `{"$set": {"messages": [...]}}` replaces every message
(the session's set-up, a compression); `{"$rewindTo": id}` drops that message and every one
after it; other records (the session's metadata, other `$set` fields) carry no message.

So the file is replayed forward, not read backward as a Claude Code transcript is: at most
`max_bytes` of its newest complete lines (a line still being written is left for the next
read), whose rows are then handed on newest first; when older lines were left unread that is
said (`UNREAD`), never skipped silently. Rows shown are `user` messages (what the human typed,
`displayContent`, when Gemini CLI kept it apart from the context a hook added) and `gemini`
messages (their text, tool calls and the calls' results); the session set-up Gemini CLI sends
as a first user message, thoughts, and `info`/`error`/`warning` records are not shown. Nothing
read is stored or logged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from session_awareness.application.transcript_port import (
    UNREAD,
    OlderRowsUnread,
    TranscriptBlock,
    TranscriptRow,
    TranscriptSession,
)
from session_awareness.infrastructure.claude_code import complete_end, epoch_ms, parse_row
from session_awareness.infrastructure.claude_hooks import GEMINI_CLI
from session_awareness.infrastructure.claude_transcripts import MAX_READ_BYTES
from session_awareness.logs import get_logger

log = get_logger()

SOURCE = GEMINI_CLI.name
#: The first user message of every session: the environment Gemini CLI describes to the model.
SETUP_PREFIX = "<session_context>"


class GeminiCliTranscriptSource:
    """Reads the chat files of sessions noted with a Gemini CLI `transcript_path`."""

    source = SOURCE

    def __init__(self, *, max_bytes: int = MAX_READ_BYTES) -> None:
        self.max_bytes = max_bytes

    def newest_first(
        self, session: TranscriptSession
    ) -> Iterator[TranscriptRow | OlderRowsUnread] | None:
        known = session.transcript
        if known is None or known.source != SOURCE:
            return None
        try:
            file = Path(known.ref).expanduser().open("rb")
        except OSError as error:  # gone, unreadable: no transcript to show
            log.info("gemini_transcript_unreadable", session_key=session.key,
                     error_type=type(error).__name__)  # fmt: skip
            return None
        with file:
            messages, unread = self._replayed(file)
        return _newest_first(messages, unread=unread)

    def _replayed(self, file: IO[bytes]) -> tuple[list[dict[str, Any]], bool]:
        """The messages as Gemini CLI would load them from the lines read, and whether older
        lines were left unread."""
        file.seek(0, 2)
        end = complete_end(file, file.tell())
        start = max(0, end - self.max_bytes)
        file.seek(start)
        chunk = file.read(end - start)
        if start > 0:  # the first line read is cut: start at the next whole one
            chunk = chunk[chunk.find(b"\n") + 1 :] if b"\n" in chunk else b""
        return replay(chunk.splitlines()), start > 0


def replay(lines: list[bytes]) -> list[dict[str, Any]]:
    """The messages a chat file's records leave, in order."""
    messages: dict[str, dict[str, Any]] = {}
    for line in lines:
        record = parse_row(line)
        if record is None:
            continue
        rewind = record.get("$rewindTo")
        update = record.get("$set")
        if isinstance(rewind, str):
            ids = list(messages)
            for dropped in ids[ids.index(rewind) :] if rewind in messages else ids:
                del messages[dropped]
        elif isinstance(record.get("id"), str):
            messages[record["id"]] = record
        elif isinstance(update, dict) and isinstance(update.get("messages"), list):
            messages = {m["id"]: m for m in update["messages"]
                        if isinstance(m, dict) and isinstance(m.get("id"), str)}  # fmt: skip
    return list(messages.values())


def _newest_first(
    messages: list[dict[str, Any]], *, unread: bool
) -> Iterator[TranscriptRow | OlderRowsUnread]:
    for message in reversed(messages):
        row = transcript_row(message)
        if row is not None:
            yield row
    if unread:
        yield UNREAD


def transcript_row(message: dict[str, Any]) -> TranscriptRow | None:
    """A chat file message as a row of the view, or None for what is not a message shown."""
    kind = message.get("type")
    at = epoch_ms(message.get("timestamp"))
    if kind == "user":
        shown = message.get("displayContent", message.get("content"))
        blocks = _text_blocks(shown)
        if not blocks or blocks[0].text.lstrip().startswith(SETUP_PREFIX):
            return None
        return TranscriptRow(message["id"], "user", blocks, at)
    if kind != "gemini":
        return None
    calls = message.get("toolCalls")
    blocks = _text_blocks(message.get("content"))
    for call in calls if isinstance(calls, list) else []:
        blocks += _call_blocks(call)
    return TranscriptRow(message["id"], "assistant", blocks, at) if blocks else None


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
