"""Shared fixtures: the shipped clock and waker doubles, and services per backend."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from session_awareness.application import SessionAwareness, open_service
from session_awareness.testing import START, FakeClock, RecordingWaker, wait_until
from session_awareness.testing.pgcluster import PostgresCluster
from session_awareness.testing.read_models import (
    read_model_rows,
    replace_read_models,
    replayed_changes,
)

__all__ = ["START", "FakeClock", "RecordingWaker", "wait_until"]  # the suite imports them here
pytest_plugins = ["pytester"]  # the shipped plugin is tested by running pytest on examples


@pytest.fixture
def clock(awareness_clock: FakeClock) -> FakeClock:
    """The plugin's clock (session_awareness.testing.plugin), under the suite's short name."""
    return awareness_clock


@pytest.fixture
def waker(awareness_waker: RecordingWaker) -> RecordingWaker:
    """The plugin's waker, under the suite's short name."""
    return awareness_waker


BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """One throwaway PostgreSQL server for the whole run, started on first use."""
    with PostgresCluster() as cluster:
        yield cluster


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database per test, for each backend of the contract suite: a SQLite file, or
    a schema of its own on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return "sqlite:///" + str(tmp_path / "sessions.db")
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    return f"{cluster.url}?schema=t_{uuid.uuid4().hex[:12]}"


ServiceFactory = Callable[..., SessionAwareness]


@pytest.fixture
def open_svc(
    database_url: str, clock: FakeClock, waker: RecordingWaker
) -> Iterator[ServiceFactory]:
    """Open (and later close) services on this test's database; reopening simulates a restart."""
    opened: list[SessionAwareness] = []

    def factory(**kwargs: object) -> SessionAwareness:
        # Maintenance runs when a test says so (`svc.maintain()`), not on a thread racing it.
        options: dict[str, object] = {
            "clock": clock, "waker": waker, "maintenance": "manual", **kwargs
        }  # fmt: skip
        service = open_service(database_url, **options)  # type: ignore[arg-type]
        opened.append(service)
        return service

    yield factory
    for service in opened:
        if not service.closed:
            assert_rebuild_matches(service)
        service.close()


def assert_rebuild_matches(service: SessionAwareness) -> None:
    """R-R2: replaying the event store through the projection reproduces the live read
    models exactly. Every contract test ends with this check."""
    live = read_model_rows(service.store.recorder)
    scratch = open_service("sqlite:///:memory:", clock=service.clock, maintenance="manual")
    try:
        replace_read_models(scratch.store.recorder, replayed_changes(service.store))
        rebuilt = read_model_rows(scratch.store.recorder)
    finally:
        scratch.close()
    for table, rows in live.items():
        assert rebuilt[table] == rows, f"rebuilt {table} differs from the live one"


@pytest.fixture
def svc(open_svc: ServiceFactory) -> SessionAwareness:
    return open_svc()


@pytest.fixture(autouse=True)
def _own_state_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Each test's spool (R-L10) under a state directory of its own, never the user's: a
    signal a test keeps is never picked up by another test, nor left behind."""
    home = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    return home
