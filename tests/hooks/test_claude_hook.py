"""The Claude Code hook, run as Claude Code runs it: a process per event, documented JSON on
stdin, on both backends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from session_awareness.application import open_service
from session_awareness.infrastructure.claude_state import SPOOL_LIMIT, ClaudeState
from tests.hooks.helpers import HookRun, fixture, lead_key, run_hook

LEAD, WORKER_1, WORKER_2 = "lead-0001", "worker-0001", "worker-0002"


def start(session_id: str, url: str, state: Path, source: str = "startup") -> None:
    done = run_hook(
        fixture("session_start", session_id=session_id, source=source), url=url, state_dir=state
    )
    assert (done.returncode, done.stdout) == (0, "")


def prompt(session_id: str, url: str, state: Path) -> str | None:
    done = run_hook(fixture("user_prompt_submit", session_id=session_id), url=url, state_dir=state)
    assert done.returncode == 0, done.stderr
    return done.context


class TestLeadAndWorkers:
    def test_a_human_stepping_into_a_worker_reaches_the_leads_next_prompt_once(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """The lead watches two workers; a human prompt in one becomes one notice in the lead's
        next prompt (R-L6, R-N1, R-N3), and session_status returns the exact delta (R-S1)."""
        state = tmp_path / "state"
        for session in (LEAD, WORKER_1, WORKER_2):
            start(session, database_url, state)
        with open_service(database_url) as svc:
            for worker in (WORKER_1, WORKER_2):
                assert svc.watch(lead_key(LEAD), lead_key(worker))

        assert prompt(WORKER_1, database_url, state) is None  # the human redirects worker 1
        notice = prompt(LEAD, database_url, state)

        assert notice == (
            f'Session "{lead_key(WORKER_1)}" changed (other actor). Reconcile before acting: '
            f'session_status sessionKey "{lead_key(WORKER_1)}" changesSince 0.'
        )
        assert prompt(LEAD, database_url, state) is None  # told once
        with open_service(database_url) as svc:
            status = svc.session_status(lead_key(WORKER_1), changes_since=0)
        events = status["stateChanges"]["events"]
        assert [(e["kind"], e["summary"], e["payload"]) for e in events] == [
            ("human_direct_message", "human message via claude-code", {"channel": "claude-code"})
        ]

    def test_a_prompt_in_an_unwatched_session_records_nothing(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """A human turn on a session with no parent and no watcher is not recorded (R-L6)."""
        state = tmp_path / "state"
        start(WORKER_1, database_url, state)
        assert prompt(WORKER_1, database_url, state) is None
        with open_service(database_url) as svc:
            assert svc.session_status(lead_key(WORKER_1))["stateVersion"] == 0

    def test_a_sub_agents_report_is_no_human_turn_and_still_gets_the_notices(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """Claude Code hands a background sub-agent's report to its session as a prompt of
        its own (`UserPromptSubmit`, the prompt `<task-notification>…`). It was recorded as
        a human message, telling watchers a human had changed the session (R-L6). It records
        none; the session's notices are still handed over into it (R-N3), since its model
        reads that turn too."""
        state = tmp_path / "state"
        for session in (LEAD, WORKER_1):
            start(session, database_url, state)
        with open_service(database_url) as svc:
            assert svc.watch(lead_key(LEAD), lead_key(WORKER_1))
            assert svc.watch(lead_key(WORKER_1), lead_key(LEAD))
        assert prompt(LEAD, database_url, state) is None  # the human's turn in the lead

        report = "<task-notification>\n<task-id>a1</task-id>\n<status>completed</status>"
        done = run_hook(
            fixture("user_prompt_submit", session_id=WORKER_1, prompt=report),
            url=database_url,
            state_dir=state,
        )
        assert (done.returncode, done.stderr) == (0, "")
        assert done.context is not None and lead_key(LEAD) in done.context
        with open_service(database_url) as svc:
            assert svc.session_status(lead_key(WORKER_1))["stateVersion"] == 0
            assert svc.pending_notices(lead_key(LEAD)) == []

    def test_a_first_prompt_without_a_session_start_drains_without_failing(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """R-L9: the hook opens the session before it drains it, so a prompt in a session the
        service has never seen (no SessionStart ran) answers nothing and exits 0, rather than
        meeting `UnknownSessionError`; a sub-agent's stop before its start records nothing
        and fails nothing either."""
        state = tmp_path / "state"
        assert prompt(WORKER_1, database_url, state) is None
        stop = run_hook(
            fixture("subagent_stop", session_id=WORKER_1), url=database_url, state_dir=state
        )
        assert stop.returncode == 0, stop.stderr
        with open_service(database_url) as svc:
            assert svc.drain_notices(lead_key(WORKER_1)) == []


class TestSubagents:
    def test_a_subagent_start_is_a_spawn_edge_the_parent_watches(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """SubagentStart opens `…:subagent:<agent_id>` under the session and records the spawn
        edge (R-L5, R-W1); SubagentStop records the run's end; a human turn on the sub-agent
        reaches the parent's next prompt."""
        state = tmp_path / "state"
        start(LEAD, database_url, state)
        child = f"{lead_key(LEAD)}:subagent:agent-7"
        for name in ("subagent_start", "subagent_stop"):
            done = run_hook(
                fixture(name, session_id=LEAD, agent_id="agent-7"),
                url=database_url,
                state_dir=state,
            )
            assert (done.returncode, done.stdout) == (0, "")
        with open_service(database_url) as svc:
            [row] = svc.session_rows(keys=[child])
            assert (row.kind, row.parent_key, row.label) == ("subagent", lead_key(LEAD), "Explore")
            events = svc.session_status(child, changes_since=0)["stateChanges"]["events"]
            assert [e["kind"] for e in events] == ["child_spawned", "run_completed"]
            svc.record_human_direct_message(child, channel="terminal")
        assert prompt(LEAD, database_url, state) == (
            f'Session "{child}" changed (other actor). Reconcile before acting: '
            f'session_status sessionKey "{child}" changesSince 1.'
        )


