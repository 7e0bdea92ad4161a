"""Configuration read like libpq reads it, refused when the server could not hold it, and
errors that say why without a password."""

from __future__ import annotations

import ast
import sqlite3
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from session_awareness.application import ConfigurationError, StoreUnavailableError, open_service
from session_awareness.infrastructure.cli import main
from session_awareness.infrastructure.pg_config import parse_postgres_url, wake_channel_for
from session_awareness.testing.pgcluster import PostgresCluster
from tests.conftest import RecordingWaker, wait_until
from tests.contract.helpers import CHILD, MANAGER, notice, spawn

BASE = "postgresql://sa:pw@db.internal:5433/agents"


class TestLibpqParameters:
    @pytest.mark.parametrize(
        ("query", "expected"),
        [
            ("sslmode=require&sslrootcert=/etc/ca.pem", {"sslmode": "require",
                                                         "sslrootcert": "/etc/ca.pem"}),
            ("application_name=gateway%201", {"application_name": "gateway 1"}),
            ("options=-c%20search_path%3Dx", {"options": "-c search_path=x"}),
            ("target_session_attrs=read-write", {"target_session_attrs": "read-write"}),
            ("keepalives_idle=7", {"keepalives_idle": "7"}),
            ("application_name=ops%40gateway", {"application_name": "ops@gateway"}),
            ("application_name=ops@gateway", {"application_name": "ops@gateway"}),
        ],
    )  # fmt: skip
    def test_every_libpq_parameter_passes_through(
        self, query: str, expected: dict[str, str]
    ) -> None:
        config = parse_postgres_url(f"{BASE}?schema=s&{query}&pool_size=4")
        for name, value in expected.items():
            assert str(config.params[name]) == value
        assert (config.schema, config.pool_size, config.params["dbname"]) == ("s", 4, "agents")
        assert "schema" not in config.params and "pool_size" not in config.params

    def test_several_hosts_a_service_and_credentials_from_the_environment(self) -> None:
        multi = parse_postgres_url("postgresql://sa@h1:5432,h2:5433/agents")
        assert (multi.params["host"], multi.params["port"]) == ("h1,h2", "5432,5433")
        service = parse_postgres_url("postgresql:///?service=gateway&schema=s")
        assert service.params["service"] == "gateway"
        bare = parse_postgres_url("postgresql:///agents")  # user, password, host: libpq's defaults
        assert "user" not in bare.params and "password" not in bare.params

    def test_the_service_options_have_their_defaults_and_connect_timeout_reaches_libpq(
        self,
    ) -> None:
        config = parse_postgres_url(BASE)
        assert (config.schema, config.pool_size, config.max_overflow) == ("public", 2, 8)
        assert (config.connect_timeout, config.lock_timeout) == (3, 0)
        assert parse_postgres_url(BASE + "?connect_timeout=7").params["connect_timeout"] == 7

    @pytest.mark.parametrize(
        ("query", "field"),
        [
            ("bogus=1", "bogus"),
            ("lock_timeout=-1", "lock_timeout"),
            ("lock_timeout=2147484", "lock_timeout"),
            ("pool_size=0", "pool_size"),
            ("max_overflow=1.5", "max_overflow"),
            ("connect_timeout=0", "connect_timeout"),
            ("pool_size=3&pool_size=4", "pool_size"),
            ("schema=" + "s" * 64, "schema"),
            ("schema=" + "é" * 32, "schema"),  # 64 bytes in UTF-8
            ("schema=%20", "schema"),
        ],
    )
    def test_what_the_server_or_the_pool_cannot_hold_is_refused(
        self, query: str, field: str
    ) -> None:
        with pytest.raises(ConfigurationError, match=field):
            parse_postgres_url(f"{BASE}?{query}")

    def test_the_wake_channel_fits_postgresql_for_any_schema(self) -> None:
        """R-N7: a channel is at most 63 bytes; long or non-ASCII schemas get a hash."""
        assert wake_channel_for("awareness") == "session_awareness_awareness"
        for schema in ("ß" * 31, "s" * 63, "s" * 45 + "a", "s" * 45 + "b"):
            assert len(wake_channel_for(schema).encode()) <= 63
        assert wake_channel_for("s" * 45 + "a") != wake_channel_for("s" * 45 + "b")


SECRET = "p#ss/w?rd"  # noqa: S105 -- made up, with the characters that end a URL's authority


