"""What a new operator gets wrong at the CLI, and what they get back: a non-zero exit the
docs name, one line on stderr saying what was wrong and how to fix it, nothing on stdout a
script would take for a result, and nothing half-written (R-L9, docs/operations.md)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import structlog.testing

from session_awareness.application import SessionAwareness, open_service, retention
from session_awareness.configuration import DATABASE_URL_ENV, redact
from session_awareness.domain.positions import notice_text
from session_awareness.infrastructure.cli import main

Capture = pytest.CaptureFixture[str]
MANAGER = "agent:main:main"
CHILD = "agent:main:subagent:worker"


def run(capsys: Capture, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """A SQLite store holding the manager's session."""
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    with structlog.testing.capture_logs(), open_service(url) as svc:
        svc.open_session(MANAGER)
    return url


class TestAnEmptyDatabaseUrl:
    """`--database-url "$URL"` with `URL` unset passes an empty string: it names no store."""

    @pytest.mark.parametrize(
        "argv",
        [
            ["list"],
            ["status", MANAGER],
            ["notices", MANAGER, "--drain"],
            ["audit", "--rebuild"],
            ["prune"],
            ["history", MANAGER],
            ["watches"],
            ["health"],
            ["upstream", "scan"],
        ],
    )
    def test_a_command_refuses_it_rather_than_opening_the_store_in_the_environment(
        self, argv: list[str], store_url: str, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-L9: an empty `--database-url` is bad input (exit 2, one line naming the option),
        not a silent fall-back to `$SESSION_AWARENESS_DATABASE_URL`'s store."""
        monkeypatch.setenv(DATABASE_URL_ENV, store_url)
        code, out, err = run(capsys, *argv, "--database-url", "")
        assert (code, out) == (2, "")
        assert err.startswith("error: Invalid value for '--database-url': an empty URL")
        assert err.count("\n") == 1

    def test_the_demo_refuses_it_and_writes_nothing_into_the_environments_store(
        self, tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The demo never writes into the store you work with: an empty `--database-url` is
        refused, not read as "no option" by the CLI and as "use the environment" by the
        service."""
        mine = tmp_path / "mine.db"
        monkeypatch.setenv(DATABASE_URL_ENV, f"sqlite:///{mine}")
        monkeypatch.chdir(tmp_path)
        code, out, err = run(capsys, "demo", "--database-url", "  ")
        assert (code, out) == (2, "")
        assert "'--database-url': an empty URL names no store" in err
        assert list(tmp_path.iterdir()) == []

    def test_install_refuses_it_and_writes_no_configuration(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        """`install` with an empty `--database-url` writes no hook pointing at a store the
        caller did not name."""
        code, out, err = run(capsys, "install", "claude-code", "--project", str(tmp_path),
                             "--database-url", "")  # fmt: skip
        assert (code, out) == (2, "")
        assert "'--database-url': an empty URL names no store" in err
        assert list(tmp_path.iterdir()) == []


class TestAnEmptyAgentId:
    @pytest.mark.parametrize(
        "argv",
        [
            ["list"],
            ["status", MANAGER],
            ["history", MANAGER],
            ["watches", "--target", MANAGER],
            ["transcript", MANAGER],
        ],
    )
    def test_an_empty_agent_id_is_refused_not_read_one_way_or_the_other(
        self, argv: list[str], store_url: str, capsys: Capture
    ) -> None:
        """R-L9: `--agent-id ""` listed no session (`0 sessions`, exit 0), answered `status`
        with `Unknown sessionKey`, and read as absent for `history`; it is bad input."""
        code, out, err = run(capsys, *argv, "--agent-id", "", "--database-url", store_url)
        assert (code, out) == (2, "")
        assert err.startswith("error: Invalid value for '--agent-id': an empty agent id")
        assert err.count("\n") == 1


class TestWritingThroughAReadOnlyUrl:
    @pytest.mark.parametrize(
        "argv",
        [
            ["audit", "--rebuild"],
            ["prune"],
            ["notices", MANAGER, "--drain"],
            ["upstream", "scan"],
        ],
    )
    def test_a_command_that_writes_refuses_it_before_starting(
        self, argv: list[str], store_url: str, capsys: Capture
    ) -> None:
        """`?mode=ro` opens the store read-only (docs/api.md): `audit --rebuild` replayed the
        whole log and then ended with `OperationalError: attempt to write a readonly
        database` (exit 1), and a drain printed its notices before failing to acknowledge
        them. A writing command now says so at once (exit 2, one line, nothing printed)."""
        code, out, err = run(capsys, *argv, "--database-url", f"{store_url}?mode=ro")
        assert (code, out) == (2, "")
        assert err == (f"error: {store_url}?mode=ro opens the store read-only, and this "
                       "command writes to it: drop ?mode=ro (nothing was changed)\n")  # fmt: skip

    @pytest.mark.parametrize(
        "argv", [["audit"], ["prune", "--dry-run"], ["notices", MANAGER], ["list"]]
    )
    def test_a_command_that_only_looks_still_reads_it(
        self, argv: list[str], store_url: str, capsys: Capture
    ) -> None:
        """Looking needs no write: a read-only URL serves it as ever."""
        assert run(capsys, *argv, "--database-url", f"{store_url}?mode=ro")[0] == 0


class TestHugeNumbers:
    """A number beyond what the store can hold is bad input the CLI names, not an
    `OverflowError` from the database driver (exit 1, the driver's words)."""

    @pytest.fixture
    def demo_like_url(self, database_url: str) -> str:
        """A store on each backend where the manager watches one child."""
        with structlog.testing.capture_logs(), open_service(database_url) as svc:
            svc.open_session(MANAGER)
            svc.record_child_spawned("agent:main:subagent:c", parent=MANAGER, run_id="r1")
        return database_url

    @pytest.mark.parametrize(
        ("argv", "option"),
        [
            (["watches", "--limit", str(2**63)], "--limit"),
            (["watches", "--offset", str(2**63)], "--offset"),
            (["watches", "--watcher", MANAGER, "--offset", str(10**24)], "--offset"),
            (["prune", "--dry-run", "--retention-days", str(10**20)], "--retention-days"),
            (["prune", "--retention-rows", str(2**63)], "--retention-rows"),
        ],
    )
    def test_a_number_out_of_range_is_refused_with_the_range(
        self, argv: list[str], option: str, demo_like_url: str, capsys: Capture
    ) -> None:
        """R-R1: exit 2 and one line naming the option and its range; nothing on stdout."""
        code, out, err = run(capsys, *argv, "--database-url", demo_like_url)
        assert (code, out) == (2, "")
        assert err.startswith(f"error: Invalid value for '{option}': ")
        assert "is not in the range" in err
        assert err.count("\n") == 1

    def test_the_largest_numbers_accepted_still_answer(
        self, demo_like_url: str, capsys: Capture
    ) -> None:
        """The bounds are what the store can hold: at them the commands answer as usual."""
        top = str(2**53 - 1)
        code, out, _ = run(capsys, "watches", "--limit", top, "--offset", top,
                           "--database-url", demo_like_url)  # fmt: skip
        assert (code, out.splitlines()[-1]) == (0, "0 shown of 1 cursor, 0 pending")
        code, out, _ = run(capsys, "prune", "--dry-run", "--retention-days", "36500",
                           "--retention-rows", top, "--database-url", demo_like_url)  # fmt: skip
        assert (code, out) == (0, "would remove 0 rows from 0 sessions and 0 idle cursors "
                                  "(dry run: nothing changed)\n")  # fmt: skip


class TestInstallingAStoreTheHooksCannotUse:
    """`install` writes the URL into every hook and the MCP server entry; a hook never
    breaks its session, so a URL they cannot record into would fail every turn quietly."""

    @pytest.mark.parametrize(
        ("url", "why"),
        [
            ("sqlite://sessions.db", "SQLite URLs have no host"),
            ("mysql://ops:secret@db/sessions", "unsupported database URL"),
            ("sqlite:///:memory:", "an in-memory database lasts one process"),
            ("sqlite:///sessions.db?mode=zz", "mode must be one of"),
            ("postgresql://ops:s3cr#t@db/sessions", "reserved character"),
            ("postgresql://ops@db/sessions?pool_size=0", "pool_size must be"),
        ],
    )
    @pytest.mark.parametrize("cli", ["claude-code", "gemini-cli"])
    def test_install_refuses_it_and_writes_nothing(
        self, *, cli: str, url: str, why: str, tmp_path: Path, capsys: Capture,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:  # fmt: skip
        """R-L9: exit 2, one line naming the URL (never its password) and why, and no file
        or folder written."""
        monkeypatch.setenv("SESSION_AWARENESS_STATE_DIR", str(tmp_path / "state"))
        project = tmp_path / "project"
        project.mkdir()
        monkeypatch.chdir(project)
        code, out, err = run(capsys, "install", cli, "--project", str(project),
                             "--database-url", url)  # fmt: skip
        assert (code, out) == (2, "")
        assert err.startswith("error: the hooks and the MCP server cannot use ")
        assert why in err
        assert "secret" not in err and "s3cr" not in err
        assert err.count("\n") == 1
        assert list(tmp_path.iterdir()) == [project]
        assert list(project.iterdir()) == []

    def test_a_read_only_store_is_refused(
        self, store_url: str, tmp_path: Path, capsys: Capture
    ) -> None:
        """The hooks record: a store opened read-only (`?mode=ro`) would refuse them all."""
        project = tmp_path / "project"
        project.mkdir()
        code, out, err = run(capsys, "install", "claude-code", "--project", str(project),
                             "--database-url", f"{store_url}?mode=ro")  # fmt: skip
        assert (code, out) == (2, "")
        assert "the store cannot be read-only" in err
        assert list(project.iterdir()) == []

    def test_a_sqlite_file_holding_other_tables_is_refused(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        """The hooks open the store as a host does and would add the store's tables to
        another application's database; `install` refuses to point them at it."""
        other = tmp_path / "orders.db"
        with contextlib.closing(sqlite3.connect(other)) as c, c:
            c.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        project = tmp_path / "project"
        project.mkdir()
        code, out, err = run(capsys, "install", "claude-code", "--project", str(project),
                             "--database-url", f"sqlite:///{other}")  # fmt: skip
        assert (code, out) == (2, "")
        assert f"{other} is not a session-awareness store: it holds other tables" in err
        assert err.count("nothing was changed") == 1
        assert list(project.iterdir()) == []

    def test_a_database_whose_folder_cannot_be_made_is_refused(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        """`install` makes the database's folder for the first hook; when a file stands
        where the folder goes, that was Python's `FileExistsError` (exit 1)."""
        (tmp_path / "state").touch()
        project = tmp_path / "project"
        project.mkdir()
        url = f"sqlite:///{tmp_path / 'state' / 'sessions.db'}"
        code, out, err = run(capsys, "install", "claude-code", "--project", str(project),
                             "--database-url", url)  # fmt: skip
        assert (code, out) == (2, "")
        assert "cannot make the folder of its file: File exists (nothing was changed)" in err
        assert list(project.iterdir()) == []

    def test_a_relative_path_keeps_its_options_when_made_absolute(
        self, tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """`sqlite:///sessions.db?mode=rw` is installed as the same file, absolute, with its
        `mode`; a name holding `%` or a space is written so it reads back as that name."""
        monkeypatch.chdir(tmp_path)
        (tmp_path / "50% off.db").touch()
        code, out, _ = run(capsys, "install", "claude-code", "--project", str(tmp_path),
                           "--database-url", "sqlite:///50%25%20off.db?mode=rw",
                           "--dry-run")  # fmt: skip
        assert code == 0
        assert f"sqlite:///{tmp_path}/50%25%20off.db?mode=rw" in out


class TestInstallWritesAllOrNothing:
    """`install` changes two files for Claude Code (the hooks and the MCP server): both, or
    neither, and a file it cannot merge or read is named, in one line."""

    THEIRS = '{"permissions": {"allow": ["Bash(make test)"]}}\n'

    @pytest.mark.parametrize("settings_there", [True, False])
    def test_a_file_that_cannot_be_written_leaves_every_file_as_it_was(
        self, *, settings_there: bool, tmp_path: Path, capsys: Capture,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:  # fmt: skip
        """R-L9: `.mcp.json` cannot be replaced after the hooks' settings were: the settings
        are put back (or removed, with the folder made for them), no scratch file stays, and
        the one line names the file (exit 1)."""
        settings = tmp_path / ".claude" / "settings.json"
        if settings_there:
            settings.parent.mkdir()
            settings.write_text(self.THEIRS)
        replace = Path.replace

        def refusing(self: Path, target: str | Path) -> Path:
            if Path(target).name == ".mcp.json":
                raise PermissionError(1, "Operation not permitted")
            return replace(self, target)

        monkeypatch.setattr(Path, "replace", refusing)
        code, out, err = run(capsys, "install", "claude-code", "--project", str(tmp_path),
                             "--database-url", f"sqlite:///{tmp_path / 's.db'}")  # fmt: skip
        assert (code, out) == (1, "")
        assert err == (f"error: cannot write {tmp_path / '.mcp.json'}: Operation not "
                       "permitted; nothing was changed\n")  # fmt: skip
        if settings_there:
            assert settings.read_text() == self.THEIRS
            assert list(settings.parent.iterdir()) == [settings]
        assert list(tmp_path.iterdir()) == ([settings.parent] if settings_there else [])

    @pytest.mark.parametrize(
        ("text", "why"),
        [
            ('{"hooks": {"SessionStart": {}}}', "the settings' hooks.SessionStart is not a "
             "JSON array"),
            ('{"hooks": []}', "the settings' hooks is not a JSON object"),
        ],
    )  # fmt: skip
    def test_a_settings_file_of_another_shape_is_named_and_left_alone(
        self, text: str, why: str, tmp_path: Path, capsys: Capture
    ) -> None:
        """An event whose hooks are not a list was an `AttributeError` (exit 1, Python's
        words); it is refused like any file install cannot merge, naming the file."""
        settings = tmp_path / ".claude" / "settings.json"
        settings.parent.mkdir()
        settings.write_text(text)
        code, out, err = run(capsys, "install", "claude-code", "--project", str(tmp_path))
        assert (code, out) == (1, "")
        assert err == f"error: {settings}: {why}; nothing was changed\n"
        assert settings.read_text() == text
        assert not (tmp_path / ".mcp.json").exists()

    def test_a_configuration_path_that_is_a_folder_is_named(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        """A `.mcp.json` that is a folder cannot be read: one line naming it, not Python's
        `IsADirectoryError`."""
        (tmp_path / ".mcp.json").mkdir()
        code, out, err = run(capsys, "install", "claude-code", "--project", str(tmp_path))
        assert (code, out) == (1, "")
        assert (
            err
            == f"error: cannot read {tmp_path / '.mcp.json'}: Is a directory; nothing was changed\n"
        )
        assert [p.name for p in tmp_path.iterdir()] == [".mcp.json"]


class TestPruneInBatches:
    def test_a_session_pruned_over_several_batches_is_one_session_at_its_highest_watermark(
        self, database_url: str, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-R1: the prune that runs shows what its dry run showed: `removed 4 rows from 1
        session`, watermark 4, not one line per batch that raised it ("from 2 sessions")."""
        monkeypatch.setattr(retention, "PRUNE_BATCH_ROWS", 2)
        with structlog.testing.capture_logs(), open_service(database_url) as svc:
            svc.open_session(MANAGER)
            for _ in range(5):
                svc.record_goal_changed(MANAGER, summary="goal updated")
        argv = ("prune", "--retention-rows", "1", "--database-url", database_url)
        code, dry, _ = run(capsys, *argv, "--dry-run")
        assert dry.startswith("would remove 4 rows from 1 session and 0 idle cursors")
        code, out, _ = run(capsys, *argv)
        assert code == 0
        assert out.splitlines()[0] == "removed 4 rows from 1 session and 0 idle cursors"
        assert out.splitlines()[1:] == dry.splitlines()[1:]
        assert out.splitlines()[-1].split() == [MANAGER, "main", "4"]
        assert run(capsys, *argv, "--json")[1].count(MANAGER) == 0  # nothing left to prune


class ClosedPipe(io.StringIO):
    """A stdout whose reader has gone (`| head -c0`): every write fails."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


class TestDrainingIntoAReaderThatGoes:
    @pytest.fixture
    def pending_url(self, database_url: str) -> str:
        """A store on each backend where the manager has one pending notice."""
        with structlog.testing.capture_logs(), open_service(database_url) as svc:
            svc.open_session(MANAGER)
            svc.record_child_spawned(CHILD, parent=MANAGER, run_id="r1")
            svc.record_human_direct_message(CHILD, channel="telegram")
        return database_url

    def test_a_notice_the_reader_never_got_stays_pending(
        self, pending_url: str, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-N8, R-N3: `notices W --drain | head -c0` exits 141 and acknowledges nothing:
        the notice it could not print is still pending, and the next drain shows it once."""
        with monkeypatch.context() as patch:
            patch.setattr(sys, "stdout", ClosedPipe())
            assert main(["notices", MANAGER, "--drain", "--database-url", pending_url]) == 141
        code, out, err = run(capsys, "notices", MANAGER, "--drain", "--database-url", pending_url)
        assert (code, err) == (0, "")
        assert out.splitlines() == [notice_text(CHILD, 1), "1 notice drained; 0 pending now"]
        code, out, _ = run(capsys, "notices", MANAGER, "--drain", "--database-url", pending_url)
        assert out == "0 notices drained; 0 pending now\n"

    def test_with_json_too(
        self, pending_url: str, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-N8: `--json` writes the document up to `pendingAfter` before acknowledging, so
        a reader that goes away leaves the notice pending; a whole run prints the same JSON
        as before, `pendingAfter` counting what is pending once the drain is done."""
        argv = ["notices", MANAGER, "--drain", "--json", "--database-url", pending_url]
        with monkeypatch.context() as patch:
            patch.setattr(sys, "stdout", ClosedPipe())
            assert main(argv) == 141
        code, out, _ = run(capsys, *argv)
        assert code == 0
        assert out == json.dumps({"watcher": MANAGER, "notices": [notice_text(CHILD, 1)],
                                  "drained": True, "pendingAfter": 0}, indent=2) + "\n"  # fmt: skip
        assert json.loads(run(capsys, *argv)[1])["notices"] == []


class TestHealthOfASpoolThatIsNotThere:
    @pytest.mark.parametrize("spool", ["missing", "a-file", ""])
    def test_a_spool_folder_that_is_not_there_is_bad_input(
        self, spool: str, store_url: str, tmp_path: Path, capsys: Capture,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:  # fmt: skip
        """R-L10: `health --spool DIR` with a mistyped DIR answered "0 kept signals waiting"
        for a folder that does not exist, while the spool that holds them is elsewhere; it is
        bad input (exit 2, one line), and nothing is created there."""
        monkeypatch.chdir(tmp_path)
        (tmp_path / "a-file").touch()
        code, out, err = run(capsys, "health", "--spool", spool, "--database-url", store_url)
        assert (code, out) == (2, "")
        assert err.startswith("error: Invalid value for '--spool': Directory ")
        assert err.count("\n") == 1
        assert not (tmp_path / "missing").exists()

    def test_an_existing_spool_folder_is_read(
        self, store_url: str, tmp_path: Path, capsys: Capture
    ) -> None:
        """The folder a host's services use is read, its count shown."""
        (tmp_path / "spool").mkdir()
        code, out, _ = run(capsys, "health", "--spool", str(tmp_path / "spool"), "--json",
                           "--database-url", store_url)  # fmt: skip
        assert code == 0
        assert json.loads(out)["spool"]["signals"] == 0


class TestAPollingPeriodThatIsNoNumber:
    @pytest.mark.parametrize("seconds", ["nan", "inf", "1e400", "3601"])
    def test_the_mcp_server_refuses_it_before_serving(
        self, seconds: str, store_url: str, capsys: Capture
    ) -> None:
        """R-M3: `--poll-seconds nan` passed the range (NaN compares false) and the server
        died with `ExceptionGroup: unhandled errors in a TaskGroup` (exit 1); `inf` polled
        never. Both are bad input, named, before anything is served."""
        code, out, err = run(capsys, "mcp", "--caller", MANAGER, "--poll-seconds", seconds,
                             "--database-url", store_url)  # fmt: skip
        assert (code, out) == (2, "")
        assert err.startswith("error: Invalid value for '--poll-seconds': ")
        assert err.count("\n") == 1


class TestTheMcpServerOnSomeoneElsesDatabase:
    @staticmethod
    def serve(url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
        """`session-awareness mcp` over stdio until stdin closes, nothing asked."""
        return subprocess.run(
            [sys.executable, "-m", "session_awareness.infrastructure.cli", "mcp", "--caller",
             MANAGER, "--database-url", url],
            input="", capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
            env={**os.environ, "SESSION_AWARENESS_STATE_DIR": str(tmp_path / "state")},
        )  # fmt: skip

    def test_a_sqlite_file_holding_other_tables_is_refused_and_left_as_it_was(
        self, tmp_path: Path
    ) -> None:
        """A host makes a store of a missing or empty file; `mcp --database-url` on a file
        that holds another application's tables added the store's eleven tables to it.
        It is refused as every other command refuses it (exit 2, one line)."""
        other = tmp_path / "orders.db"
        with contextlib.closing(sqlite3.connect(other)) as c, c:
            c.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        before = other.read_bytes()
        done = self.serve(f"sqlite:///{other}", tmp_path)
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == (f"error: {other} is not a session-awareness store: it holds "
                               "other tables, with no stored_events table (nothing was "
                               "changed)\n")  # fmt: skip
        assert other.read_bytes() == before

    @pytest.mark.parametrize(
        ("url", "why"),
        [("sqlite:///:memory:", "in-memory"), ("sqlite:///{store}?mode=ro", "read-only")],
        ids=["in-memory", "read-only"],
    )
    def test_a_store_no_other_process_shares_or_that_cannot_be_written_is_refused(
        self, url: str, why: str, tmp_path: Path
    ) -> None:
        """R-L9: the server records its hooks' relayed signals and its acknowledgements, for
        every session of the store to see. It served an in-memory database, which each
        session's server and hook had to itself and lost at exit, the hooks relaying their
        signals into it; it is refused (exit 2, one line), as `install` refuses it."""
        store = tmp_path / "sessions.db"
        with open_service(f"sqlite:///{store}"):
            pass
        done = self.serve(url.format(store=store), tmp_path)
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr.startswith("error: ") and why in done.stderr
        assert done.stderr.count("\n") == 1

    def test_a_missing_file_is_still_made_a_store_as_a_host_makes_it(self, tmp_path: Path) -> None:
        """What `install` relies on: the first server (or hook) of a new store creates it."""
        fresh = tmp_path / "sessions.db"
        done = self.serve(f"sqlite:///{fresh}", tmp_path)
        assert done.returncode == 0, done.stderr
        assert fresh.is_file()


class TestAConsoleAddressThatCannotBeTaken:
    def test_a_port_in_use_is_one_line_and_exit_2_before_the_console_says_where_it_listens(
        self, store_url: str, capsys: Capture
    ) -> None:
        """R-O1: uvicorn logged the bind error in its own format and exited 3, a code the
        CLI does not document, after the console had announced its address."""
        pytest.importorskip("uvicorn")
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            code, out, err = run(capsys, "console", "--port", str(port),
                                 "--database-url", store_url)  # fmt: skip
        assert (code, out) == (2, "")
        assert err == f"error: cannot listen on 127.0.0.1 port {port}: address already in use\n"

    def test_a_host_that_does_not_resolve_is_one_line_and_exit_2(
        self, store_url: str, capsys: Capture
    ) -> None:
        """A mistyped --host (given a token, as beyond loopback it must be)."""
        pytest.importorskip("uvicorn")
        code, out, err = run(capsys, "console", "--host", "nosuchhost.invalid", "--token", "t",
                             "--database-url", store_url)  # fmt: skip
        assert (code, out) == (2, "")
        assert err.startswith("error: cannot listen on nosuchhost.invalid port 8765: ")
        assert err.count("\n") == 1


class TestTheDemosTryItLine:
    def test_a_hidden_password_is_said_to_be_hidden(
        self, database_url: str, capsys: Capture
    ) -> None:
        """The demo's last line is a command to try; on a URL with a password it shows
        `***` (never the password), so it says that the password goes there: as printed,
        the command would fail to log in with no word why."""
        code, out, _ = run(capsys, "demo", "--database-url", database_url)
        last = out.splitlines()[-1]
        assert code == 0
        assert last.startswith("try it    ")
        hidden = redact(database_url) != database_url
        assert last.endswith("   # with the password in place of ***") is hidden
        assert ("***" in last) is hidden


class TestAnInterruptedDemo:
    @staticmethod
    def interrupt_the_story(monkeypatch: pytest.MonkeyPatch) -> None:
        """Ctrl-C when the human changes the researcher's goal, halfway through the story."""

        def interrupted(*_: object, **__: object) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(SessionAwareness, "record_goal_changed", interrupted)

    def test_a_file_the_demo_created_goes_with_the_half_told_story(
        self, tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Ctrl-C midway left `demo.db` holding half the story, and every later `demo
        --database-url` on it refused ("already has some"): the file it created is removed,
        so the same command runs again."""
        demo = tmp_path / "demo.db"
        url = f"sqlite:///{demo}"
        with monkeypatch.context() as patch:
            self.interrupt_the_story(patch)
            code, _, err = run(capsys, "demo", "--database-url", url)
            assert (code, err.strip()) == (130, "error: interrupted")
        assert list(tmp_path.iterdir()) == []
        code, out, _ = run(capsys, "demo", "--database-url", url)
        assert code == 0
        assert out.splitlines()[-1].startswith("try it")

    def test_a_store_that_was_there_before_is_kept(
        self, store_url: str, tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Only what the demo created goes: a store the caller named is never removed."""
        empty = tmp_path / "empty.db"
        with structlog.testing.capture_logs(), open_service(f"sqlite:///{empty}"):
            pass
        self.interrupt_the_story(monkeypatch)
        code, _, _ = run(capsys, "demo", "--database-url", f"sqlite:///{empty}")
        assert code == 130
        assert empty.is_file()
