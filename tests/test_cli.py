"""The operator CLI `session-awareness`: the demo, `status`, exit codes and one-line errors
(the operations commands are tested in tests/ops/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import structlog
import structlog.testing

from session_awareness.application import open_service
from session_awareness.application.service import DATABASE_URL_ENV
from session_awareness.infrastructure.cli import main

MANAGER = "agent:main:main"
RESEARCHER = "agent:main:subagent:researcher"
NOTICE_MARK = "changed (other actor)"


def sqlite_url(path: Path) -> str:
    return "sqlite:///" + str(path)


def notice_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if NOTICE_MARK in line]


def json_block(output: str) -> Any:
    """The first pretty-printed JSON object of the output (from a `{` line to a `}` line)."""
    lines = output.splitlines()
    start = lines.index("{")
    end = lines.index("}", start)
    return json.loads("\n".join(lines[start : end + 1]))


@pytest.fixture
def populated_url(tmp_path: Path) -> str:
    """A database where the manager spawned the researcher and a human then messaged it."""
    url = sqlite_url(tmp_path / "sessions.db")
    with structlog.testing.capture_logs():  # keep the set-up's logs out of captured output
        svc = open_service(url)
        try:
            svc.open_session(MANAGER)
            svc.record_child_spawned(RESEARCHER, parent=MANAGER, run_id="run-1")
            svc.record_human_direct_message(RESEARCHER, channel="telegram")
        finally:
            svc.close()
    return url


class TestDemo:
    def test_the_demo_prints_exactly_one_notice_asking_for_changes_since_1(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The manager drains one notice, and its text asks to reconcile from version 1."""
        code = main(["demo", "--database-url", sqlite_url(tmp_path / "demo.db")])
        out = capsys.readouterr().out
        assert code == 0
        [notice] = notice_lines(out)
        assert f'session_status sessionKey "{RESEARCHER}" changesSince 1.' in notice

    def test_the_demo_prints_the_exact_delta_with_the_human_message_and_the_goal_change(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The reconciliation JSON holds exactly the human's message and the goal change."""
        main(["demo", "--database-url", sqlite_url(tmp_path / "demo.db")])
        delta = json_block(capsys.readouterr().out)
        assert delta["sessionKey"] == RESEARCHER
        assert delta["stateVersion"] == 3
        events = delta["stateChanges"]["events"]
        assert [(e["sequence"], e["kind"], e["actorType"]) for e in events] == [
            (2, "human_direct_message", "human"),
            (3, "goal_changed", "human"),
        ]
        assert events[0]["payload"] == {"channel": "telegram"}
        assert delta["stateChanges"]["historyGap"] is False

    def test_the_demo_shows_the_cursor_positions_and_the_wakes(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The timeline shows L N M after the spawns, the human, the goal change and the drain."""
        main(["demo", "--database-url", sqlite_url(tmp_path / "demo.db")])
        out = capsys.readouterr().out
        cursor_lines = [line.strip() for line in out.splitlines() if "cursors (L N M)" in line]
        assert cursor_lines == [
            f"manager's cursors (L N M): researcher {lnm} · writer 1 1 1 synced"
            for lnm in ("1 1 1 synced", "1 2 2 pending", "1 2 3 pending", "2 3 3 pending")
        ]
        assert out.count(f"wake → {MANAGER}") == 2

    def test_the_demo_shows_the_writers_timeout_as_log_only(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The timed-out run is recorded on the writer and marked as notifying no one."""
        main(["demo", "--database-url", sqlite_url(tmp_path / "demo.db")])
        out = capsys.readouterr().out
        assert "→ writer #2 run_failed (outcome timeout): log only, no notice" in out

    def test_the_demo_keeps_service_logs_out_of_the_output(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Without --verbose the service's info logs reach neither stdout nor stderr."""
        main(["demo", "--database-url", sqlite_url(tmp_path / "demo.db")])
        captured = capsys.readouterr()
        assert captured.err == ""
        assert "signal_recorded" not in captured.out

    def test_the_demo_defaults_to_a_fresh_temporary_database_and_prints_its_url(
        self,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """Without --database-url the story runs on a new file in a new temporary folder."""
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        assert main(["demo"]) == 0
        [url] = [
            line.split()[1]
            for line in capsys.readouterr().out.splitlines()
            if line.startswith("database")
        ]
        path = Path(url.removeprefix("sqlite:///"))
        assert path.parent.parent == tmp_path
        assert path.is_file()

    def test_the_demo_refuses_a_database_that_already_holds_sessions(
        self, populated_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A used database would make the story's numbers wrong, so the demo stops with one line."""
        code = main(["demo", "--database-url", populated_url])
        captured = capsys.readouterr()
        assert code == 2
        assert captured.out == ""
        assert captured.err.startswith("error: the demo needs a database without sessions")
        assert captured.err.count("\n") == 1

    def test_the_installed_command_runs_the_demo(self, tmp_path: Path) -> None:
        """The installed `session-awareness demo` exits 0 and prints one notice and the delta."""
        command = Path(sys.executable).parent / "session-awareness"
        assert command.is_file(), f"not installed: {command}"
        env = {**os.environ, "TMPDIR": str(tmp_path)}
        env.pop(DATABASE_URL_ENV, None)
        result = subprocess.run(
            [str(command), "demo"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        [notice] = notice_lines(result.stdout)
        assert notice.endswith("changesSince 1.")
        kinds = [e["kind"] for e in json_block(result.stdout)["stateChanges"]["events"]]
        assert kinds == ["human_direct_message", "goal_changed"]


class TestStatus:
    def test_status_prints_the_session_status_json_with_its_state_version(
        self, populated_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`status KEY --json` prints session_status as indented JSON."""
        code = main(["status", RESEARCHER, "--json", "--database-url", populated_url])
        out = capsys.readouterr().out
        assert code == 0
        assert json.loads(out) == {"sessionKey": RESEARCHER, "stateVersion": 2}
        assert out.startswith('{\n  "sessionKey"')

    def test_status_with_changes_since_prints_the_delta(
        self, populated_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`--changes-since 1` adds the events after version 1."""
        code = main(
            [
                "status",
                RESEARCHER,
                "--changes-since",
                "1",
                "--json",
                "--database-url",
                populated_url,
            ]
        )
        answer = json.loads(capsys.readouterr().out)
        assert code == 0
        assert [e["summary"] for e in answer["stateChanges"]["events"]] == [
            "human message via telegram"
        ]

    def test_status_reads_the_database_url_from_the_environment(
        self,
        populated_url: str,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """Without --database-url the service default applies, here the environment variable."""
        monkeypatch.setenv(DATABASE_URL_ENV, populated_url)
        assert main(["status", RESEARCHER, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["stateVersion"] == 2

    def test_status_of_an_unknown_session_exits_2_with_one_line(
        self, populated_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """An unknown key is bad input: exit 2 and the SPEC's error text, nothing on stdout."""
        code = main(["status", "agent:main:nobody", "--database-url", populated_url])
        captured = capsys.readouterr()
        assert code == 2
        assert captured.out == ""
        assert captured.err == "error: Unknown sessionKey: agent:main:nobody\n"

    def test_status_with_a_non_numeric_changes_since_exits_2_with_one_line(
        self, populated_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`--changes-since abc` is refused with the SPEC's error text."""
        code = main(
            ["status", RESEARCHER, "--changes-since", "abc", "--database-url", populated_url]
        )
        captured = capsys.readouterr()
        assert code == 2
        assert captured.out == ""
        assert captured.err == "error: changesSince must be a non-negative integer\n"

    def test_status_on_an_unusable_database_url_fails_with_one_line_and_no_traceback(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """An unsupported URL scheme gives one `error:` line and exit 2 or 1."""
        code = main(["status", MANAGER, "--database-url", "mysql://x"])
        captured = capsys.readouterr()
        assert code in (1, 2)
        assert captured.out == ""
        assert captured.err.startswith("error: ")
        assert captured.err.count("\n") == 1
        assert "Traceback" not in captured.err

    def test_status_on_a_missing_sqlite_file_exits_2_without_creating_it(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A query never creates an empty database as a side effect of a mistyped path."""
        missing = tmp_path / "missing.db"
        code = main(["status", MANAGER, "--database-url", sqlite_url(missing)])
        captured = capsys.readouterr()
        assert code == 2
        assert captured.err == (
            f"error: no database at {missing} (pass --database-url or set ${DATABASE_URL_ENV})\n"
        )
        assert not missing.exists()


class TestArguments:
    def test_no_command_exits_2_with_the_usage(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Running without a command is bad input; the usage and the commands go to stderr."""
        assert main([]) == 2
        err = capsys.readouterr().err
        assert "Usage: session-awareness" in err
        assert "audit" in err

    def test_help_exits_0(self, capsys: pytest.CaptureFixture[str]) -> None:
        """`--help` lists the commands and succeeds."""
        assert main(["--help"]) == 0
        out = capsys.readouterr().out
        assert "demo" in out
        assert "status" in out


class TestServiceLogs:
    def test_verbose_sends_the_service_logs_to_stderr(
        self, populated_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """With --verbose the service's info logs appear on stderr, never on stdout."""
        main(["audit", "--verbose", "--json", "--database-url", populated_url])
        captured = capsys.readouterr()
        assert "audit_finished" in captured.err
        assert json.loads(captured.out)["clean"] is True

    def test_the_logging_configuration_is_restored_after_main_returns(
        self, populated_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Running main in-process leaves structlog configured as it found it."""
        before = structlog.get_config()
        main(["status", RESEARCHER, "--database-url", populated_url])
        capsys.readouterr()
        assert structlog.get_config() == before