class TestPasswords:
    @pytest.mark.parametrize(
        ("url", "error"),
        [
            (f"postgresql://sa:{SECRET}@127.0.0.1:1/db", ConfigurationError),  # not encoded
            (f"postgresql://sa:{SECRET}@[::1/db", ConfigurationError),
            ("postgresql://sa:pw@[::1/db?password=p%23ss%2Fw%3Frd", ConfigurationError),
            (
                "postgresql://sa@127.0.0.1:1/db?password=p%23ss%2Fw%3Frd&connect_timeout=1",
                StoreUnavailableError,
            ),
        ],
    )
    def test_a_password_never_appears_in_an_error_or_a_log(
        self, url: str, error: type[Exception], caplog: pytest.LogCaptureFixture
    ) -> None:
        """A password never shows, whatever the failure (R-E1: a closed port is a
        `StoreUnavailableError`, a malformed URL a `ConfigurationError`)."""
        with capture_logs() as logs, pytest.raises(error) as raised:
            open_service(url)
        text = str(raised.value) + repr(logs) + caplog.text
        for piece in ("p#ss", "w?rd", "p%23ss", "w%3Frd"):
            assert piece not in text

    def test_a_malformed_url_is_a_configuration_error_and_the_cli_exits_2(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        for url in ("postgresql://sa@[::1/db", "sqlite:///x.db?mode=bogus", "sqlite://h/x.db", ""):
            with pytest.raises(ConfigurationError):
                open_service(url or None, retention_days=0)
        assert main(["status", CHILD, "--database-url", "postgresql://sa:pw@[::1/db"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1
        assert "pw@" not in err


class TestConnectionFailures:
    def test_the_server_says_why(self, postgres: PostgresCluster) -> None:
        """A wrong password, a missing database and a closed port each read as such, at once;
        the closed port is a `StoreUnavailableError` (retryable), the others refusals of the
        configuration (R-E1)."""
        wrong = postgres.url.replace(f":{postgres.password}@", ":not-it@")
        cases: dict[str, tuple[str, type[Exception]]] = {
            wrong: (
                f'password authentication failed for user "{postgres.user}"',
                ConfigurationError,
            ),
            postgres.url_for("nowhere"): ('database "nowhere" does not exist', ConfigurationError),
            "postgresql://sa@127.0.0.1:1/db": ("Connection refused", StoreUnavailableError),
        }
        for url, (cause, error) in cases.items():
            with pytest.raises(error) as raised:
                open_service(url)
            assert cause in str(raised.value)
            assert "not-it" not in str(raised.value)
            assert postgres.password not in str(raised.value)

    def test_a_short_password_leaves_the_servers_words_whole(
        self, postgres: PostgresCluster
    ) -> None:
        """libpq never echoes the password, so a one-letter one masks nothing in its words: a
        wrong password `p` reads `password authentication failed`, a closed port `port 1`."""
        cases: dict[str, tuple[type[Exception], tuple[str, ...]]] = {
            postgres.url.replace(f":{postgres.password}@", ":p@"): (
                ConfigurationError,
                (
                    f"port {postgres.port} failed",
                    f'password authentication failed for user "{postgres.user}"',
                ),
            ),
            "postgresql://sa:p@127.0.0.1:1/db?connect_timeout=1": (
                StoreUnavailableError,
                ("port 1 failed", "Connection refused"),
            ),
        }
        for url, (error, causes) in cases.items():
            with pytest.raises(error) as raised:
                open_service(url)
            for cause in causes:
                assert cause in str(raised.value)

    def test_credentials_and_a_service_file_from_the_environment(
        self, postgres: PostgresCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """libpq's own defaults apply: PGUSER/PGPASSWORD, and a `service=` in PGSERVICEFILE."""
        monkeypatch.setenv("PGUSER", postgres.user)
        monkeypatch.setenv("PGPASSWORD", postgres.password)
        where = f"{postgres.host}:{postgres.port}/{postgres.dbname}"
        with open_service(f"postgresql://{where}?schema=env_{uuid.uuid4().hex[:6]}") as svc:
            spawn(svc)
        services = tmp_path / "pg_service.conf"
        services.write_text(
            f"[gateway]\nhost={postgres.host}\nport={postgres.port}\ndbname={postgres.dbname}\n"
        )
        monkeypatch.setenv("PGSERVICEFILE", str(services))
        with open_service(
            f"postgresql:///?service=gateway&schema=svc_{uuid.uuid4().hex[:6]}"
        ) as svc:
            spawn(svc)
            assert svc.health()["store"] == "ok"

    def test_a_long_non_ascii_schema_records_and_wakes_across_services(
        self, postgres: PostgresCluster
    ) -> None:
        """R-N7 on a 62-byte non-ASCII schema: a notice opened by one service wakes the
        watcher through another service's listener; nothing is kept or dropped."""
        schema = "ß" * 30 + uuid.uuid4().hex[:2]
        url = f"{postgres.url}?schema={schema}"
        waker = RecordingWaker()
        with open_service(url) as writer, open_service(url, waker=waker) as listener:
            spawn(writer)
            assert writer.record_human_direct_message(CHILD, channel="telegram") == 2
            assert wait_until(lambda: MANAGER in waker.woken, timeout=10)
            assert listener.pending_notices(MANAGER) == [notice(CHILD, 1)]
            assert writer.health()["signals"]["kept"] == 0

    def test_services_opening_one_new_schema_together_all_open(
        self, postgres: PostgresCluster
    ) -> None:
        """The advisory lock is taken before CREATE SCHEMA: gateways starting together on a
        new schema all open."""
        url = f"{postgres.url}?schema=together_{uuid.uuid4().hex[:8]}"
        errors: list[BaseException] = []
        opened: list[Any] = []
        go = threading.Barrier(4)

        def start() -> None:
            go.wait()
            try:
                opened.append(open_service(url))
            except BaseException as error:  # noqa: BLE001 -- reported below
                errors.append(error)

        threads = [threading.Thread(target=start) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        for svc in opened:
            svc.close()
        assert errors == []
        assert len(opened) == 4


class TestSQLiteModes:
    def test_read_only_opens_read_only(self, tmp_path: Path) -> None:
        path = tmp_path / "sessions.db"
        with open_service(f"sqlite:///{path}") as svc:
            spawn(svc)
        before = path.read_bytes()
        with open_service(f"sqlite:///{path}?mode=ro") as svc:
            assert svc.session_status(CHILD)["stateVersion"] == 1
            assert svc.record_goal_changed(CHILD, summary="goal updated") is None
            with pytest.raises(StoreUnavailableError, match="readonly"):
                svc.open_session("agent:main:another")
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT COUNT(*) FROM session_registry").fetchone() == (2,)
        assert len(before) > 0

    def test_a_read_only_or_read_write_url_never_creates_a_file(self, tmp_path: Path) -> None:
        for mode in ("ro", "rw"):
            with pytest.raises(ConfigurationError, match="no database"):
                open_service(f"sqlite:///{tmp_path / 'missing.db'}?mode={mode}")
        assert not list(tmp_path.iterdir())


class TestOpenServiceArguments:
    @pytest.mark.parametrize(
        ("options", "field"),
        [
            ({"waker": "wake"}, "waker"),
            ({"clock": 12}, "clock"),
            ({"signal_backlog": -1}, "signal_backlog"),
            ({"signal_backlog": True}, "signal_backlog"),
            ({"dispatcher": object()}, "dispatcher"),
            # accepted at open, they failed the first prune (OverflowError, R-L9)
            ({"retention_days": 10**20}, "retention_days must be a positive integer, at most"),
            ({"retention_days": 36_501}, "retention_days"),
            ({"retention_rows": 2**53}, "retention_rows"),
            ({"retention_rows": 0}, "retention_rows"),
        ],
    )
    def test_bad_arguments_are_configuration_errors(
        self, options: dict[str, Any], field: str, tmp_path: Path
    ) -> None:
        """R-L9, R-R1: an argument the service cannot use (a retention past what a prune can
        compute among them) is a `ConfigurationError` at open, before any file is made."""
        with pytest.raises(ConfigurationError, match=field):
            open_service(f"sqlite:///{tmp_path / 'x.db'}", **options)
        assert not list(tmp_path.iterdir())

    def test_psycopg_is_only_imported_by_the_postgresql_modules(self) -> None:
        """No module of the application layer imports psycopg (it names it only in the hint
        for a missing extra)."""
        from session_awareness import application  # noqa: PLC0415

        for module in Path(application.__file__).resolve().parent.rglob("*.py"):
            for node in ast.walk(ast.parse(module.read_text())):
                names = (
                    [alias.name for alias in node.names] if isinstance(node, ast.Import)
                    else [node.module or ""] if isinstance(node, ast.ImportFrom)
                    else []
                )  # fmt: skip
                assert not any(name.split(".")[0].startswith("psycopg") for name in names), module
