"""The operator CLI `session-awareness`: the demo, `status`, exit codes and one-line errors
(the operations commands are tested in tests/ops/)."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import logging
import os
import re
import shlex
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import click
import psycopg
import pytest
import structlog
import structlog.testing

import session_awareness
from session_awareness.application import SessionAwareness, open_service
from session_awareness.application.tools.tool_schemas import tool_schemas
from session_awareness.configuration import DATABASE_URL_ENV, redact
from session_awareness.infrastructure import cli
from session_awareness.infrastructure.cli import main
from session_awareness.infrastructure.cli.common import log_level
from session_awareness.testing.pgcluster import PostgresCluster

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

    def test_the_demo_defaults_to_a_temporary_database_and_removes_it_afterwards(
        self,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """Without --database-url the story runs on a new file in a new temporary folder,
        and the folder is gone when the demo ends."""
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        assert main(["demo"]) == 0
        out = capsys.readouterr().out
        [url] = [line.split()[1] for line in out.splitlines() if line.startswith("database")]
        path = Path(url.removeprefix("sqlite:///"))
        assert path.parent.parent == tmp_path
        assert "(temporary, removed afterwards)" in out
        assert not path.parent.exists()
        assert list(tmp_path.iterdir()) == []

    def test_the_demo_never_reads_the_database_url_from_the_environment(
        self,
        populated_url: str,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """With $SESSION_AWARENESS_DATABASE_URL naming a used store the demo still runs, on a
        temporary file, and leaves that store alone; --help says so."""
        monkeypatch.setenv(DATABASE_URL_ENV, populated_url)
        assert main(["demo"]) == 0
        assert "(temporary, removed afterwards)" in capsys.readouterr().out
        with structlog.testing.capture_logs():
            svc = open_service(populated_url)
            try:
                assert len(svc.sessions_list()) == 2
            finally:
                svc.close()
        assert main(["demo", "--help"]) == 0
        help_text = " ".join(capsys.readouterr().out.split())
        assert f"The demo never reads ${DATABASE_URL_ENV}" in help_text
        assert "temporary SQLite file, removed afterwards" in help_text

    def test_the_demo_never_prints_the_databases_password(
        self, postgres: PostgresCluster, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """On a PostgreSQL URL with a password, the timeline and the try-it line show the URL
        with the password hidden."""
        url = f"{postgres.url}?schema=t_{uuid.uuid4().hex[:12]}"
        assert main(["demo", "--database-url", url]) == 0
        out = capsys.readouterr().out
        assert postgres.password not in out
        assert f"database  {redact(url)}" in out
        assert ":***@" in try_it(out)[-1]

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
        result = run_installed(["demo"], cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        [notice] = notice_lines(result.stdout)
        assert notice.endswith("changesSince 1.")
        kinds = [e["kind"] for e in json_block(result.stdout)["stateChanges"]["events"]]
        assert kinds == ["human_direct_message", "goal_changed"]

    def test_the_try_it_line_after_a_kept_database_runs_as_printed(self, tmp_path: Path) -> None:
        """On a database the operator named (as `make demo` does), the last line is a
        command that runs as printed and shows the delta the manager reconciled."""
        first = run_installed(["demo", "--database-url", "sqlite:///demo.db"], cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        command = try_it(first.stdout)
        assert command[0] == str(INSTALLED)
        second = run_installed(command[1:], cwd=tmp_path)
        assert second.returncode == 0, second.stderr
        assert "stateVersion 3" in second.stdout
        assert "human message via telegram" in second.stdout

    def test_the_try_it_line_after_a_temporary_database_keeps_one_to_query(
        self, tmp_path: Path
    ) -> None:
        """On the temporary database, which is removed, the last line runs the demo again on
        a file it keeps (the line is a shell command with a comment)."""
        first = run_installed(["demo"], cwd=tmp_path)
        [line] = [line for line in first.stdout.splitlines() if line.startswith("try it")]
        shell = subprocess.run(
            ["bash", "-c", line.removeprefix("try it")],
            cwd=tmp_path,
            env=clean_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert shell.returncode == 0, shell.stderr
        assert (tmp_path / "demo.db").is_file()
        assert "--changes-since 1 --database-url sqlite:///demo.db" in shell.stdout


INSTALLED = Path(sys.executable).parent / "session-awareness"


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env.pop(DATABASE_URL_ENV, None)
    return env


def run_into_a_closed_pipe(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The installed command with stdout on a pipe that has no reader: its first write fails."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [str(INSTALLED), *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=clean_env(tmp_path),
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)


def run_installed(args: list[str], *, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed command, as a shell would run it."""
    assert INSTALLED.is_file(), f"not installed: {INSTALLED}"
    return subprocess.run(
        [str(INSTALLED), *args],
        cwd=cwd,
        env=clean_env(cwd),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def try_it(output: str) -> list[str]:
    """The demo's suggested command, split as a shell would split it."""
    [line] = [line for line in output.splitlines() if line.startswith("try it")]
    return shlex.split(line.removeprefix("try it"), comments=True)


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
        """An unknown key is bad input: exit 2 and the rules' error text, nothing on stdout."""
        code = main(["status", "agent:main:nobody", "--database-url", populated_url])
        captured = capsys.readouterr()
        assert code == 2
        assert captured.out == ""
        assert captured.err == "error: Unknown sessionKey: agent:main:nobody\n"

    def test_status_with_a_non_numeric_changes_since_exits_2_with_one_line(
        self, populated_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`--changes-since abc` is refused with the rules' error text."""
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

    def test_status_on_a_sqlite_file_that_is_not_a_store_exits_2_and_changes_nothing(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A query on someone else's SQLite database says it is not a store and leaves the
        file exactly as it was: no store tables are added to it."""
        other = tmp_path / "other.db"
        with contextlib.closing(sqlite3.connect(other)) as c, c:
            c.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        before = other.read_bytes()
        code = main(["status", MANAGER, "--database-url", sqlite_url(other)])
        captured = capsys.readouterr()
        assert (code, captured.out) == (2, "")
        assert captured.err == (
            f"error: {other} is not a session-awareness store: it holds other tables, with no "
            "stored_events table (nothing was changed)\n"
        )
        assert other.read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]

    @pytest.mark.parametrize("command", [["list"], ["status", MANAGER], ["audit"], ["prune"]])
    def test_a_postgresql_schema_without_a_store_is_refused_and_left_uncreated(
        self, postgres: PostgresCluster, capsys: pytest.CaptureFixture[str], command: list[str]
    ) -> None:
        """A mistyped `?schema=` is not made a store by a command that looks, prunes or
        audits: one line, exit 2, and the schema still does not exist."""
        schema = f"t_{uuid.uuid4().hex[:12]}"
        code = main([*command, "--database-url", f"{postgres.url}?schema={schema}"])
        captured = capsys.readouterr()
        assert (code, captured.out) == (2, "")
        assert captured.err.startswith("error: ")
        assert f"no session-awareness store in schema {schema}" in captured.err
        assert captured.err.count("\n") == 1
        with psycopg.connect(postgres.url) as conn:
            found = conn.execute("SELECT to_regnamespace(%s)", (schema,)).fetchone()
        assert found == (None,)


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

    def test_the_listed_line_of_each_command_is_its_own_help(self) -> None:
        """`--help` lists each command by the line written beside its name (so listing imports
        no command); that line is the first sentence of the command's own help, and every
        command is listed."""
        group = cli.cli
        ctx = click.Context(group)
        for name, (_, _, summary) in cli.COMMANDS.items():
            command = group.get_command(ctx, name)
            assert command is not None, name
            assert command.name == name
            assert command.get_short_help_str(10_000) == summary, name

    @pytest.mark.parametrize("argv", [["--version"], ["--help"], ["status", "--help"]])
    def test_version_and_help_import_no_more_than_they_need(self, argv: list[str]) -> None:
        """`--version` and `--help` start without the service: the application layer, the
        event store library and rich are not imported (a command's own `--help` imports its
        module, and only that)."""
        probe = (
            "import sys\n"
            "from session_awareness.infrastructure.cli import main\n"
            f"code = main({argv!r})\n"
            "heavy = sorted(m for m in ('session_awareness.application', 'eventsourcing',"
            " 'rich', 'pydantic') if m in sys.modules)\n"
            "print('HEAVY', heavy, file=sys.stderr)\n"
            "raise SystemExit(code)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stderr
        heavy = done.stderr.rsplit("HEAVY ", 1)[1].strip()
        if argv[0] == "status":
            assert "session_awareness.application" in heavy  # its module was loaded
        else:
            assert heavy == "[]"

    def test_a_looking_command_reads_no_package_metadata(self, populated_url: str) -> None:
        """`list` starts without `importlib.metadata`, which only `--version` needs (a tenth
        of a command's start, issue 39); `--version` still prints the installed version."""
        probe = (
            "import sys\n"
            "from session_awareness.infrastructure.cli import main\n"
            f"code = main(['list', '--database-url', {populated_url!r}])\n"
            "print('METADATA', 'importlib.metadata' in sys.modules, file=sys.stderr)\n"
            "raise SystemExit(code)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stderr
        assert RESEARCHER in done.stdout
        assert done.stderr.rsplit("METADATA ", 1)[1].strip() == "False"
        version = subprocess.run(
            [sys.executable, "-m", "session_awareness.infrastructure.cli", "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert version.stdout == f"session-awareness {session_awareness.__version__}\n"


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


class TestVersion:
    def test_version_prints_the_installed_distributions_version(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`--version` and `-V` print the name and the version pip installed, and succeed."""
        installed = importlib.metadata.version("session-awareness")
        for flag in ("--version", "-V"):
            assert main([flag]) == 0
            assert capsys.readouterr().out == f"session-awareness {installed}\n"

    def test_the_package_carries_the_same_version(self) -> None:
        """`session_awareness.__version__` comes from the package metadata."""
        assert session_awareness.__version__ == importlib.metadata.version("session-awareness")


class TestToolsSchema:
    def test_the_json_schema_format_is_the_default_and_json_is_accepted(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`--format json-schema`, `--json` and no option all print the same tool list."""
        outputs = []
        for args in ([], ["--format", "json-schema"], ["--json"]):
            assert main(["tools-schema", *args]) == 0
            outputs.append(json.loads(capsys.readouterr().out))
        assert outputs[0] == outputs[1] == outputs[2] == tool_schemas()

    def test_the_help_names_every_tool_the_command_prints(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`--help` lists exactly the tools whose schemas every format prints."""
        assert main(["tools-schema", "--help"]) == 0
        help_text = " ".join(capsys.readouterr().out.split())
        names = [entry["name"] for entry in tool_schemas()]
        assert f"For {', '.join(names)}:" in help_text

    def test_an_unknown_format_is_refused_with_the_known_ones(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A format the command does not know is bad input: exit 2, one line naming it."""
        assert main(["tools-schema", "--format", "yaml"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert "'yaml' is not 'json-schema'" in err or "'yaml' is not one of" in err


class TestList:
    def test_an_unknown_kind_is_refused_like_the_tool_refuses_it(
        self, populated_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`--kind bogus` names the item and the kinds, as sessions_list's `kinds.N` error
        does, instead of listing nothing."""
        code = main(["list", "--kind", "main", "--kind", "bogus", "--database-url", populated_url])
        captured = capsys.readouterr()
        assert code == 2
        assert captured.out == ""
        assert captured.err.startswith("error: kinds.1: must be one of: cron, group, hook, main")
        with structlog.testing.capture_logs():
            svc = open_service(populated_url)
            try:
                answer = svc.tools.call(
                    "sessions_list", {"kinds": ["main", "bogus"]}, caller=MANAGER
                )
            finally:
                svc.close()
        assert answer["error"]["field"] == "kinds.1"

    def test_list_on_an_empty_file_exits_2_and_leaves_it_empty(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """An empty file is not a store: `list` says so instead of making one and printing
        `0 sessions`, and the file stays empty."""
        empty = tmp_path / "empty.db"
        empty.touch()
        code = main(["list", "--database-url", sqlite_url(empty)])
        captured = capsys.readouterr()
        assert (code, captured.out) == (2, "")
        assert captured.err.startswith(f"error: {empty} is not a session-awareness store")
        assert captured.err.count("\n") == 1
        assert empty.stat().st_size == 0
        assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]

    def test_list_json_rows_are_the_embedding_apis_and_the_tools(
        self, populated_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """One row shape everywhere: `list --json`, `sessions_list()` and the sessions_list
        tool (under visibility `all`) give the same rows, `stateVersion` only when > 0."""
        assert main(["list", "--json", "--database-url", populated_url]) == 0
        rows = json.loads(capsys.readouterr().out)
        with structlog.testing.capture_logs():
            svc = open_service(populated_url, visibility="all")
            try:
                api = svc.sessions_list()
                tool = svc.tools.call("sessions_list", {}, caller=MANAGER)["sessions"]
            finally:
                svc.close()
        assert rows == api == tool
        by_key = {row["sessionKey"]: row for row in rows}
        assert "stateVersion" not in by_key[MANAGER]
        assert by_key[RESEARCHER]["stateVersion"] == 2
        assert by_key[MANAGER]["childSessionKeys"] == [RESEARCHER]

    def test_list_archived_lists_the_archived_sessions_instead(
        self, populated_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`list --archived --json` gives the archived rows, which `list` leaves out."""
        with structlog.testing.capture_logs():
            svc = open_service(populated_url)
            try:
                svc.archive_session(RESEARCHER)
            finally:
                svc.close()
        assert main(["list", "--json", "--database-url", populated_url]) == 0
        assert [row["sessionKey"] for row in json.loads(capsys.readouterr().out)] == [MANAGER]
        assert main(["list", "--archived", "--json", "--database-url", populated_url]) == 0
        [archived] = json.loads(capsys.readouterr().out)
        assert (archived["sessionKey"], archived["archived"], archived["channel"]) == (
            RESEARCHER,
            True,
            "telegram",
        )


class TestServiceLogFormats:
    def test_json_logs_are_one_object_a_line_with_iso_utc_timestamps(
        self, populated_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`--log-format json -v` writes each event to stderr as JSON: its name, level and
        fields, stamped in ISO 8601 UTC."""
        assert main(["audit", "-v", "--log-format", "json", "--database-url", populated_url]) == 0
        events = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
        [finished] = [e for e in events if e["event"] == "audit_finished"]
        assert finished["level"] == "info"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", finished["timestamp"])

    def test_console_logs_carry_iso_utc_timestamps(
        self, populated_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The console format (the default) starts each line with the ISO UTC time."""
        assert main(["audit", "--verbose", "--database-url", populated_url]) == 0
        [line] = [line for line in capsys.readouterr().err.splitlines() if "audit_finished" in line]
        assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z \[info", line)

    def test_without_verbose_info_stays_quiet_and_an_unknown_format_is_refused(
        self, populated_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Warnings and errors only by default; `--log-format xml` is bad input."""
        assert main(["audit", "--database-url", populated_url]) == 0
        assert capsys.readouterr().err == ""
        assert main(["audit", "--log-format", "xml", "--database-url", populated_url]) == 2
        assert "--log-format" in capsys.readouterr().err

    @pytest.mark.parametrize(
        ("verbose", "quiet", "level"),
        [(0, 0, logging.WARNING), (1, 0, logging.INFO), (2, 0, logging.DEBUG),
         (5, 0, logging.DEBUG), (0, 1, logging.ERROR), (0, 2, logging.CRITICAL),
         (0, 9, logging.CRITICAL)],
    )  # fmt: skip
    def test_each_v_shows_one_level_more_and_each_q_one_less(
        self, verbose: int, quiet: int, level: int
    ) -> None:
        """-v info, -vv debug; -q errors only, -qq critical only."""
        assert log_level(verbose, quiet) == level

    def test_quiet_hides_the_warnings_a_command_would_print(
        self, populated_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """An upstream scan that cannot read a transcript logs a warning on stderr by
        default; `-q` keeps only errors."""
        transcript = tmp_path / "thread.jsonl"
        transcript.write_text('{"type": "user"}\n')
        adopt = ["adopt", RESEARCHER, "--claude-transcript", str(transcript)]
        assert main([*adopt, "--database-url", populated_url]) == 0
        transcript.unlink()
        transcript.mkdir()  # still there, but no longer readable as a file
        capsys.readouterr()
        main(["upstream", "scan", "--database-url", populated_url])
        loud = capsys.readouterr().err
        main(["upstream", "scan", "-q", "--database-url", populated_url])
        quiet = capsys.readouterr().err
        assert "[warning  ] claude_transcript_read_failed" in loud
        assert quiet == ""


class TestExitCodes:
    def test_an_interrupted_command_exits_130_with_one_line(
        self,
        populated_url: str,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """Ctrl-C during a query ends the command with the shell's SIGINT code, no traceback."""

        def interrupted(*_: object, **__: object) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(SessionAwareness, "session_status", interrupted)
        assert main(["status", RESEARCHER, "--database-url", populated_url]) == 130
        err = capsys.readouterr().err
        assert err.strip() == "error: interrupted"

    def test_a_closed_pipe_exits_141_silently(self, tmp_path: Path) -> None:
        """When the reader of stdout has gone (`| head` after one line), the command ends
        with the shell's SIGPIPE code and prints nothing about it."""
        result = run_into_a_closed_pipe(["tools-schema"], tmp_path)
        assert result.returncode == 141
        assert result.stderr == ""

    def test_a_pipe_closed_before_a_line_rich_prints_exits_141_silently(
        self, populated_url: str, tmp_path: Path
    ) -> None:
        """`status KEY` prints its first line through rich; when the reader of stdout has
        gone, the command still ends with the shell's SIGPIPE code (rich alone exits 1)."""
        result = run_into_a_closed_pipe(
            ["status", RESEARCHER, "--database-url", populated_url], tmp_path
        )
        assert result.returncode == 141
        assert result.stderr == ""