class TestLifecycle:
    def test_clear_resets_the_session_it_replaced(self, database_url: str, tmp_path: Path) -> None:
        """`/clear` starts a new session id in the same Claude Code process: the session it
        replaced is reset, so its cursors go (R-W6)."""
        state = tmp_path / "state"
        for session in (LEAD, WORKER_1):
            start(session, database_url, state)
        start(LEAD, database_url, state)  # this process now runs the lead again
        with open_service(database_url) as svc:
            assert svc.watch(lead_key(LEAD), lead_key(WORKER_1))
        start("lead-0002", database_url, state, source="clear")
        with open_service(database_url) as svc:
            assert svc.read_model.cursors_of_watcher(lead_key(LEAD), pending_only=False) == []
            assert svc.session_rows(keys=[lead_key("lead-0002")])

    def test_a_compaction_is_recorded_once(self, database_url: str, tmp_path: Path) -> None:
        """PreCompact records `compacted`; the SessionStart `compact` that follows it, and a
        repeated PreCompact of the same compaction, record nothing more (R-L5)."""
        state = tmp_path / "state"
        transcript = tmp_path / "lead.jsonl"
        transcript.write_text('{"type": "user"}\n')
        start(LEAD, database_url, state)
        event = fixture("pre_compact", session_id=LEAD, transcript_path=str(transcript))
        for _ in range(2):
            assert run_hook(event, url=database_url, state_dir=state).returncode == 0
        start(LEAD, database_url, state, source="compact")
        with open_service(database_url) as svc:
            events = svc.session_status(lead_key(LEAD), changes_since=0)["stateChanges"]["events"]
        assert [(e["kind"], e["summary"]) for e in events] == [("compacted", "session compacted")]


