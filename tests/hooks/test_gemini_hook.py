"""The Gemini CLI hook, run as Gemini CLI runs it: a process per event, the JSON Gemini CLI
0.61 sends on stdin, on both backends; beside Claude Code sessions in one store (R-A1)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from session_awareness.application import open_service
from session_awareness.application.transcript_port import TranscriptRef, TranscriptSession
from session_awareness.infrastructure.claude_relay import socket_path
from session_awareness.infrastructure.claude_state import ClaudeState, process_identity
from session_awareness.infrastructure.gemini_transcripts import GeminiCliTranscriptSource
from tests.hooks.helpers import FIXTURES, HookRun, fixture, lead_key, run_hook
from tests.mcp.helpers import call, connected, run

GEMINI_HOOK = [sys.executable, "-m", "session_awareness.infrastructure.claude_hooks", "gemini-cli"]
LEAD, WORKER = "lead-0001", "worker-0001"
CHAT = FIXTURES / "gemini" / "chat.jsonl"


def gemini_fixture(name: str, **fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / "gemini" / f"{name}.json").read_text())
    data.update(fields)
    return data


def gemini_key(session_id: str, agent: str = "gemini") -> str:
    return f"agent:{agent}:gemini:{session_id}"


def gemini_hook(event: dict[str, Any] | str, url: str, state: Path) -> HookRun:
    return run_hook(event, url=url, state_dir=state, command=GEMINI_HOOK)


def gemini_context(done: HookRun) -> str | None:
    """The `additionalContext` of the `BeforeAgent` output, checking stdout is only it."""
    assert (done.returncode, done.stderr) == (0, "")
    if not done.stdout:
        return None
    output = json.loads(done.stdout)
    assert list(output) == ["hookSpecificOutput"]
    assert output["hookSpecificOutput"]["hookEventName"] == "BeforeAgent"
    return str(output["hookSpecificOutput"]["additionalContext"])


def start(session_id: str, url: str, state: Path, **fields: Any) -> None:
    done = gemini_hook(gemini_fixture("session_start", session_id=session_id, **fields), url, state)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def prompt(session_id: str, url: str, state: Path) -> str | None:
    return gemini_context(
        gemini_hook(gemini_fixture("before_agent", session_id=session_id), url, state)
    )


class TestGeminiSessions:
    def test_a_human_turn_in_a_worker_reaches_the_leads_next_turn_once(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """Two Gemini CLI sessions: a human turn in the watched one (`BeforeAgent`) becomes
        one notice in the watcher's next `BeforeAgent` output, drained once handed over
        (R-A1, R-L6, R-N3); the prompt's text is not stored."""
        state = tmp_path / "state"
        for session in (LEAD, WORKER):
            start(session, database_url, state)
        with open_service(database_url) as svc:
            assert svc.watch(gemini_key(LEAD), gemini_key(WORKER))

        assert prompt(WORKER, database_url, state) is None
        assert prompt(LEAD, database_url, state) == (
            f'Session "{gemini_key(WORKER)}" changed (other actor). Reconcile before acting: '
            f'session_status sessionKey "{gemini_key(WORKER)}" changesSince 0.'
        )
        assert prompt(LEAD, database_url, state) is None  # nothing changed since
        with open_service(database_url) as svc:
            events = svc.session_status(gemini_key(WORKER), changes_since=0)["stateChanges"]
        assert [(e["kind"], e["payload"]) for e in events["events"]] == [
            ("human_direct_message", {"channel": "gemini-cli"})
        ]
        assert "rollback" not in json.dumps(events)

    def test_claude_code_and_gemini_cli_sessions_watch_each_other(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """One store, both CLIs: the keys name the CLI, so a Claude Code lead hears of a human
        turn in a Gemini CLI worker, and a Gemini CLI lead of one in a Claude Code worker,
        each in its own CLI's output (R-A1)."""
        state = tmp_path / "state"
        start(WORKER, database_url, state)
        start(LEAD, database_url, state)
        for session in (LEAD, WORKER):
            claude_start = fixture("session_start", session_id=session)
            assert run_hook(claude_start, url=database_url, state_dir=state).stdout == ""
        with open_service(database_url) as svc:
            assert svc.watch(lead_key(LEAD), gemini_key(WORKER))
            assert svc.watch(gemini_key(LEAD), lead_key(WORKER))

        assert prompt(WORKER, database_url, state) is None  # the human turns to Gemini's worker
        claude_prompt = fixture("user_prompt_submit", session_id=WORKER)
        assert run_hook(claude_prompt, url=database_url, state_dir=state).context is None

        claude_lead = run_hook(
            fixture("user_prompt_submit", session_id=LEAD), url=database_url, state_dir=state
        )
        assert claude_lead.context is not None
        assert f'"{gemini_key(WORKER)}" changed' in claude_lead.context
        gemini_lead = prompt(LEAD, database_url, state)
        assert gemini_lead is not None and f'"{lead_key(WORKER)}" changed' in gemini_lead

    def test_the_key_names_the_agent_given(self, tmp_path: Path) -> None:
        """`--agent A`: the session is `agent:A:gemini:<session_id>`."""
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        event = gemini_fixture("session_start", session_id=LEAD)
        done = run_hook(
            event, url=url, state_dir=tmp_path / "state", command=GEMINI_HOOK,
            args=("--agent", "team"),
        )  # fmt: skip
        assert (done.returncode, done.stdout) == (0, "")
        with open_service(url) as svc:
            assert [row.key for row in svc.session_rows()] == [gemini_key(LEAD, "team")]


class TestCompaction:
    def test_only_a_manual_compression_is_a_compaction(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """Gemini CLI fires `PreCompress` `auto` before every turn's compression check, also
        when it compresses nothing: that records nothing; `/compress` (`manual`) records
        `compacted`, once however often it is announced (R-L5)."""
        state = tmp_path / "state"
        chat = tmp_path / "chat.jsonl"
        chat.write_text(CHAT.read_text())
        start(LEAD, database_url, state, transcript_path=str(chat))
        for trigger in ("auto", "auto", "manual", "manual"):
            event = gemini_fixture(
                "pre_compress", session_id=LEAD, trigger=trigger, transcript_path=str(chat)
            )
            done = gemini_hook(event, database_url, state)
            assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        with open_service(database_url) as svc:
            events = svc.session_status(gemini_key(LEAD), changes_since=0)["stateChanges"]
        assert [e["kind"] for e in events["events"]] == ["compacted"]
        assert not (state / "hook.log").exists()


class TestNeverBlocksTheTurn:
    @pytest.mark.parametrize(
        ("text", "why"),
        [
            ("{not json", "input is not JSON"),
            (json.dumps(gemini_fixture("session_end")), "unmapped hook event 'SessionEnd'"),
            (json.dumps(gemini_fixture("before_agent", session_id="")), "session_id"),
            (json.dumps(gemini_fixture("session_start", source="compact")), "source"),
            (json.dumps(fixture("user_prompt_submit")), "'UserPromptSubmit'"),
        ],
    )
    def test_unmapped_input_exits_0_with_nothing_and_the_reason_in_the_log(
        self, text: str, why: str, tmp_path: Path
    ) -> None:
        """Gemini CLI shows a hook's stderr to the user when its stdout is empty, so an input
        the hook cannot map exits 0 with nothing on stdout or stderr; the reason is one line
        of the state directory's hook.log, and no session is recorded (R-A1, R-L8)."""
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        state = tmp_path / "state"
        done = gemini_hook(text, url, state)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        log = (state / "hook.log").read_text()
        assert len(log.splitlines()) == 1 and why in log
        with open_service(url) as svc:
            assert svc.session_rows() == []

    def test_an_unreachable_store_keeps_the_signal_for_the_next_run(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """With the store down: exit 0, nothing on stderr, the signal kept (never the
        prompt), the line in hook.log; the first run of the session's outage also has Gemini
        CLI show the user a warning (its JSON `systemMessage`), later ones print nothing on
        stdout; the next run that reaches the store records what was kept first (R-A1,
        R-L8, R-L9, ADR 050)."""
        state = tmp_path / "state"
        down = "postgresql://nobody@127.0.0.1:9/none?connect_timeout=1"
        for session in (LEAD, WORKER):
            start(session, database_url, state)
        with open_service(database_url) as svc:
            assert svc.watch(gemini_key(LEAD), gemini_key(WORKER))

        first = gemini_hook(gemini_fixture("before_agent", session_id=WORKER), down, state)
        assert (first.returncode, first.stderr) == (0, "")
        assert first.told is not None and "until it is back" in first.told
        assert first.told in (state / "hook.log").read_text()
        done = gemini_hook(gemini_fixture("before_agent", session_id=WORKER), down, state)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        assert "signal kept" in (state / "hook.log").read_text()
        assert "rollback" not in "".join(p.read_text() for p in (state / "spool").iterdir())

        assert prompt(LEAD, database_url, state) is not None  # recorded, then drained
        with open_service(database_url) as svc:
            assert svc.session_status(gemini_key(WORKER))["stateVersion"] == 2

    def test_a_store_it_can_never_record_into_is_a_warning_the_user_sees(
        self, tmp_path: Path
    ) -> None:
        """An in-memory store: a warning Gemini CLI shows the user (the JSON output's
        `systemMessage`; exit 0, nothing on stderr, which it would show too), the line also
        in hook.log; the signal is kept and recorded by the first run with a store (R-L9,
        R-A1)."""
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        state = tmp_path / "state"
        done = gemini_hook(
            gemini_fixture("session_start", session_id=LEAD), "sqlite:///:memory:", state
        )
        assert (done.returncode, done.stderr) == (0, "")
        assert done.told is not None and "in-memory" in done.told
        assert done.told in (state / "hook.log").read_text()

        start(WORKER, url, state)
        with open_service(url) as svc:
            assert {row.key for row in svc.session_rows()} == {gemini_key(LEAD), gemini_key(WORKER)}


class TestCommandLine:
    def test_the_cli_subcommand_is_the_same_hook(self, tmp_path: Path) -> None:
        """`session-awareness hook gemini-cli` maps events exactly as the installed module."""
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        cli = [sys.executable, "-m", "session_awareness.infrastructure.cli", "hook", "gemini-cli"]
        done = run_hook(
            gemini_fixture("session_start", session_id=LEAD),
            url=url,
            state_dir=tmp_path / "state",
            command=cli,
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        with open_service(url) as svc:
            assert [row.key for row in svc.session_rows()] == [gemini_key(LEAD)]


class TestTheMcpServer:
    def test_under_gemini_cli_the_caller_is_the_session_that_started_the_server(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """Gemini CLI gives its MCP servers no session id: the `SessionStart` hook records,
        for the Gemini CLI process it runs under, which session of which CLI that process
        runs, and the server (a child of the same process) resolves its caller from that
        record on every call, following `/clear` (R-A1)."""
        state = tmp_path / "state"

        async def current(client: object) -> str:
            status, _, _ = await call(client, "session_status", {"sessionKey": "current"})  # type: ignore[arg-type]
            return str(status.get("sessionKey") or status["error"]["message"])

        async def scenario() -> None:
            async with connected(database_url, state, "--agent", "gemini") as client:
                # The hooks and the server are children of one process, as under Gemini CLI.
                for session, source in (("first-id", "startup"), ("second-id", "clear")):
                    start(session, database_url, state, source=source)
                    assert await current(client) == gemini_key(session)

        run(scenario)

    def test_a_session_resumed_without_a_session_start_is_followed_by_its_first_prompt(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """Gemini CLI's in-app `/resume` switches the process to another session and fires
        no `SessionStart`: the server went on serving the session the user left, so the
        model's watches were the old session's, and their notices never reached the user's.
        The resumed session's first prompt moves the record, and the server follows (R-A1)."""
        state = tmp_path / "state"

        async def scenario() -> None:
            async with connected(database_url, state, "--agent", "gemini") as client:
                start("first-id", database_url, state)
                assert prompt("resumed-id", database_url, state) is None
                status, _, _ = await call(client, "session_status", {"sessionKey": "current"})
                assert status["sessionKey"] == gemini_key("resumed-id")

        run(scenario)

    def test_gemini_hooks_under_the_servers_process_record_through_the_server(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """A Gemini CLI hook run whose parent also started the MCP server hands its signal to
        the server (the hook opens no service: its --verbose stderr is empty) and prints the
        notices drained; session_status over MCP returns the exact delta (R-A1, R-N3)."""
        state = tmp_path / "state"

        def hook(name: str, session: str) -> HookRun:
            return run_hook(gemini_fixture(name, session_id=session), url=database_url,
                            state_dir=state, command=GEMINI_HOOK, args=("--verbose",))  # fmt: skip

        async def scenario() -> None:
            async with connected(
                database_url, state, "--visibility", "agent", "--agent", "gemini"
            ) as client:
                host = process_identity(os.getpid())
                assert host is not None
                path = socket_path(ClaudeState(state), host)
                with anyio.fail_after(30):
                    while not path.exists():
                        await anyio.sleep(0.02)
                for session in ("worker-1", "lead-1"):
                    done = hook("session_start", session)
                    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
                watched, _, _ = await call(
                    client, "session_watch", {"sessionKey": gemini_key("worker-1")}
                )
                assert watched["watched"] is True
                assert gemini_context(hook("before_agent", "worker-1")) is None
                notice = gemini_context(hook("before_agent", "lead-1"))
                assert notice is not None and gemini_key("worker-1") in notice
                since = int(notice.rstrip(".").rsplit(" ", 1)[1])
                status, failed, _ = await call(
                    client,
                    "session_status",
                    {"sessionKey": gemini_key("worker-1"), "changesSince": since},
                )
                assert not failed
                assert [(e["kind"], e["payload"]) for e in status["stateChanges"]["events"]] == [
                    ("human_direct_message", {"channel": "gemini-cli"})
                ]
                assert gemini_context(hook("before_agent", "lead-1")) is None

        run(scenario)


class TestTranscript:
    def test_sessions_history_reads_the_gemini_chat_file_as_gemini_cli_loads_it(
        self, tmp_path: Path
    ) -> None:
        """The chat file is replayed as Gemini CLI replays it: a message updated in place, a
        rewound turn gone, the set-up message and `info` records not shown, the human's own
        words (`displayContent`, not the hook's context), tool calls and results kept apart
        for the view's filter (R-T1)."""
        source = GeminiCliTranscriptSource()
        session = TranscriptSession(
            gemini_key(LEAD), "gemini", TranscriptRef("gemini-cli", str(CHAT))
        )
        rows = list(source.newest_first(session) or [])
        shown = [(r.position, r.role, [(b.type, b.name, b.text) for b in r.blocks]) for r in rows]  # type: ignore[union-attr]
        assert shown == [
            ("g3", "assistant", [("text", None, "Staying on v2.")]),
            (
                "u3",
                "user",
                [
                    (
                        "text",
                        None,
                        "Stop — use the v2 pricing endpoint instead, v1 is being retired.",
                    )
                ],
            ),
            (
                "g1",
                "assistant",
                [
                    ("text", None, "Reading the handler first."),
                    ("toolCall", "read_file", '{"file_path": "api/pricing.py"}'),
                    ("toolResult", None, "def price(item): ..."),
                ],
            ),
            ("u1", "user", [("text", None, "Add the v2 pricing endpoint.")]),
        ]

    def test_a_chat_file_beyond_the_read_bound_says_older_rows_are_unread(
        self, tmp_path: Path
    ) -> None:
        """Only the newest `max_bytes` are read, from a whole line; what lies before is
        reported unread, never skipped silently; a line still being written waits."""
        chat = tmp_path / "chat.jsonl"
        chat.write_text(CHAT.read_text() + '{"id": "g4", "type": "gemini", "content": "half')
        source = GeminiCliTranscriptSource(max_bytes=850)
        session = TranscriptSession(
            gemini_key(LEAD), "gemini", TranscriptRef("gemini-cli", str(chat))
        )
        rows = list(source.newest_first(session) or [])
        assert [getattr(r, "position", "UNREAD") for r in rows] == ["g3", "u3", "UNREAD"]

    def test_the_hook_notes_the_chat_file_and_sessions_history_reads_it(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """The hook remembers the `transcript_path` under source `gemini-cli`; the service's
        default sources read it, through the same safety filter as Claude Code's (R-T1)."""
        state = tmp_path / "state"
        start(LEAD, database_url, state, transcript_path=str(CHAT))
        with open_service(database_url) as svc:
            history = svc.sessions_history(gemini_key(LEAD), limit=2)
        assert [m["position"] for m in history["messages"]] == ["u3", "g3"]
        assert history["messages"][0]["content"] == [
            {
                "type": "text",
                "text": "Stop — use the v2 pricing endpoint instead, v1 is being retired.",
            }
        ]

    def test_the_chat_file_is_read_within_the_history_bounds(self, tmp_path: Path) -> None:
        """The bounds of R-T4 hold for a Gemini CLI chat file too: only a regular file is
        opened (a FIFO is no transcript, and never blocks), a malformed line is skipped and
        counted (through the reader Claude Code's source uses), and a message whose id looks
        like a secret is named by its line's offset (R-T4)."""
        fifo = tmp_path / "chat.fifo"
        os.mkfifo(fifo)
        source = GeminiCliTranscriptSource()
        as_fifo = TranscriptSession(
            gemini_key(LEAD), "gemini", TranscriptRef("gemini-cli", str(fifo))
        )
        assert source.newest_first(as_fifo) is None
        chat = tmp_path / "chat.jsonl"
        secret = "sk-ant-api03-" + "A" * 40
        lines = [
            json.dumps({"id": secret, "type": "user", "content": "Ship it."}),
            "{not json",
            json.dumps({"id": "g1", "type": "gemini", "content": "Shipping."}),
        ]
        chat.write_text("\n".join(lines) + "\n")
        session = TranscriptSession(
            gemini_key(LEAD), "gemini", TranscriptRef("gemini-cli", str(chat))
        )
        rows = list(source.newest_first(session) or [])
        named = [getattr(r, "position", type(r).__name__) for r in rows]
        assert named == ["g1", "offset:0", "UnreadableLine"]
        assert secret not in json.dumps(named)
