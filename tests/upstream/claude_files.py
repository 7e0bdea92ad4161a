"""Helpers of the Claude Code provider tests: transcripts built in a temp dir."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

from session_awareness.application.upstream.provider_ports import UpstreamProbe
from session_awareness.domain.upstream import UpstreamSource
from session_awareness.infrastructure.claude_code import CATALOG_ID, HOST_ID, UPSTREAM_KIND

#: A copy of `shared/fixtures/claude-code-transcript.jsonl`: rows u-001, u-007 and u-010 are
#: human turns; the others are not.
SAMPLE = Path(__file__).with_name("fixtures") / "claude-code-transcript.jsonl"
SESSION_UUID = "7d1c9a52-3f0e-4c1a-9a57-2b7f3e0c6a11"


def sample_transcript(directory: Path) -> Path:
    """A copy of the shared sample at `<dir>/.claude/projects/-home-dev-shop/<uuid>.jsonl`."""
    project = directory / ".claude" / "projects" / "-home-dev-shop"
    project.mkdir(parents=True, exist_ok=True)
    path = project / f"{SESSION_UUID}.jsonl"
    shutil.copyfile(SAMPLE, path)
    return path


def user_row(text: str | list[dict[str, Any]], uid: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "user",
        "uuid": uid,
        "timestamp": "2026-11-30T08:59:00.000Z",
        "message": {"role": "user", "content": text},
        **extra,
    }


def line(row: dict[str, Any]) -> bytes:
    return json.dumps(row).encode() + b"\n"


def append(path: Path, *rows: dict[str, Any] | bytes) -> None:
    with path.open("ab") as file:
        for row in rows:
            file.write(row if isinstance(row, bytes) else line(row))


def probe(path: Path, marker: str | None = "0", own: frozenset[str] = frozenset()) -> UpstreamProbe:
    source = UpstreamSource(CATALOG_ID, HOST_ID, path.stem, UPSTREAM_KIND, str(path))
    return UpstreamProbe(uuid.uuid4(), "agent:main:main", "main", source, marker, own)
