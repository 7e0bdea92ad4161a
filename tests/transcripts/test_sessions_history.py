"""`sessions_history` on both backends: the Claude Code source (noted by the hook or adopted)
and a host's source; pagination, bounds, `not_available` and visibility (R-T1, R-T2)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from session_awareness.application import InvalidArgumentError, open_service
from session_awareness.application.transcript_port import (
    TranscriptBlock,
    TranscriptRef,
    TranscriptRow,
    TranscriptSession,
)
from session_awareness.application.transcript_view import (
    MAX_PAGE_BYTES,
    MAX_TEXT_CHARS,
    OMITTED,
    history_json,
    shown_row,
)
from session_awareness.application.transcripts import TranscriptNotAvailableError
from session_awareness.infrastructure.claude_hooks import Signal, apply, parse
from session_awareness.infrastructure.claude_state import ClaudeState
from session_awareness.infrastructure.claude_transcripts import ClaudeCodeTranscriptSource
from session_awareness.infrastructure.cli import main
from session_awareness.infrastructure.mcp_tools import available_tools
from session_awareness.infrastructure.upstream_commands import adopt_claude_transcript
from tests.conftest import FakeClock, ServiceFactory
from tests.tools.helpers import MAIN, OPS, WORKER, build_world

FIXTURE = Path(__file__).parents[1] / "upstream" / "fixtures" / "claude-code-transcript.jsonl"
REDIRECT = "Stop — use the v2 pricing endpoint instead, v1 is being retired."


class HostTranscripts:
    """A host's own transcripts, by session key, oldest first as written."""

    def __init__(self) -> None:
        self.rows: dict[str, list[TranscriptRow]] = {}

    def add(self, key: str, *texts: str, role: str = "user") -> None:
        rows = self.rows.setdefault(key, [])
        for text in texts:
            blocks = (TranscriptBlock("text", text),)
            rows.append(TranscriptRow(f"p{len(rows)}", role, blocks, 1_000 + len(rows)))  # type: ignore[arg-type]

    def newest_first(self, session: TranscriptSession) -> Iterator[TranscriptRow] | None:
        rows = self.rows.get(session.key)
        return None if rows is None else reversed(rows)


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    path = tmp_path / "7d1c9a52.jsonl"
    shutil.copy(FIXTURE, path)
    return path


def texts(page: dict[str, Any]) -> list[str]:
    return [b.get("text", b.get("name")) for m in page["messages"] for b in m["content"]]


class TestClaudeCodeSource:
    def test_the_lead_reads_the_workers_redirected_prompt(
        self, open_svc: ServiceFactory, clock: FakeClock, transcript: Path
    ) -> None:
        """A noted Claude Code transcript: the human's redirect is the newest turns' text;
        meta rows and the compaction summary are not messages; tools stay out by default."""
        svc = open_svc()
        build_world(svc, clock)
        svc.note_transcript(WORKER, source="claude-code", ref=str(transcript))
        page = svc.tools.call("sessions_history", {"sessionKey": WORKER}, caller=MAIN)
        assert REDIRECT in texts(page)
        assert [m["position"] for m in page["messages"]] == [
            "u-001", "a-002", "a-004", "u-006", "u-007", "u-010",
        ]  # fmt: skip
        assert page["truncated"] is False and page["droppedMessages"] == 0
        assert "offset" not in page
        with_tools = svc.sessions_history(WORKER, include_tools=True)
        kinds = [b["type"] for m in with_tools["messages"] for b in m["content"]]
        assert "toolCall" in kinds and "toolResult" in kinds

    def test_an_adopted_transcript_is_read_through_its_upstream_link(
        self, open_svc: ServiceFactory, transcript: Path
    ) -> None:
        """`adopt KEY --claude-transcript PATH` is enough: no host configuration."""
        svc = open_svc()
        adopt_claude_transcript(svc, "agent:main:worker", transcript)
        page = svc.sessions_history("agent:main:worker", limit=1)
        assert texts(page) == ["Also add   a changelog entry."]
        assert page["truncated"] is True

    def test_only_complete_lines_are_read(self, open_svc: ServiceFactory, transcript: Path) -> None:
        """A line still being written is not shown until it is complete."""
        svc = open_svc()
        svc.open_session(WORKER)
        svc.note_transcript(WORKER, source="claude-code", ref=str(transcript))
        row = {"type": "user", "uuid": "u-011", "message": {"role": "user", "content": "half"}}
        with transcript.open("a") as file:
            file.write(json.dumps(row)[:30])
        assert svc.sessions_history(WORKER, limit=1)["messages"][0]["position"] == "u-010"

    def test_a_read_bound_reports_older_rows_as_unread(self, transcript: Path) -> None:
        """Bounded reads: what lies beyond the bound is reported, never silently missing."""
        source = ClaudeCodeTranscriptSource(max_bytes=600)
        session = TranscriptSession(WORKER, "main", TranscriptRef("claude-code", str(transcript)))
        rows = source.newest_first(session)
        assert rows is not None
        page = history_json(WORKER, rows, limit=100, offset=0, include_tools=False)
        assert page["truncated"] is True and page["hasMore"] is False

    def test_a_deleted_transcript_file_is_not_available(
        self, open_svc: ServiceFactory, transcript: Path
    ) -> None:
        svc = open_svc()
        svc.open_session(WORKER)
        svc.note_transcript(WORKER, source="claude-code", ref=str(transcript))
        transcript.unlink()
        with pytest.raises(TranscriptNotAvailableError):
            svc.sessions_history(WORKER)


