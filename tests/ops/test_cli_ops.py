"""The operator CLI's operations commands: output, `--json` and exit codes (docs/operations.md)."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import structlog.testing

from session_awareness.application import open_service
from session_awareness.infrastructure.cli import main
from session_awareness.infrastructure.cli.common import open_store
from tests.conftest import FakeClock
from tests.contract.helpers import CHILD, MANAGER, PEER
from tests.ops.helpers import cursor_id, mixed_workload, session_id, tamper

Capture = pytest.CaptureFixture[str]


@pytest.fixture
def store_url(database_url: str) -> str:
    """A store on each backend after a mixed workload that began 70 days ago, so retention
    has work left for `prune` (the CLI runs on the real clock)."""
    clock = FakeClock(datetime.now(UTC) - timedelta(days=70))
    with structlog.testing.capture_logs():
        svc = open_service(database_url, clock=clock)
        try:
            mixed_workload(svc, clock)
            svc.record_goal_changed(CHILD, summary="goal updated", actor_type="human")
        finally:
            svc.close()
    return database_url


def run(capsys: Capture, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


class TestAuditCommand:
    def test_a_clean_store_prints_the_table_summary_and_exits_0(
        self, store_url: str, capsys: Capture
    ) -> None:
        """R-R2: one row per read-model table, the replay rate, and the verdict."""
        code, out, err = run(capsys, "audit", "--database-url", store_url)
        assert (code, err) == (0, "")
        assert out.startswith("replayed ")
        assert "events/s" in out.splitlines()[0]
        assert "session_state_events" in out
        assert out.rstrip().endswith("clean: the live read models are exactly what the event "
                                     "store implies")  # fmt: skip

    def test_a_tampered_store_exits_1_and_names_the_row(
        self, store_url: str, capsys: Capture
    ) -> None:
        """R-R2: differences exit 1; the table shows the table, problem, key and values;
        `--rebuild` repairs them and the next audit exits 0."""
        with open_store(store_url, verbose=False) as svc:  # no startup prune
            tamper(svc, "UPDATE {s}session_watch_cursors SET material = 99 WHERE watch_id = ?",
                   cursor_id(MANAGER, CHILD))  # fmt: skip
        code, out, _ = run(capsys, "audit", "--database-url", store_url)
        assert code == 1
        [line] = [line for line in out.splitlines() if "material: 99 → " in line]
        assert "session_watch_cursors" in line
        assert "changed" in line
        assert "NOT CLEAN: 1 differing row, 0 broken rules" in out
        code, out, _ = run(capsys, "audit", "--rebuild", "--json", "--database-url", store_url)
        report = json.loads(out)
        assert (code, report["rebuilt"], report["differenceCount"]) == (1, True, 1)
        assert report["differences"][0]["columns"]["material"]["live"] == 99
        assert run(capsys, "audit", "--database-url", store_url)[0] == 0


class TestHistoryCommand:
    def test_history_prints_one_line_per_entry_with_cursor_positions(
        self, store_url: str, capsys: Capture
    ) -> None:
        """docs/operations.md: signals, pruned marks and L N M of each cursor transition."""
        code, out, _ = run(capsys, "history", CHILD, "--database-url", store_url)
        assert code == 0
        assert "[pruned from changesSince]" in out
        assert "L 2 N 3 M 3: drained; reopened, notice changesSince 2" in out
        assert "removed: reset" in out
        assert out.rstrip().splitlines()[-1].startswith(f"{len(out.splitlines()) - 3} entries")

    def test_history_json_is_the_service_answer(self, store_url: str, capsys: Capture) -> None:
        """`--json` prints the entries of `svc.history` as they are."""
        code, out, _ = run(capsys, "history", CHILD, "--json", "--database-url", store_url)
        entries = json.loads(out)
        assert code == 0
        assert entries[0]["event"] == "opened"
        assert [e["sequence"] for e in entries if e["event"] == "signal"] == [1, 2, 3, 4, 5, 6]

    def test_history_of_a_missing_session_exits_2_with_one_line(
        self, store_url: str, capsys: Capture
    ) -> None:
        """R-S4: an unknown key is bad input, in the rules' words."""
        code, out, err = run(capsys, "history", "agent:main:nobody", "--database-url", store_url)
        assert (code, out, err) == (2, "", "error: Unknown sessionKey: agent:main:nobody\n")