class TestNeverBreaksTheSession:
    @pytest.mark.parametrize(
        ("text", "why"),
        [
            ("{not json", "input is not JSON"),
            ("[1, 2]", "input is not a JSON object"),
            (json.dumps(fixture("stop")), "unmapped hook event 'Stop'"),
            (json.dumps(fixture("user_prompt_submit", session_id="")), "session_id"),
            (json.dumps(fixture("session_start", source="reboot")), "source"),
            (json.dumps(fixture("subagent_start", agent_id=None)), "agent_id"),
        ],
    )
    def test_unmapped_input_exits_0_with_one_line_and_records_nothing(
        self, text: str, why: str, tmp_path: Path
    ) -> None:
        """Malformed input and unknown events: exit 0, nothing on stdout, one line on stderr,
        no session recorded (R-L8)."""
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        done = run_hook(text, url=url, state_dir=tmp_path / "state")
        assert (done.returncode, done.stdout) == (0, "")
        assert len(done.stderr.splitlines()) == 1 and why in done.stderr
        with open_service(url) as svc:
            assert svc.session_rows() == []

    def test_an_unreachable_store_keeps_the_signal_for_the_next_run(
        self, tmp_path: Path, database_url: str
    ) -> None:
        """With the store down the hook exits 0 and keeps the signal; the next run that
        reaches the store records it first (R-L8, R-L10). The first run of each session's
        outage has Claude Code show the user a warning (its JSON `systemMessage`): no notice
        can reach the session until the store is back (R-L9, ADR 050). The session's later
        runs print nothing on stdout, their line on a stderr Claude Code does not show."""
        state = tmp_path / "state"
        down = "postgresql://nobody@127.0.0.1:9/none?connect_timeout=1"
        for session in (LEAD, WORKER_1):
            start(session, database_url, state)
        with open_service(database_url) as svc:
            assert svc.watch(lead_key(LEAD), lead_key(WORKER_1))

        def in_the_outage(session: str) -> HookRun:
            done = run_hook(
                fixture("user_prompt_submit", session_id=session), url=down, state_dir=state
            )
            assert done.returncode == 0
            assert len(done.stderr.splitlines()) == 1 and "signal kept" in done.stderr
            return done

        first, again = in_the_outage(WORKER_1), in_the_outage(WORKER_1)
        assert first.told == first.stderr.strip() and "until it is back" in first.stderr
        assert again.told is None and "until it is back" not in again.stderr
        assert in_the_outage(LEAD).told is not None  # each session is told once
        # A session's start is told too, and its first prompt again: a CLI may not show
        # what a start says (Claude Code under `claude -p` does not).
        started = run_hook(fixture("session_start", session_id=WORKER_2), url=down, state_dir=state)
        assert started.told is not None
        assert [in_the_outage(WORKER_2).told is None for _ in range(2)] == [False, True]
        assert "rollback" not in "".join(p.read_text() for p in (state / "spool").iterdir())

        assert prompt(LEAD, database_url, state) is not None  # recorded, then drained
        with open_service(database_url) as svc:
            assert svc.session_status(lead_key(WORKER_1))["stateVersion"] == 2
        assert in_the_outage(WORKER_1).told is not None  # a new outage is told again


class TestASignalThatCannotBeKept:
    def test_a_state_directory_that_cannot_keep_it_says_the_signal_is_lost(
        self, tmp_path: Path
    ) -> None:
        """R-L10, R-L9: with the store down and no spool to keep the signal in (here a file
        where its folder goes, which no permission can undo, root or not), the hook said
        nothing useful: a Python traceback. It has the CLI warn the user that the signal is
        lost, and why, every time: a loss is told whether or not the outage was."""
        state = tmp_path / "state"
        state.mkdir()
        (state / "spool").write_text("")
        down = "postgresql://nobody@127.0.0.1:9/none?connect_timeout=1"
        for _ in range(2):
            done = run_hook(
                fixture("user_prompt_submit", session_id=LEAD), url=down, state_dir=state
            )
            assert done.returncode == 0 and done.told == done.stderr.strip()
            assert "signal lost, the state directory cannot keep it" in done.told

    def test_a_full_spool_says_what_it_dropped_every_time(self, tmp_path: Path) -> None:
        """R-L10, R-L9: the spool keeps the newest `SPOOL_LIMIT` signals; the oldest one
        dropped for a new one was said only on a stderr Claude Code does not show (exit 0),
        as the session's outage had already been told. A loss is told each time."""
        state = tmp_path / "state"
        spool = ClaudeState(state)
        for at in range(SPOOL_LIMIT - 1):
            spool.spool({"event": "UserPromptSubmit", "session_id": LEAD, "at": at})
        down = "postgresql://nobody@127.0.0.1:9/none?connect_timeout=1"
        done = [
            run_hook(fixture("user_prompt_submit", session_id=LEAD), url=down, state_dir=state)
            for _ in range(2)
        ]
        assert [(d.returncode, d.told) for d in done] == [(0, None), (0, done[1].stderr.strip())]
        assert "the spool was full: its 1 oldest lost" in done[1].stderr
        assert len(list((state / "spool").iterdir())) == SPOOL_LIMIT


