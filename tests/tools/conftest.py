"""Fixtures of the tool tests: a host dispatcher that remembers, and a service with the world."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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


UNSET: Any = object()


class RecordingSpawner:
    """A host's `sessions_spawn`: remembers each (caller, request) and answers the next child
    key it was given (`agent:main:subagent:child-<n>` by default) with run `run-<n>`, unless
    told to fail."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.children: list[str] = []
        self.failure: Exception | None = None
        self.answer: Any = UNSET  # when set, returned as is

    def __call__(self, caller: str, request: dict[str, Any]) -> tuple[str, str]:
        self.requests.append((caller, request))
        if self.failure is not None:
            raise self.failure
        if self.answer is not UNSET:
            return self.answer  # type: ignore[no-any-return]
        n = len(self.requests)
        child = self.children.pop(0) if self.children else f"agent:main:subagent:child-{n}"
        return child, f"run-{n}"


@pytest.fixture
def spawner() -> RecordingSpawner:
    return RecordingSpawner()


WorldFactory = Callable[..., SessionAwareness]


@pytest.fixture
def open_world(
    open_svc: ServiceFactory,
    clock: FakeClock,
    dispatcher: RecordingDispatcher,
    spawner: RecordingSpawner,
) -> WorldFactory:
    """Open a service with the recording dispatcher and spawner (options as for
    `open_service`) and build the shared world in it."""

    def factory(**options: object) -> SessionAwareness:
        svc = open_svc(**{"dispatcher": dispatcher, "spawner": spawner, **options})
        build_world(svc, clock)
        return svc

    return factory


@pytest.fixture
def world(open_world: WorldFactory) -> SessionAwareness:
    """The world under the default visibility, `tree`."""
    return open_world()
