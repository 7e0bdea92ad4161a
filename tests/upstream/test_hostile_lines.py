"""The Claude Code provider passes over a line it cannot read, and over a turn's `uuid` that is
no safe id, and keeps recording the human turns after them (R-T4, R-U3)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from session_awareness.application import SessionAwareness
from session_awareness.application.upstream.provider_ports import UpstreamActivity
from session_awareness.infrastructure.claude_code import CATALOG_ID, ClaudeCodeTranscripts
from session_awareness.infrastructure.upstream_commands import adopt_claude_transcript, scan_once
from tests.conftest import ServiceFactory
from tests.contract.helpers import CHILD, spawn
from tests.upstream.claude_files import append, probe, sample_transcript, user_row
from tests.upstream.fakes import events

DEEP = b'{"type": "user", "message": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"


@pytest.fixture
def claude(open_svc: ServiceFactory) -> SessionAwareness:
    return open_svc(upstream_providers={CATALOG_ID: ClaudeCodeTranscripts()})


class TestHostileLines:
    def test_a_line_nested_too_deep_is_passed_over_and_the_turns_after_it_recorded(
        self, claude: SessionAwareness, tmp_path: Path
    ) -> None:
        """R-T4: a deeply nested line neither fails the scan nor holds the marker."""
        transcript = sample_transcript(tmp_path)
        spawn(claude)
        adopt_claude_transcript(claude, CHILD, transcript)
        append(transcript, user_row("before it", "u-301"), DEEP, user_row("after it", "u-302"))
        assert scan_once(claude)[0]["outcome"] == "recorded"
        assert events(claude)[-1]["payload"] == {"channel": CATALOG_ID, "turns": 2}
        link = claude.upstream_link(CHILD)
        assert link is not None and link["marker"] == str(transcript.stat().st_size)
        append(transcript, user_row("and later", "u-303"))
        assert scan_once(claude)[0]["outcome"] == "recorded"

    @pytest.mark.parametrize(
        "uid",
        ["x" * 1_000_000, "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx", "two\nlines", "offset:0"],
        ids=["huge", "credential", "multi_line", "offset_like"],
    )
    def test_a_turn_whose_uuid_is_no_safe_id_is_recorded_under_its_offset(
        self, claude: SessionAwareness, tmp_path: Path, uid: str
    ) -> None:
        """R-T4: the turn counts; its position is its byte offset, never the uuid."""
        transcript = sample_transcript(tmp_path)
        spawn(claude)
        adopt_claude_transcript(claude, CHILD, transcript)
        offset = transcript.stat().st_size
        append(transcript, user_row("look here", uid))
        assert scan_once(claude)[0]["outcome"] == "recorded"
        link = claude.upstream_link(CHILD)
        assert link is not None and link["lastPosition"] == f"offset:{offset}"
        append(transcript, user_row("and here", "u-401"))
        assert scan_once(claude)[0]["outcome"] == "recorded"


class TestOnlyRegularFiles:
    def test_a_fifo_in_place_of_a_transcript_does_not_block_a_scan(self, tmp_path: Path) -> None:
        """R-T4: opened non-blocking and refused after `fstat`: nothing this time."""
        fifo = tmp_path / "7d1c9a52.jsonl"
        os.mkfifo(fifo)
        answers: list[object] = []
        scan = threading.Thread(
            target=lambda: answers.append(ClaudeCodeTranscripts().scan_one(probe(fifo))),
            daemon=True,
        )
        scan.start()
        scan.join(timeout=10)
        assert answers == [None]

    def test_a_directory_in_place_of_a_transcript_reads_nothing(self, tmp_path: Path) -> None:
        assert ClaudeCodeTranscripts().scan_one(probe(tmp_path)) is None


def test_basing_a_link_reads_at_most_the_scan_cap_from_the_end(tmp_path: Path) -> None:
    """R-T4, R-U5: a gigabyte with no line end near its end is not read whole to find one;
    the link is based after it (what lies before is one line too large to read)."""
    path = tmp_path / "7d1c9a52.jsonl"
    append(path, user_row("long ago", "u-1"))
    with path.open("r+b") as file:
        file.truncate(1 << 30)
    before = _bytes_read()
    found = ClaudeCodeTranscripts().scan_one(probe(path, marker=None))
    assert _bytes_read() - before <= 2 << 20
    assert isinstance(found, UpstreamActivity) and found.marker == str(1 << 30)


def _bytes_read() -> int:
    """What this process has read so far (Linux's /proc/self/io `rchar`)."""
    for entry in Path("/proc/self/io").read_text().splitlines():
        if entry.startswith("rchar:"):
            return int(entry.split()[1])
    raise AssertionError("no rchar")
