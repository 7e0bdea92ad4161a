"""Fixtures of the tool tests: a host dispatcher that remembers, and a service with the world."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from session_awareness.application import SessionAwareness
from tests.conftest import FakeClock, ServiceFactory
from tests.tools.helpers import build_world


class RecordingDispatcher:
    """A host's `sessions_send` delivery: remembers each (sender, target, message) and reports
    the target as the receiver, unless told to redirect or to fail."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str]] = []
        self.redirect: dict[str, str] = {}
        self.failure: Exception | None = None

    def __call__(self, sender: str, target: str, message: str) -> str:
        if self.failure is not None:
            raise self.failure
        self.sent.append((sender, target, message))
        return self.redirect.get(target, target)


@pytest.fixture
def dispatcher() -> RecordingDispatcher:
    return RecordingDispatcher()


WorldFactory = Callable[..., SessionAwareness]


@pytest.fixture
def open_world(
    open_svc: ServiceFactory, clock: FakeClock, dispatcher: RecordingDispatcher
) -> WorldFactory:
    """Open a service with the recording dispatcher (options as for `open_service`) and build
    the shared world in it."""

    def factory(**options: object) -> SessionAwareness:
        svc = open_svc(**{"dispatcher": dispatcher, **options})
        build_world(svc, clock)
        return svc

    return factory


@pytest.fixture
def world(open_world: WorldFactory) -> SessionAwareness:
    """The world under the default visibility, `tree`."""
    return open_world()
