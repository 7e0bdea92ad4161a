"""The durable spool of kept signals: a kept signal outlives the service that kept it, and
the next service of the store records it once, in order (R-L10, issue 38 item 4); a
kept signal whose session was deleted before the flush is dropped (R-L8, item 7)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import OperationalError
from structlog.testing import capture_logs

from session_awareness.application import SessionAwareness, open_service
from session_awareness.application.backlog import SpoolError
from session_awareness.application.spool import default_spool_dir, spool_name
from session_awareness.configuration import store_identity
from tests.contract.helpers import CHILD, spawn
from tests.reliability.helpers import all_events, assert_audit_clean, wait_until

GOALS = ("goal created", "goal updated", "goal cleared")


@contextlib.contextmanager
def unreachable(svc: SessionAwareness) -> Iterator[None]:
    """The store answers every save of this service with a connection error, as a server
    that went away would; its other services (another process's) are not affected."""
    recorder: Any = svc.store.recorder.read_models
    apply_changes = recorder.apply_changes

    def failing(*args: Any, **kwargs: Any) -> None:
        raise OperationalError("the server went away")

    recorder.apply_changes = failing
    try:
        yield
    finally:
        recorder.apply_changes = apply_changes


def spooled(svc: SessionAwareness) -> int:
    """How many signals the service's spool file holds, read from the file itself."""
    path = svc.health()["spool"]["path"]
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return int(db.execute("SELECT count(*) FROM kept_signals").fetchone()[0])


def sqlite_url(folder: Path) -> str:
    return "sqlite:///" + str(folder / "sessions.db")


def goals(svc: SessionAwareness) -> list[tuple[int, str]]:
    return [(e["sequence"], e["summary"]) for e in all_events(svc, CHILD)[1:]]


@pytest.fixture
def services(database_url: str) -> Iterator[list[SessionAwareness]]:
    """The services a test opens on its store (each as another process would), closed after."""
    opened: list[SessionAwareness] = []
    yield opened
    for service in opened:
        service.close()


def open_on(database_url: str, services: list[SessionAwareness], **options: Any) -> Any:
    """A service of the store with its maintenance left to the test (ADR 038), as the other
    fixtures open theirs: a background sweep re-delivering a notice between the live rows'
    read and their replay made the closing rebuild check fail now and then."""
    options.setdefault("maintenance", "manual")
    service = open_service(database_url, **options)
    services.append(service)
    return service


class TestSpool:
    def test_a_kept_signal_is_spooled_before_the_producer_returns_and_outlives_close(
        self, database_url: str, services: list[SessionAwareness]
    ) -> None:
        """R-L10: each kept signal is in the spool file when its producer returns; close()
        leaves what it could not record there and says how many at WARNING; the next
        service of the store records every one, once, in order, before `open_service`
        returns, so its own first signal is recorded at once, after them."""
        first = open_on(database_url, services)
        spawn(first)
        with unreachable(first):
            for number, summary in enumerate(GOALS, start=1):
                assert first.record_goal_changed(CHILD, summary=summary) is None
                assert spooled(first) == number
            with capture_logs() as logs:
                first.close()
        left = [e for e in logs if e["event"] == "signal_spool_left"]
        assert [(e["log_level"], e["count"]) for e in left] == [("warning", 3)]
        assert not [e for e in logs if e["event"] == "signal_backlog_lost"]
        with capture_logs() as logs:
            first.close()  # said once
        assert not [e for e in logs if e["event"] == "signal_spool_left"]

        second = open_on(database_url, services)  # records them before it returns
        assert goals(second) == [(2, GOALS[0]), (3, GOALS[1]), (4, GOALS[2])]
        assert second.session_status(CHILD)["stateVersion"] == 4
        signals = second.health()["signals"]
        assert (signals["kept"], signals["flushed"], signals["buffered"]) == (3, 3, 0)
        assert spooled(second) == 0
        assert second.record_goal_changed(CHILD, summary="goal updated") == 5
        assert_audit_clean(second)

    def test_a_crash_between_the_commit_and_the_spools_removal_records_it_once(
        self, database_url: str, services: list[SessionAwareness]
    ) -> None:
        """R-L10: the window between "recorded in the store" and "removed from the spool":
        the service that recorded the signal ends before its row goes; the next service
        finds the attempt's first event in the store and does not record it again."""
        first = open_on(database_url, services)
        spawn(first)
        with unreachable(first):
            assert first.record_goal_changed(CHILD, summary="goal updated") is None
        spool: Any = first._intake.backlog.spool

        def crash_before_removal(row: int) -> None:
            raise SpoolError("the process ended here")

        spool.remove = crash_before_removal
        assert wait_until(first.flush_signals)
        assert goals(first) == [(2, "goal updated")]
        assert spooled(first) == 1  # recorded, and still spooled
        first.close()

        second = open_on(database_url, services)
        assert wait_until(second.flush_signals)
        assert second.session_status(CHILD)["stateVersion"] == 2
        assert goals(second) == [(2, "goal updated")]
        assert second.health()["signals"]["flushed"] == 1
        assert spooled(second) == 0
        assert_audit_clean(second)

    def test_a_live_services_spooled_signals_are_its_own(
        self, database_url: str, services: list[SessionAwareness]
    ) -> None:
        """R-L10: two services of one host share the store's spool; a signal belongs to the
        service that kept it while it lives, and only once it has closed does another take
        it over, so no signal is flushed by two."""
        first = open_on(database_url, services)
        spawn(first)
        with unreachable(first):
            assert first.record_goal_changed(CHILD, summary="goal updated") is None
            second = open_on(database_url, services)
            assert second.flush_signals()
            assert second.kept_signals == 0
            assert second.health()["spool"]["signals"] == 1
            assert first.kept_signals == 1
            first.close()
        assert wait_until(second.flush_signals)
        assert goals(second) == [(2, "goal updated")]
        assert second.health()["signals"]["flushed"] == 1
        assert_audit_clean(second)

    def test_a_spool_that_cannot_be_written_is_an_error_naming_the_count(
        self, database_url: str, services: list[SessionAwareness], tmp_path: Path
    ) -> None:
        """R-L10: when the spool cannot be written the kept signal stays in memory, as
        before, and an ERROR names how many are not spooled; closing with them says they
        are lost."""
        blocker = tmp_path / "a-file"
        blocker.write_text("not a folder")
        svc = open_on(database_url, services, spool=blocker / "spool")
        spawn(svc)
        with unreachable(svc), capture_logs() as logs:
            assert svc.record_goal_changed(CHILD, summary="goal created") is None
            assert svc.record_goal_changed(CHILD, summary="goal updated") is None
        failed = [e for e in logs if e["event"] == "signal_spool_failed"]
        assert [(e["log_level"], e["count"]) for e in failed] == [("error", 1), ("error", 2)]
        assert svc.kept_signals == 2
        assert svc.health()["spool"]["unspooled"] == 2
        assert wait_until(svc.flush_signals)
        assert goals(svc) == [(2, "goal created"), (3, "goal updated")]
        with unreachable(svc):
            assert svc.record_goal_changed(CHILD, summary="goal cleared") is None
            with capture_logs() as logs:
                svc.close()
        lost = [e for e in logs if e["event"] == "signal_backlog_lost"]
        assert [(e["log_level"], e["count"]) for e in lost] == [("error", 1)]

    def test_without_a_spool_closing_says_the_kept_signals_are_lost(
        self, database_url: str, services: list[SessionAwareness]
    ) -> None:
        """R-L10: `spool=False` keeps signals in memory only; closing with some is an ERROR
        naming how many are lost, and `health()` shows no spool."""
        svc = open_on(database_url, services, spool=False)
        spawn(svc)
        assert svc.health()["spool"] is None
        with unreachable(svc):
            assert svc.record_goal_changed(CHILD, summary="goal updated") is None
            with capture_logs() as logs:
                svc.close()
        lost = [e for e in logs if e["event"] == "signal_backlog_lost"]
        assert [(e["log_level"], e["count"]) for e in lost] == [("error", 1)]

    def test_a_kept_signal_whose_session_was_deleted_elsewhere_is_dropped(
        self, database_url: str, services: list[SessionAwareness]
    ) -> None:
        """R-L8, R-L10 (issue 38 item 7): a kept signal whose session another process
        deleted before the flush can no longer land: counted as dropped and logged, not
        flushed, and gone from the spool."""
        svc = open_on(database_url, services)
        spawn(svc)
        with unreachable(svc):
            assert svc.record_goal_changed(CHILD, summary="goal updated") is None
            other = open_on(database_url, services)
            other.delete_session(CHILD)
        with capture_logs() as logs:
            assert wait_until(svc.flush_signals)
        dropped = [e for e in logs if e["event"] == "signal_backlog_dropped"]
        assert [(e["log_level"], e["session_key"], e["reason"]) for e in dropped] == [
            ("error", CHILD, "session_deleted")
        ]
        assert svc.health()["signals"] == {
            "buffered": 0, "kept": 1, "flushed": 0, "skipped": 0, "dropped": 1,
        }  # fmt: skip
        assert spooled(svc) == 0


class TestSpoolPlace:
    def test_the_default_spool_is_per_user_state_and_keyed_by_the_store(
        self, database_url: str, services: list[SessionAwareness], tmp_path: Path
    ) -> None:
        """R-L10: by default the spool lives under `$XDG_STATE_HOME/session-awareness/spool`
        (`~/.local/state/...` without it), one file per store, named by a digest."""
        svc = open_on(database_url, services)
        path = Path(svc.health()["spool"]["path"])
        assert path.parent == default_spool_dir()
        assert path.name == spool_name(str(store_identity(database_url)))
        assert default_spool_dir({"HOME": "/h", "XDG_STATE_HOME": "/s"}) == Path(
            "/s/session-awareness/spool"
        )
        assert default_spool_dir({"XDG_STATE_HOME": "relative"}) == (
            Path.home() / ".local/state/session-awareness/spool"
        )

    def test_a_spool_is_named_without_the_password_and_shared_by_one_store(self) -> None:
        """R-L10: the spool's name and identity never hold the URL's password; the options
        that do not change the store (timeouts, pool sizes) do not change its spool; the
        schema does."""
        url = "postgresql://me:s3cret@db.local:5433/app?schema=a&connect_timeout=2"
        identity = store_identity(url)
        assert identity == "postgresql://me@db.local:5433/app?schema=a"
        assert "s3cret" not in spool_name(str(identity))
        assert store_identity("postgresql://me:other@db.local:5433/app?schema=a") == identity
        assert store_identity("postgresql://me@db.local:5433/app?schema=b") != identity
        socket = "postgresql:///app?host=/run/a&password=s3cret&schema=a"
        assert store_identity(socket) == "postgresql://@/app?schema=a&host=/run/a"
        assert store_identity("sqlite:///:memory:") is None

    def test_without_a_home_directory_the_service_opens_without_a_spool(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-L10: a host with no home directory (a bare service account) still opens; it
        keeps signals in memory only, and says so."""

        def no_home() -> Path:
            raise RuntimeError("Could not determine home directory.")

        monkeypatch.delenv("XDG_STATE_HOME")
        monkeypatch.setattr(Path, "home", staticmethod(no_home))
        with capture_logs() as logs, open_service(sqlite_url(tmp_path)) as svc:
            assert svc.health()["spool"] is None
        assert [e["log_level"] for e in logs if e["event"] == "signal_spool_unsupported"] == [
            "warning"
        ]

    def test_an_in_memory_store_has_no_spool(self) -> None:
        """R-L10: nothing outlives an in-memory SQLite store: it has no spool."""
        with open_service("sqlite:///:memory:") as svc:
            assert svc.health()["spool"] is None

    def test_a_spool_option_that_is_not_a_folder_is_refused(self) -> None:
        """R-L10: `spool` is True, False or a folder; anything else is a ConfigurationError."""
        from session_awareness.application import ConfigurationError  # noqa: PLC0415

        for bad in (1, "", None, 2.5):
            with pytest.raises(ConfigurationError, match="spool must be"):
                open_service("sqlite:///:memory:", spool=bad)  # type: ignore[arg-type]


class TestSpoolInTheCli:
    def test_health_shows_the_spool_and_the_signals_waiting_in_it(
        self,
        database_url: str,
        services: list[SessionAwareness],
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """R-L10: `session-awareness health` shows the store and this host's spool of it:
        its file and how many kept signals wait there for the next service."""
        from session_awareness.infrastructure.cli import main  # noqa: PLC0415

        folder = tmp_path / "spool"
        svc = open_on(database_url, services, spool=folder)
        spawn(svc)
        with unreachable(svc), capture_logs():
            assert svc.record_goal_changed(CHILD, summary="goal updated") is None
            svc.close()
        capsys.readouterr()
        assert main(["health", "--database-url", database_url, "--spool", str(folder)]) == 0
        out = capsys.readouterr().out
        assert "store  ok" in out
        assert f"{svc.health()['spool']['path']}: 1 kept signal waiting" in out
        assert main(["health", "--database-url", database_url, "--spool", str(folder),
                     "--json"]) == 0  # fmt: skip
        shown = json.loads(capsys.readouterr().out)
        assert shown["store"] == "ok"
        assert shown["spool"] == {"path": svc.health()["spool"]["path"], "signals": 1}
