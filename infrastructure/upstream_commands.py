"""What the CLI's upstream commands do (R-U1–R-U5), as plain functions over an open service:

session-awareness upstream scan                        -> scan_once(svc)
session-awareness adopt KEY --claude-transcript PATH   -> adopt_claude_transcript(svc, ...)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from session_awareness.application import (
    InvalidArgumentError,
    SessionAwareness,
    StoreUnavailableError,
    UnknownSessionError,
)
from session_awareness.domain.keys import is_subagent
from session_awareness.infrastructure.claude_code import (
    CATALOG_ID,
    HOST_ID,
    UPSTREAM_KIND,
    ClaudeCodeTranscripts,
    transcript_baseline,
)


def scan_once(svc: SessionAwareness) -> list[dict[str, Any]]:
    """Scan every watched, idle upstream link once (the Claude Code provider is registered
    when the host has not) and return what was found, one object per link."""
    svc.upstream_monitor.providers.setdefault(CATALOG_ID, ClaudeCodeTranscripts())
    outcomes = svc.scan_upstream_once()
    if outcomes is None:
        raise StoreUnavailableError("another upstream scan is in flight; try again")
    return [outcome.as_dict() for outcome in outcomes]


def adopt_claude_transcript(
    svc: SessionAwareness, key: str, path: str | Path, *, agent_id: str | None = None
) -> dict[str, Any]:
    """Adopt a local Claude Code transcript into session `key` (opened when unknown or
    deleted): the link starts after the transcript's last complete line, so only turns
    written from now on count (R-U1). Returns the link, with `adopted` true when this call
    recorded the session's `adopted` event."""
    transcript = Path(path).expanduser().resolve()
    if not transcript.is_file():
        raise InvalidArgumentError("claudeTranscript", f"no transcript file at {path}")
    if transcript.suffix != ".jsonl":
        raise InvalidArgumentError("claudeTranscript", f"not a .jsonl transcript: {path}")
    marker = transcript_baseline(transcript)
    try:
        ref = svc.resolve(key, agent_id)
        row = svc.read_model.session(ref.session_id)
    except UnknownSessionError:
        row = None
    if row is None or row.deleted:
        kind = "subagent" if is_subagent(key) else "other"
        svc.open_session(key, agent_id=agent_id, kind=kind)
    sequence = svc.record_adopted(
        key,
        catalog_id=CATALOG_ID,
        host_id=HOST_ID,
        thread_id=transcript.stem,
        upstream_kind=UPSTREAM_KIND,
        upstream_ref=str(transcript),
        agent_id=agent_id,
        marker=marker,
    )
    link = svc.upstream_link(key, agent_id=agent_id)
    if link is None or link["upstreamRef"] != str(transcript):
        raise StoreUnavailableError(f"the upstream link of {key} could not be written")
    return {**link, "adopted": sequence is not None}