class TestTheHostRecords:
    def test_a_session_start_forgets_the_hosts_that_have_ended(self, tmp_path: Path) -> None:
        """Each session start records the session for the hook's parent and grandparent
        (under Claude Code, a short-lived shell is one); nothing removed them, so the state
        directory grew by about two files per session start. A start now forgets the records
        of processes that have ended, and keeps those of live ones (the MCP server reads
        its parent's, `host_session`; R-A1)."""
        state = tmp_path / "state"
        ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                               capture_output=True, text=True, check=True)  # fmt: skip
        hosts = state / "hosts"
        hosts.mkdir(parents=True)
        gone = hosts / f"{ended.stdout.strip()}-123.json"
        gone.write_text(json.dumps({"sessionId": "old-session"}))
        mine = hosts / f"{os.getpid()}-456.json"  # alive: this test's process
        mine.write_text(json.dumps({"sessionId": "live-session"}))

        start(LEAD, f"sqlite:///{tmp_path / 'sessions.db'}", state)
        assert not gone.exists() and mine.exists()
        assert len(list(hosts.iterdir())) == 2 + 1  # the hook's parent's and grandparent's


class TestTheSpoolKnowsWhoseSignalsItKeeps:
    def test_a_session_is_told_from_one_whose_id_ends_like_it(self, tmp_path: Path) -> None:
        """R-L10, ADR 050: whether a session's outage was told is read from the spool's names;
        `abc` is not `x-abc`, and a file kept by an older version (`<at>-<random>.json`)
        is still taken, in order."""
        state = ClaudeState(tmp_path)
        state.spool({"event": "SessionStart", "session_id": "x-abc", "at": 2})
        (tmp_path / "spool" / f"{1:015d}-{'0' * 32}.json").write_text(
            json.dumps({"event": "SessionStart", "session_id": "abc", "at": 1})
        )
        assert state.keeps_signals_of("x-abc") and state.keeps_signals_of("x-abc", "SessionStart")
        assert not state.keeps_signals_of("x-abc", "UserPromptSubmit")
        assert not state.keeps_signals_of("abc") and not state.keeps_signals_of("c")
        state.spool({"event": "UserPromptSubmit", "session_id": "abc", "at": 3})
        assert state.keeps_signals_of("abc", "UserPromptSubmit")
        assert [(e["session_id"], e["at"]) for e in state.take_spooled()] == [
            ("abc", 1),
            ("x-abc", 2),
            ("abc", 3),
        ]
        assert not state.keeps_signals_of("abc") and not state.keeps_signals_of("x-abc")


