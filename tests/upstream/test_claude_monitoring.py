"""End to end: a Claude Code transcript adopted, typed into, then deleted (R-U1–R-U5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from session_awareness.application import InvalidArgumentError, SessionAwareness
from session_awareness.infrastructure.claude_code import CATALOG_ID, ClaudeCodeTranscripts
from session_awareness.infrastructure.upstream_commands import adopt_claude_transcript, scan_once
from tests.conftest import ServiceFactory
from tests.contract.helpers import CHILD, MANAGER, notice, spawn
from tests.upstream.claude_files import SESSION_UUID, append, sample_transcript, user_row
from tests.upstream.fakes import events, kinds

OWN = ["Please run the   tests again"]


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    return sample_transcript(tmp_path)


@pytest.fixture
def claude(open_svc: ServiceFactory) -> SessionAwareness:
    """A host with the Claude Code provider and its own recent user texts."""
    return open_svc(
        upstream_providers={CATALOG_ID: ClaudeCodeTranscripts()},
        own_user_texts=lambda key, agent_id: OWN,
    )


class TestClaudeCodeMonitoring:
    def test_adopting_a_transcript_links_it_after_its_current_end(
        self, claude: SessionAwareness, transcript: Path
    ) -> None:
        """R-U1: adoption links the transcript; what it already holds is not news."""
        spawn(claude)
        link = adopt_claude_transcript(claude, CHILD, transcript)
        assert link["adopted"] is True
        assert (link["catalogId"], link["threadId"]) == (CATALOG_ID, SESSION_UUID)
        assert link["marker"] == str(transcript.stat().st_size)
        assert scan_once(claude) == [
            {"sessionKey": CHILD, "agentId": "main", "catalogId": CATALOG_ID, "outcome": "idle"}
        ]

    def test_a_human_typing_upstream_reaches_the_watcher_once(
        self, claude: SessionAwareness, transcript: Path
    ) -> None:
        """R-U3: two typed turns are one `human_direct_message` via claude-code with
        `turns` 2; an echo of the session's own text is not counted; a notice opens."""
        spawn(claude)
        adopt_claude_transcript(claude, CHILD, transcript)
        append(
            transcript,
            user_row("Use the staging database", "u-101"),
            user_row("Please run the tests again", "u-102"),
            user_row([{"type": "text", "text": "and skip the slow ones"}], "u-103"),
        )
        assert scan_once(claude)[0]["outcome"] == "recorded"
        event = events(claude)[-1]
        assert event["summary"] == "human message via claude-code"
        assert event["payload"] == {"channel": CATALOG_ID, "turns": 2}
        assert claude.pending_notices(MANAGER) == [notice(CHILD, 1)]
        assert scan_once(claude)[0]["outcome"] == "idle"
        assert kinds(claude).count("human_direct_message") == 1

    def test_a_deleted_transcript_is_missing_three_times_then_the_watcher_is_told(
        self, claude: SessionAwareness, transcript: Path
    ) -> None:
        """R-U4: three scans without the file record `upstream_missing`, seen by the
        watcher as a notice, and the link is gone."""
        spawn(claude)
        adopt_claude_transcript(claude, CHILD, transcript)
        transcript.unlink()
        found = [scan_once(claude)[0]["outcome"] for _ in range(3)]
        assert found == ["missing", "missing", "missing_recorded"]
        assert kinds(claude)[-1] == "upstream_missing"
        assert claude.pending_notices(MANAGER) == [notice(CHILD, 1)]
        assert claude.upstream_link(CHILD) is None
        assert scan_once(claude) == []

    def test_the_scan_command_brings_its_own_provider(
        self, open_svc: ServiceFactory, transcript: Path
    ) -> None:
        """R-U2: `upstream scan` works on a service opened without providers."""
        svc = open_svc()
        spawn(svc)
        adopt_claude_transcript(svc, CHILD, transcript)
        append(transcript, user_row("one more thing", "u-201"))
        assert scan_once(svc)[0]["outcome"] == "recorded"

    def test_adopt_opens_an_unknown_session(
        self, claude: SessionAwareness, transcript: Path
    ) -> None:
        """R-U1: adopting into a key not yet known opens it, then links it."""
        link = adopt_claude_transcript(claude, "agent:main:adopted", transcript)
        assert link["adopted"] is True
        assert [e["kind"] for e in events(claude, "agent:main:adopted")] == ["adopted"]

    def test_adopt_refuses_a_path_without_a_transcript(
        self, claude: SessionAwareness, tmp_path: Path
    ) -> None:
        """R-U1: a missing transcript is a typed error naming the argument."""
        spawn(claude)
        with pytest.raises(InvalidArgumentError, match="claudeTranscript"):
            adopt_claude_transcript(claude, CHILD, tmp_path / "nothing.jsonl")
