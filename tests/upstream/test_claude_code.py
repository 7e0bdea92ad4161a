"""The Claude Code transcript provider on real files (R-U3, R-U5, R-R3)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from session_awareness.application.upstream.provider_ports import UpstreamActivity, UpstreamMissing
from session_awareness.infrastructure.claude_code import MAX_SCAN_BYTES, ClaudeCodeTranscripts
from tests.upstream.claude_files import append, line, probe, sample_transcript, user_row

U010_AT = int(datetime(2026, 11, 28, 10, 41, 10, tzinfo=UTC).timestamp() * 1000)


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    return sample_transcript(tmp_path)


def activity(result: object) -> UpstreamActivity:
    assert isinstance(result, UpstreamActivity)
    return result


class TestCounting:
    def test_only_the_human_turns_of_the_sample_count(self, transcript: Path) -> None:
        """R-U3: u-001, u-007 and u-010 are human; tool results, meta rows, compaction and
        inter-session messages are not. The newest counted row gives time and position."""
        found = activity(ClaudeCodeTranscripts().scan_one(probe(transcript)))
        assert found == UpstreamActivity(
            3, str(transcript.stat().st_size), occurred_at=U010_AT, position="u-010"
        )

    def test_self_echo_is_not_counted(self, transcript: Path) -> None:
        """R-U3: a row whose normalised text is one of the own recent texts is an echo."""
        own = frozenset({"Also add a changelog entry."})
        found = activity(ClaudeCodeTranscripts().scan_one(probe(transcript, own=own)))
        assert (found.human_turns, found.position) == (2, "u-007")

    def test_a_new_link_starts_after_the_last_complete_line(self, transcript: Path) -> None:
        """R-U1, R-U5: without a marker the scan counts nothing and sets the baseline just
        past the last complete line; a line still being written is left for later."""
        size = transcript.stat().st_size
        append(transcript, b'{"type": "user", "mess')
        found = activity(ClaudeCodeTranscripts().scan_one(probe(transcript, marker=None)))
        assert found == UpstreamActivity(0, str(size))

    def test_appended_lines_are_picked_up_on_the_next_scan(self, transcript: Path) -> None:
        """R-U3, R-U5: only complete lines after the marker count, once each."""
        provider = ClaudeCodeTranscripts()
        end = str(transcript.stat().st_size)
        assert provider.scan_one(probe(transcript, marker=end)) == UpstreamActivity(0, end)
        half = line(user_row("second", "u-012"))
        append(transcript, user_row("first", "u-011"), half[:10])
        first = activity(provider.scan_one(probe(transcript, marker=end)))
        assert (first.human_turns, first.position) == (1, "u-011")
        append(transcript, half[10:])
        second = activity(provider.scan_one(probe(transcript, marker=first.marker)))
        assert (second.human_turns, second.position) == (1, "u-012")
        assert second.marker == str(transcript.stat().st_size)

    def test_a_deleted_file_is_missing(self, transcript: Path) -> None:
        """R-U4: no transcript at the path means the upstream is missing."""
        transcript.unlink()
        assert isinstance(ClaudeCodeTranscripts().scan_one(probe(transcript)), UpstreamMissing)

    def test_any_other_read_error_is_nothing_and_logged(self, tmp_path: Path) -> None:
        """R-U4: an unreadable path is not a missing one: nothing is known this time."""
        with capture_logs() as logs:
            assert ClaudeCodeTranscripts().scan_one(probe(tmp_path)) is None
        assert [e["event"] for e in logs] == ["claude_transcript_read_failed"]

    def test_a_marker_past_the_end_rebases(self, transcript: Path) -> None:
        """R-U5: a transcript that shrank is read again from its last complete line."""
        size = transcript.stat().st_size
        found = ClaudeCodeTranscripts().scan_one(probe(transcript, marker=str(size + 100)))
        assert found == UpstreamActivity(0, str(size))

    def test_the_batch_answers_every_probe(self, transcript: Path, tmp_path: Path) -> None:
        """R-U2: a scan answers for each link of the batch, by session id."""
        gone, here = probe(tmp_path / "gone.jsonl"), probe(transcript)
        results = ClaudeCodeTranscripts().scan([gone, here])
        assert isinstance(results[gone.session_id], UpstreamMissing)
        assert activity(results[here.session_id]).human_turns == 3


class TestScanCap:
    def test_a_scan_reads_at_most_one_mebibyte_then_the_next_goes_on(self, tmp_path: Path) -> None:
        """R-U5, R-R3: 1 MiB per scan, complete lines only; nothing is lost across scans."""
        path = tmp_path / "big.jsonl"
        path.write_bytes(b"")
        rows = [user_row(f"turn {i} " + "x" * 3000, f"u-{i}") for i in range(500)]
        append(path, *rows)
        assert path.stat().st_size > MAX_SCAN_BYTES
        provider, marker, turns = ClaudeCodeTranscripts(), "0", []
        while marker != str(path.stat().st_size):
            found = activity(provider.scan_one(probe(path, marker=marker)))
            assert int(found.marker or 0) - int(marker) <= MAX_SCAN_BYTES
            marker = found.marker or ""
            turns.append(found.human_turns)
        assert sum(turns) == 500
        assert len(turns) == 2

    def test_a_row_just_under_the_cap_is_read(self, tmp_path: Path) -> None:
        """R-U5: a line (newline included) of exactly the cap is read whole."""
        path = tmp_path / "edge.jsonl"
        head = line(user_row("", "u-big"))
        body = "y" * (MAX_SCAN_BYTES - len(head))
        path.write_bytes(line(user_row(body, "u-big")))
        assert path.stat().st_size == MAX_SCAN_BYTES
        found = activity(ClaudeCodeTranscripts().scan_one(probe(path)))
        assert (found.human_turns, found.marker) == (1, str(MAX_SCAN_BYTES))

    def test_a_row_over_the_cap_blocks_the_link_and_is_logged_once(self, tmp_path: Path) -> None:
        """R-U5: a line larger than the cap blocks that link; no byte is skipped unread."""
        path = tmp_path / "huge.jsonl"
        path.write_bytes(line(user_row("z" * MAX_SCAN_BYTES, "u-huge")))
        append(path, user_row("after the huge row", "u-after"))
        provider = ClaudeCodeTranscripts()
        with capture_logs() as logs:
            assert provider.scan_one(probe(path)) is None
            assert provider.scan_one(probe(path)) is None
        assert [e["event"] for e in logs] == ["claude_transcript_line_too_large"]