class TestSettingsItCanNeverRecordWith:
    """Settings no run can record with are the user's mistake, not an outage: the hook has
    the CLI warn the user why (its JSON `systemMessage`), exits 0, and keeps the signal,
    which the first run with mended settings records (R-L9, R-A1, R-L10)."""

    @pytest.mark.parametrize(
        ("bad", "why"),
        [
            ("sqlite:///:memory:", "in-memory"),
            ("{store}?mode=ro", "read-only"),
            ("{store}?cache=shared", "unknown SQLite URL options"),
            ("mysql://gateway/sessions", "unsupported database URL"),
            ("postgresql://gateway@127.0.0.1:notaport/sessions", "port"),
        ],
        ids=["in-memory", "read-only", "unknown-option", "unknown-scheme", "bad-port"],
    )
    def test_a_store_it_cannot_record_into_is_said_and_the_signal_kept(
        self, bad: str, why: str, tmp_path: Path
    ) -> None:
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        state = tmp_path / "state"
        start(LEAD, url, state)

        done = run_hook(
            fixture("session_start", session_id=WORKER_1),
            url=bad.format(store=url),
            state_dir=state,
        )
        assert done.returncode == 0 and done.told == done.stderr.strip()
        assert why in done.told and "signal kept" in done.told

        start(WORKER_2, url, state)
        with open_service(url) as svc:
            keys = {row.key for row in svc.session_rows()}
        assert keys == {lead_key(LEAD), lead_key(WORKER_1), lead_key(WORKER_2)}

    @pytest.mark.parametrize(
        ("args", "why"),
        [(("--agent", "team:a"), "--agent"), (("--database-url", ""), "--database-url is empty")],
        ids=["agent-with-a-colon", "empty-url"],
    )
    def test_an_option_it_cannot_use_is_said_and_the_signal_kept(
        self, args: tuple[str, ...], why: str, tmp_path: Path
    ) -> None:
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        state = tmp_path / "state"
        done = run_hook(
            fixture("session_start", session_id=LEAD), url=url, state_dir=state, args=args
        )
        assert done.returncode == 0 and done.told == done.stderr.strip()
        assert why in done.told

        start(WORKER_1, url, state)
        with open_service(url) as svc:
            assert {row.key for row in svc.session_rows()} == {lead_key(LEAD), lead_key(WORKER_1)}

    def test_arguments_it_cannot_read_exit_1_never_2_which_would_block_the_prompt(
        self, tmp_path: Path
    ) -> None:
        """Read by argparse, which prints its usage on stderr: no output, so the exit code
        says it, 1, which both CLIs report as the hook's failure and go on (R-A1)."""
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        done = run_hook(
            fixture("user_prompt_submit", session_id=LEAD),
            url=url,
            state_dir=tmp_path / "state",
            args=("--agnet", "team"),
        )
        assert (done.returncode, done.stdout) == (1, "")
        assert "--agnet" in done.stderr


class TestCommandLine:
    def test_the_cli_subcommand_is_the_same_hook(self, tmp_path: Path) -> None:
        """`session-awareness hook claude-code` maps events exactly as the installed module."""
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        cli = [sys.executable, "-m", "session_awareness.infrastructure.cli", "hook", "claude-code"]
        done = run_hook(
            fixture("session_start", session_id=LEAD),
            url=url,
            state_dir=tmp_path / "state",
            command=cli,
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        with open_service(url) as svc:
            assert [row.key for row in svc.session_rows()] == [lead_key(LEAD)]

    def test_an_option_the_cli_subcommand_cannot_read_exits_1_never_2(self, tmp_path: Path) -> None:
        """ADR 049, R-A1: click's usage errors exit 2, which Claude Code takes as "block the
        prompt" (and erases it); the hook subcommand's exit 1 is shown and the turn goes on."""
        cli = [sys.executable, "-m", "session_awareness.infrastructure.cli", "hook", "claude-code"]
        done = run_hook(
            fixture("user_prompt_submit", session_id=LEAD),
            url=f"sqlite:///{tmp_path / 'sessions.db'}",
            state_dir=tmp_path / "state",
            command=cli,
            args=("--agnet", "team"),
        )
        assert (done.returncode, done.stdout) == (1, "")
        assert "No such option '--agnet'" in done.stderr

    def test_the_hook_prints_no_logs_unless_asked(self, tmp_path: Path) -> None:
        """The service's structlog events stay off stdout; --verbose sends them to stderr."""
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        done = run_hook(
            fixture("session_start", session_id=LEAD),
            url=url,
            state_dir=tmp_path / "state",
            args=("--verbose",),
        )
        assert (done.returncode, done.stdout) == (0, "")
        assert "session_opened" in done.stderr
