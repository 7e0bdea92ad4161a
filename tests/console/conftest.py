"""The console's fixtures: a scenario's store on each backend, and the console over it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from session_awareness.application import SessionAwareness
from session_awareness.infrastructure.console import create_app
from tests.conftest import ServiceFactory
from tests.console.scenario import build, looking


@pytest.fixture
def writer(open_svc: ServiceFactory) -> SessionAwareness:
    """The host that recorded the scenario (and records more when a test says so)."""
    svc = open_svc()
    build(svc)
    return svc


@pytest.fixture
def reader(writer: SessionAwareness, database_url: str) -> Iterator[SessionAwareness]:
    """A second service on the same store, opened as `session-awareness console` opens it."""
    with looking(database_url) as svc:
        yield svc


@pytest.fixture
def client(reader: SessionAwareness) -> Iterator[TestClient]:
    """The console without a token, asked at a loopback name."""
    with TestClient(create_app(reader, stream_seconds=0.3), base_url="http://localhost") as c:
        yield c