class TestSessionCommands:
    @pytest.mark.parametrize("command", [("notices",), ("notices", "--drain"), ("watches",)])
    def test_a_watcher_known_by_its_cursors_is_known_to_the_cli_as_to_the_service(
        self, database_url: str, capsys: Capture, command: tuple[str, ...]
    ) -> None:
        """R-L9: a parent whose child was recorded before the parent was opened holds a
        cursor, and the service shows its notices; the CLI refused it as unknown, so an
        operator could not see a pending notice. A key never seen is still refused."""
        with structlog.testing.capture_logs(), open_service(database_url) as svc:
            svc.record_child_spawned(CHILD, parent=MANAGER, run_id="run-1")
            svc.record_human_direct_message(CHILD, channel="telegram")
            [text] = svc.pending_notices(MANAGER)
        name, *flags = command
        watcher = (MANAGER,) if name == "notices" else ("--watcher", MANAGER)
        code, out, err = run(capsys, name, *watcher, *flags, "--database-url", database_url)
        assert (code, err) == (0, "")
        assert text in out if name == "notices" else f"{MANAGER}   {CHILD}" in out
        nobody = ("agent:main:nobody",) if name == "notices" else ("--watcher", "agent:main:nobody")
        code, out, err = run(capsys, name, *nobody, *flags, "--database-url", database_url)
        assert (code, out, err) == (2, "", "error: Unknown sessionKey: agent:main:nobody\n")

    def test_list_prints_the_live_sessions_and_their_count(
        self, store_url: str, capsys: Capture
    ) -> None:
        """R-T1: one row per live session; `--json` has the same rows."""
        code, out, _ = run(capsys, "list", "--database-url", store_url)
        assert code == 0
        assert out.rstrip().endswith("4 sessions")
        code, out, _ = run(capsys, "list", "--json", "--kind", "subagent", "--database-url",
                           store_url)  # fmt: skip
        assert sorted(item["sessionKey"] for item in json.loads(out)) == sorted(
            [CHILD, "agent:main:subagent:other"]
        )

    def test_status_prints_the_head_and_the_delta_as_a_table(
        self, store_url: str, capsys: Capture
    ) -> None:
        """R-S1, R-S3: stateVersion, the rows after N, and whether history was pruned."""
        code, out, _ = run(capsys, "status", CHILD, "--changes-since", "0", "--database-url",
                           store_url)  # fmt: skip
        lines = out.splitlines()
        assert code == 0
        assert lines[0] == f"{CHILD}  stateVersion 6"
        assert "HISTORY GAP" in lines[1]
        assert "goal updated" in out

    def test_notices_lists_pending_ones_and_drain_acknowledges_them(
        self, store_url: str, capsys: Capture
    ) -> None:
        """R-N1, R-N3: the pending notice prints as its text; --drain acknowledges it and,
        since newer material exists, one fresh notice opens from the new L."""
        code, out, _ = run(capsys, "notices", MANAGER, "--database-url", store_url)
        assert code == 0
        assert f'session_status sessionKey "{CHILD}" changesSince 3.' in out
        code, out, _ = run(capsys, "notices", MANAGER, "--drain", "--json", "--database-url",
                           store_url)  # fmt: skip
        assert json.loads(out)["drained"] is True
        assert json.loads(out)["pendingAfter"] == 1
        code, out, _ = run(capsys, "notices", MANAGER, "--json", "--database-url", store_url)
        [text] = json.loads(out)["notices"]
        assert text.endswith("changesSince 5.")

    def test_watches_show_positions_by_watcher_or_target_but_not_both(
        self, store_url: str, capsys: Capture
    ) -> None:
        """§4: L N M and pending state per cursor; --watcher and --target exclude each other."""
        code, out, _ = run(capsys, "watches", "--database-url", store_url)
        assert code == 0
        assert "pending: changesSince 3" in out
        code, out, _ = run(capsys, "watches", "--target", CHILD, "--json", "--database-url",
                           store_url)  # fmt: skip
        [row] = json.loads(out)
        assert (row["watcher"], row["acknowledged"], row["notified"]) == (MANAGER, 3, 5)
        code, out, err = run(capsys, "watches", "--watcher", MANAGER, "--target", CHILD,
                             "--database-url", store_url)  # fmt: skip
        assert (code, out) == (2, "")
        assert err.startswith("error: give --watcher or --target, not both")
        assert err.count("\n") == 1

    @pytest.mark.parametrize("where", [(), ("--watcher", MANAGER), ("--target", CHILD)])
    def test_watches_show_one_page_and_count_them_all(
        self, store_url: str, capsys: Capture, where: tuple[str, ...]
    ) -> None:
        """docs/operations.md: `--limit` and `--offset` page the cursors in their order, the
        pages together are the whole list, and the last line counts them all."""
        code, out, _ = run(capsys, "watches", *where, "--json", "--database-url", store_url)
        every = json.loads(out)
        assert code == 0 and every
        pages = []
        for offset in range(len(every)):
            code, out, _ = run(capsys, "watches", *where, "--limit", "1", "--offset",
                               str(offset), "--json", "--database-url", store_url)  # fmt: skip
            pages += json.loads(out)
        assert pages == every
        code, out, _ = run(capsys, "watches", *where, "--limit", "1", "--database-url",
                           store_url)  # fmt: skip
        pending = sum(c["pending"] for c in every)
        cursors = f"{len(every)} cursor{'s' if len(every) != 1 else ''}"
        shown = "" if len(every) == 1 else "1 shown of "
        assert out.splitlines()[-1] == f"{shown}{cursors}, {pending} pending"
        code, _, err = run(capsys, "watches", *where, "--limit", "0", "--database-url",
                           store_url)  # fmt: skip
        assert code == 2 and "--limit" in err


