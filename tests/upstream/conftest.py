"""Fixtures of the upstream tests: a manual scheduler, a scripted provider, a service."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from session_awareness.application import SessionAwareness
from tests.conftest import FakeClock, ServiceFactory
from tests.upstream.fakes import CATALOG, ManualScheduler, ScriptedProvider


@pytest.fixture
def scheduler(clock: FakeClock) -> ManualScheduler:
    return ManualScheduler(clock)


@pytest.fixture
def provider() -> Iterator[ScriptedProvider]:
    scripted = ScriptedProvider()
    yield scripted
    scripted.release()  # a provider held by a test never outlives it


@pytest.fixture
def usvc(
    open_svc: ServiceFactory, provider: ScriptedProvider, scheduler: ManualScheduler
) -> SessionAwareness:
    """A service whose monitor scans the fake catalog with the scripted provider."""
    return open_svc(upstream_providers={CATALOG: provider}, upstream_scheduler=scheduler)