class TestTheHook:
    def test_every_hook_event_notes_the_transcript_path_and_the_relay_keeps_it(
        self, open_svc: ServiceFactory, transcript: Path, tmp_path: Path
    ) -> None:
        """The hook remembers `transcript_path` on the session, durably, as an event only
        when it changed; a relayed signal carries it."""
        svc = open_svc()
        state = ClaudeState(tmp_path / "state")
        raw = {"hook_event_name": "SessionStart", "session_id": "abc123", "source": "startup",
               "transcript_path": str(transcript), "cwd": str(tmp_path)}  # fmt: skip
        signal = parse(json.dumps(raw), state, now_ms=1)
        assert Signal.from_json(json.loads(json.dumps(signal.to_json()))) == signal
        apply(svc, signal, agent="claude")
        prompt = {**raw, "hook_event_name": "UserPromptSubmit", "prompt": "secret words"}
        apply(svc, parse(json.dumps(prompt), state, now_ms=2), agent="claude")
        key = "agent:claude:claude:abc123"
        noted = [e for e in svc.history(key) if e["event"] == "transcript_noted"]
        assert len(noted) == 1
        assert REDIRECT in texts(svc.sessions_history(key))

    def test_a_signal_kept_by_the_previous_version_still_reads(self) -> None:
        """A spooled or relayed signal without `transcript_path` (written before it existed)
        is still a signal, with no transcript to note."""
        kept = {"event": "UserPromptSubmit", "session_id": "abc", "at": 5,
                "idempotency_key": "claude-code:1"}  # fmt: skip
        assert Signal.from_json(kept).transcript_path is None

    def test_a_malformed_transcript_path_is_ignored(self, tmp_path: Path) -> None:
        state = ClaudeState(tmp_path / "state")
        for path in ("relative\nbreak.jsonl", "/no/suffix", 7, " /padded.jsonl"):
            raw = {"hook_event_name": "PreCompact", "session_id": "abc", "transcript_path": path}
            assert parse(json.dumps(raw), state, now_ms=1).transcript_path is None


class TestHostSourceAndBounds:
    def test_pages_walk_backward_without_gaps_or_repeats(
        self, open_svc: ServiceFactory, clock: FakeClock
    ) -> None:
        """`offset: 0` gives hasMore and nextOffset; following them reads every row once."""
        host = HostTranscripts()
        host.add(WORKER, *(f"turn {n}" for n in range(25)))
        svc = open_svc(transcripts=[host])
        build_world(svc, clock)
        seen: list[str] = []
        offset: int | None = 0
        while offset is not None:
            page = svc.tools.call(
                "sessions_history", {"sessionKey": WORKER, "limit": 10, "offset": offset},
                caller=MAIN,
            )  # fmt: skip
            assert page["offset"] == offset
            seen = texts(page) + seen
            offset = page.get("nextOffset")
            assert page["hasMore"] is (offset is not None)
        assert seen == [f"turn {n}" for n in range(25)]

    def test_a_long_text_is_cut_and_an_oversized_row_is_omitted(
        self, open_svc: ServiceFactory, clock: FakeClock
    ) -> None:
        host = HostTranscripts()
        row = TranscriptRow("big", "assistant", tuple(TranscriptBlock("text", "y" * 5000)
                                                      for _ in range(5)))  # fmt: skip
        host.add(WORKER, "x" * (MAX_TEXT_CHARS + 10))
        host.rows[WORKER].append(row)
        svc = open_svc(transcripts=[host])
        build_world(svc, clock)
        page = svc.sessions_history(WORKER)
        assert page["contentTruncated"] is True
        assert len(texts(page)[0]) == MAX_TEXT_CHARS
        assert texts(page)[1] == OMITTED

    def test_a_very_large_history_drops_older_rows_and_counts_them(
        self, open_svc: ServiceFactory, clock: FakeClock
    ) -> None:
        host = HostTranscripts()
        host.add(WORKER, *(f"{n} " + "z" * 3900 for n in range(20)))
        svc = open_svc(transcripts=[host])
        build_world(svc, clock)
        page = svc.sessions_history(WORKER, offset=0)
        kept = len(page["messages"])
        assert 0 < kept < 20 and page["droppedMessages"] == 20 - kept
        assert page["truncated"] is True and page["nextOffset"] == kept
        assert texts(page)[-1].startswith("19 ")  # the newest stay
        assert page["bytes"] == len(json.dumps(page["messages"], ensure_ascii=False).encode())
        assert page["bytes"] <= MAX_PAGE_BYTES

    def test_secrets_and_scaffolding_are_filtered_and_flagged(
        self, open_svc: ServiceFactory, clock: FakeClock
    ) -> None:
        host = HostTranscripts()
        blocks = (
            TranscriptBlock("text", "key sk-"),
            TranscriptBlock("text", "ant-api03-AbCdEfGhIjKlMnOpQrSt <|im_end|>"),
        )
        host.rows[WORKER] = [TranscriptRow("r", "assistant", blocks)]
        svc = open_svc(transcripts=[host])
        build_world(svc, clock)
        page = svc.sessions_history(WORKER)
        assert page["contentRedacted"] is True
        assert "AbCdEf" not in json.dumps(page) and "im_end" not in json.dumps(page)