class TestPruneCommand:
    def test_a_dry_run_reports_what_prune_then_removes(
        self, store_url: str, capsys: Capture
    ) -> None:
        """R-R1: --dry-run changes nothing and reports exactly what the real prune removes."""
        _, out, _ = run(capsys, "prune", "--dry-run", "--json", "--database-url", store_url)
        planned = json.loads(out)
        assert planned["dryRun"] is True
        assert planned["removedRows"] > 0
        _, again, _ = run(capsys, "prune", "--dry-run", "--json", "--database-url", store_url)
        assert json.loads(again) == planned
        code, out, _ = run(capsys, "prune", "--json", "--database-url", store_url)
        assert code == 0
        assert {**json.loads(out), "dryRun": True} == planned
        _, out, _ = run(capsys, "prune", "--database-url", store_url)
        assert out.startswith("removed 0 rows from 0 sessions")


class TestBadInput:
    @pytest.mark.parametrize(
        "argv",
        [
            ["audit"],
            ["history", CHILD],
            ["list"],
            ["notices", MANAGER],
            ["prune"],
            ["watches"],
            ["status", CHILD],
        ],
    )
    def test_an_unusable_database_url_gives_one_line_and_exit_2(
        self, argv: list[str], capsys: Capture
    ) -> None:
        """Bad URLs are bad input: one `error:` line, no traceback, nothing on stdout."""
        code, out, err = run(capsys, *argv, "--database-url", "mysql://db/sessions")
        assert (code, out) == (2, "")
        assert err.startswith("error: unsupported database URL")
        assert err.count("\n") == 1

    def test_an_unreachable_postgresql_server_gives_one_line_and_exit_2(
        self, capsys: Capture
    ) -> None:
        """A database that does not answer is one line naming the kind of failure (R-E1) and the
        URL without its password."""
        url = "postgresql://ops:secret@127.0.0.1:9/sessions?connect_timeout=1"
        code, out, err = run(capsys, "audit", "--database-url", url)
        assert (code, out) == (2, "")
        assert err.startswith(
            "error: session store unavailable: cannot open postgresql://ops:***@127.0.0.1:9/sessions"
        )
        assert "secret" not in err
        assert err.count("\n") == 1

    def test_a_missing_sqlite_file_is_not_created(self, tmp_path: Path, capsys: Capture) -> None:
        """An audit of a mistyped path says so and leaves no empty database behind."""
        missing = tmp_path / "missing.db"
        code, _, err = run(capsys, "audit", "--database-url", f"sqlite:///{missing}")
        assert code == 2
        assert err.startswith(f"error: no database at {missing}")
        assert not missing.exists()

    @pytest.mark.parametrize(
        "argv",
        [
            ["audit"],
            ["audit", "--rebuild"],
            ["history", CHILD],
            ["list"],
            ["notices", MANAGER],
            ["notices", MANAGER, "--drain"],
            ["prune"],
            ["watches"],
            ["status", CHILD],
            ["upstream", "scan"],
        ],
    )
    def test_a_sqlite_file_that_is_not_a_store_is_left_as_it_was(
        self, argv: list[str], tmp_path: Path, capsys: Capture
    ) -> None:
        """Looking or writing, a command on someone else's SQLite database says it is not a
        store, in one line, and adds nothing to it."""
        other = tmp_path / "other.db"
        with contextlib.closing(sqlite3.connect(other)) as c, c:
            c.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        before = other.read_bytes()
        code, out, err = run(capsys, *argv, "--database-url", f"sqlite:///{other}")
        assert (code, out) == (2, "")
        assert err.startswith(f"error: {other} is not a session-awareness store")
        assert err.count("\n") == 1
        assert other.read_bytes() == before
        assert [p.name for p in tmp_path.iterdir()] == ["other.db"]

    @pytest.mark.parametrize("argv", [["audit"], ["prune"], ["notices", MANAGER, "--drain"]])
    def test_an_empty_file_is_not_made_a_store_by_a_command_that_does_not_host(
        self, argv: list[str], tmp_path: Path, capsys: Capture
    ) -> None:
        """An empty file is not a store either: it stays empty."""
        empty = tmp_path / "empty.db"
        empty.touch()
        code, out, err = run(capsys, *argv, "--database-url", f"sqlite:///{empty}")
        assert (code, out) == (2, "")
        assert err.startswith(f"error: {empty} is not a session-awareness store: it is empty")
        assert empty.stat().st_size == 0

    def test_upstream_scan_makes_a_store_of_an_empty_file_as_a_host_would(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        """`upstream scan` and `adopt` open the service as a host does, and a host may start
        a store in an empty file."""
        empty = tmp_path / "empty.db"
        empty.touch()
        code, out, _ = run(capsys, "upstream", "scan", "--database-url", f"sqlite:///{empty}")
        assert (code, out) == (0, "0 upstream links scanned\n")
        assert run(capsys, "list", "--database-url", f"sqlite:///{empty}")[0] == 0

    def test_an_unknown_option_gives_one_line_with_a_pointer_to_help(self, capsys: Capture) -> None:
        """Bad arguments: one line naming the problem and where help is."""
        code, out, err = run(capsys, "audit", "--rebuilt")
        assert (code, out) == (2, "")
        assert err.startswith("error: No such option '--rebuilt'.")
        assert "'--rebuild'?" in err  # click's suggestion (with --quiet too, when it is close)
        assert err.rstrip().endswith("(see session-awareness audit --help)")
        assert err.count("\n") == 1


class TestOperationsPage:
    """docs/operations.md shows real output: its samples of the demo's store are checked."""

    PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations.md"

    @pytest.fixture
    def demo_url(self, tmp_path: Path, capsys: Capture) -> str:
        url = f"sqlite:///{tmp_path / 'demo.db'}"
        assert run(capsys, "demo", "--database-url", url)[0] == 0
        return url

    def test_the_list_sample_is_what_list_prints_on_the_demos_store(
        self, demo_url: str, capsys: Capture
    ) -> None:
        """Every column `list` prints, and every row, is on the page as printed."""
        code, out, _ = run(capsys, "list", "--database-url", demo_url)
        assert f"$ session-awareness list\n{out}[exit {code}]\n" in self.PAGE.read_text()

    def test_the_watches_sample_is_what_watches_prints_on_the_demos_store(
        self, demo_url: str, capsys: Capture
    ) -> None:
        """Every cursor `watches` prints, in its order, and its count, are on the page."""
        code, out, _ = run(capsys, "watches", "--database-url", demo_url)
        assert f"$ session-awareness watches\n{out}[exit {code}]\n" in self.PAGE.read_text()

    def test_the_first_audit_sample_is_what_audit_prints_on_the_demos_store(
        self, demo_url: str, capsys: Capture
    ) -> None:
        """The page's first audit shows every read-model table the audit compares (the rate
        in its first line varies from run to run)."""
        code, out, _ = run(capsys, "audit", "--database-url", demo_url)
        page = self.PAGE.read_text()
        sample = page[page.index("$ session-awareness audit\n") :]
        sample = sample[: sample.index("[exit")]
        assert (code, sample.splitlines()[2:]) == (0, out.splitlines()[1:])

    def test_every_sample_runs_as_shown_when_the_page_is_followed_in_order(
        self, tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An operator who runs the page's commands in its order, on the demo's store, gets
        what the page shows: output, errors and exit codes. Left out: what varies from run to
        run (an audit's rate and timing, the real clock's times after the demo) and what
        needs more than the demo's store (adopt, the console, a PostgreSQL server on 5432);
        the tamper the page describes is done where the page does it."""
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("SESSION_AWARENESS_DATABASE_URL", "sqlite:///demo.db")
        page = self.PAGE.read_text()
        [(demo, shown)] = re.findall(
            r"^\$ session-awareness (demo [^\n]*)\n(.*?)^…$", page, re.M | re.S
        )
        code, out, _ = run(capsys, *shlex.split(demo))
        assert (code, out[: len(shown)]) == (0, shown)
        with contextlib.closing(sqlite3.connect("other.db")) as c, c:
            c.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        # A sample: the command, its lines up to `[exit N]`, all in one code block.
        samples = re.findall(
            r"^\$ session-awareness ([^\n]*)\n((?:(?!```)[^\n]*\n)*?)\[exit (\d+)\]$", page, re.M
        )
        ran, tampered = 0, False
        for command, expected, code_shown in samples:
            if any(word in command for word in self.NOT_REPLAYED):
                continue
            if command == "audit" and code_shown == "1" and not tampered:
                self._tamper_as_the_page_says()
                tampered = True
            code, out, err = run(capsys, *shlex.split(command))
            got = scrub(out + err)
            assert (command, got, code) == (command, scrub(expected), int(code_shown))
            ran += 1
        assert tampered and ran == 28

    def test_the_metrics_sample_is_what_the_console_serves_after_the_demo(
        self, demo_url: str
    ) -> None:
        """R-O1, R-O2: `/metrics` on the demo's store, comments left out, is the page's."""
        pytest.importorskip("starlette")
        from starlette.testclient import TestClient  # noqa: PLC0415 -- the console extra

        from session_awareness.application.retention import Retention  # noqa: PLC0415
        from session_awareness.infrastructure.console import create_app  # noqa: PLC0415

        page = self.PAGE.read_text()
        [shown] = re.findall(r"^\$ curl -s http://127\.0\.0\.1:8765/metrics .*?\n(.*?)^```",
                             page, re.M | re.S)  # fmt: skip
        with (
            structlog.testing.capture_logs(),
            open_store(demo_url, verbose=0, retention=Retention()) as svc,
            TestClient(
                create_app(svc, token=None, retention=Retention()), base_url="http://127.0.0.1:8765"
            ) as client,
        ):
            served = client.get("/metrics").text
        assert [ln for ln in served.splitlines() if not ln.startswith("#")] == shown.splitlines()

    #: Samples that need what the demo's store does not give: a transcript, a
    #: PostgreSQL server listening on 127.0.0.1:5432 with the page's roles.
    NOT_REPLAYED = ("adopt ", "upstream scan", "ops:wrong", "/sesions", "gateway:")

    @staticmethod
    def _tamper_as_the_page_says() -> None:
        """The page's tamper: the manager's cursor moved back to L = 0 and the researcher's
        retained row #3 deleted, behind the service's back."""
        researcher = "agent:main:subagent:researcher"
        with open_store("sqlite:///demo.db", verbose=False) as svc:
            tamper(svc, "UPDATE {s}session_watch_cursors SET acknowledged = 0 WHERE watch_id = ?",
                   cursor_id("agent:main:main", researcher))  # fmt: skip
            tamper(svc, "DELETE FROM {s}session_state_events WHERE session_id = ? AND sequence = 3",
                   session_id(researcher))  # fmt: skip


#: What varies from one run of a sample to the next: an audit's timing, and the times the
#: real clock gives after the demo's fake one (09:00 on 2026-11-30), same width as shown.
VARYING = (
    (re.compile(r"in \d+\.\d\d s: [\d,]+ events/s"), "in <seconds>: <rate>"),
    (re.compile(r'"(seconds|eventsPerSecond)": [\d.]+'), r'"\1": <n>'),
    (re.compile(r"\b(?!2026-11-30 09:00)\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\b"), "<now>              "),
)


def scrub(text: str) -> str:
    for pattern, replacement in VARYING:
        text = pattern.sub(replacement, text)
    return text


class TestUpstreamCommands:
    def test_adopt_links_a_transcript_and_scan_reports_the_link(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        """R-U1, R-U2: `adopt` prints the link; `upstream scan` prints one outcome per
        watched link (none yet: nobody watches the adopted session)."""
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        with structlog.testing.capture_logs(), open_service(url) as svc:
            svc.open_session(MANAGER)
        transcript = tmp_path / "thread.jsonl"
        transcript.write_text("")
        code, out, _ = run(capsys, "adopt", PEER, "--claude-transcript", str(transcript),
                           "--json", "--database-url", url)  # fmt: skip
        assert code == 0
        assert json.loads(out)["adopted"] is True
        code, out, _ = run(capsys, "upstream", "scan", "--database-url", url)
        assert code == 0
        assert out.rstrip().endswith("0 upstream links scanned")

    def test_adopting_a_missing_transcript_is_bad_input(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        """R-U1: a transcript that is not there is one line and exit 2."""
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        with structlog.testing.capture_logs(), open_service(url) as svc:
            svc.open_session(MANAGER)
        code, _, err = run(capsys, "adopt", PEER, "--claude-transcript",
                           str(tmp_path / "gone.jsonl"), "--database-url", url)  # fmt: skip
        assert code == 2
        assert err.startswith("error: claudeTranscript: no transcript file at")