def test_a_secret_split_by_a_stripped_tag_is_still_redacted() -> None:
    """Stripping `<think>…</think>` joins the halves of a key: redaction comes after it."""
    text = "k sk-<think>x</think>ant-api03-AbCdEfGhIjKlMnOpQrSt"
    row = TranscriptRow("r", "assistant", (TranscriptBlock("text", text),))
    shown = shown_row(row, include_tools=False)
    assert shown is not None and shown.redacted
    assert shown.message["content"] == [{"type": "text", "text": "k [REDACTED]"}]


class TestNotAvailableAndVisibility:
    def test_every_session_without_a_source_answers_the_same_shape(
        self, open_svc: ServiceFactory, clock: FakeClock
    ) -> None:
        """`not_available`, field `sessionKey`, the message differing only by the key."""
        svc = open_svc(transcripts=[HostTranscripts()])
        build_world(svc, clock)
        answers = [
            svc.tools.call("sessions_history", {"sessionKey": key}, caller=MAIN)
            for key in (MAIN, WORKER)
        ]
        shapes = [
            json.dumps(a).replace(key, "<key>")
            for a, key in zip(answers, (MAIN, WORKER), strict=True)
        ]
        assert answers[0]["error"]["code"] == "not_available"
        assert shapes[0] == shapes[1]

    def test_an_invisible_session_with_a_transcript_reads_as_unknown(
        self, open_svc: ServiceFactory, clock: FakeClock
    ) -> None:
        host = HostTranscripts()
        host.add(OPS, "hidden")
        svc = open_svc(transcripts=[host])
        build_world(svc, clock)
        seen = svc.tools.call("sessions_history", {"sessionKey": OPS}, caller=WORKER)
        ghost = svc.tools.call("sessions_history", {"sessionKey": "agent:ops:ghost"}, caller=WORKER)
        assert json.dumps(seen).replace(OPS, "k") == json.dumps(ghost).replace(
            "agent:ops:ghost", "k"
        )
        assert seen["error"]["code"] == "unknown_session"

    def test_the_mcp_server_lists_the_tool_only_with_a_source(
        self, open_svc: ServiceFactory
    ) -> None:
        assert "sessions_history" in available_tools(open_svc())
        assert "sessions_history" not in available_tools(open_svc(transcripts=[]))

    def test_the_embedding_api_refuses_bad_arguments_naming_the_field(
        self, open_svc: ServiceFactory
    ) -> None:
        svc = open_svc()
        cases = [
            ({"limit": 0}, "limit"),
            ({"offset": -1}, "offset"),
            ({"include_tools": "yes"}, "includeTools"),
            ({"limit": True}, "limit"),
        ]
        for kwargs, field in cases:
            with pytest.raises(InvalidArgumentError) as raised:
                svc.sessions_history(MAIN, **kwargs)
            assert raised.value.field == field


def test_nothing_read_is_logged(open_svc: ServiceFactory, transcript: Path) -> None:
    """The service never logs transcript content."""
    svc = open_svc()
    svc.open_session(WORKER)
    svc.note_transcript(WORKER, source="claude-code", ref=str(transcript))
    with capture_logs() as logs:
        svc.tools.call("sessions_history", {"sessionKey": WORKER}, caller=WORKER)
    assert "v2 pricing" not in repr(logs)


class TestTheCli:
    def test_transcript_shows_the_view_and_json_is_the_tools_answer(
        self, tmp_path: Path, transcript: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`session-awareness transcript KEY` reads an adopted transcript, no configuration;
        `--json` prints the embedding API's JSON; a session without one exits 2."""
        url = f"sqlite:///{tmp_path / 'cli.db'}"
        with open_service(url) as svc:
            adopt_claude_transcript(svc, "agent:main:worker", transcript)
            svc.open_session("agent:main:bare")
            expected = svc.sessions_history("agent:main:worker", limit=2, offset=0)
        argv = ["transcript", "agent:main:worker", "--limit", "2", "--offset", "0"]
        assert main([*argv, "--database-url", url]) == 0
        out = capsys.readouterr().out
        assert REDIRECT in out and "next --offset 2" in out
        assert main([*argv, "--json", "--database-url", url]) == 0
        assert json.loads(capsys.readouterr().out) == expected
        assert main(["transcript", "agent:main:bare", "--database-url", url]) == 2
        assert "No transcript is available" in capsys.readouterr().err
