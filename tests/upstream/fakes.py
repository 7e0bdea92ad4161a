"""Fakes of the upstream tests: a scheduler moved by hand, and a provider told what to say."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from session_awareness.application import SessionAwareness
from session_awareness.application.upstream.provider_ports import UpstreamProbe, UpstreamResult
from tests.conftest import FakeClock
from tests.contract.helpers import CHILD, spawn

CATALOG = "fake"
SOURCE: dict[str, str] = {
    "catalog_id": CATALOG,
    "host_id": "local",
    "thread_id": "thread-1",
    "upstream_kind": "test-thread",
    "upstream_ref": "threads/thread-1",
}


@dataclass
class _Call:
    due: datetime
    action: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class ManualScheduler:
    """Runs scheduled calls when the test moves time on; it moves the service clock too."""

    clock: FakeClock
    calls: list[_Call] = field(default_factory=list)

    def call_later(self, delay: float, action: Callable[[], None]) -> _Call:
        call = _Call(self.clock.now + timedelta(seconds=delay), action)
        self.calls.append(call)
        return call

    def advance(self, seconds: float) -> None:
        """Move time on by `seconds`, running each call that falls due, in order."""
        target = self.clock.now + timedelta(seconds=seconds)
        while due := [c for c in self.calls if not c.cancelled and c.due <= target]:
            call = min(due, key=lambda c: c.due)
            self.calls.remove(call)
            self.clock.now = max(self.clock.now, call.due)
            call.action()
        self.clock.now = target


class ScriptedProvider:
    """Answers what the test sets per session key; remembers every batch it was asked.
    `during` runs inside the call (after the probes were read), `gate` holds it there."""

    def __init__(self) -> None:
        self.answers: dict[str, UpstreamResult | None] = {}
        self.batches: list[list[UpstreamProbe]] = []
        self.error: Exception | None = None
        self.reply: Any = None  # when set, returned as is (a broken provider)
        self.during: Callable[[], object] | None = None
        self.gate: threading.Event | None = None

    def scan(self, probes: Sequence[UpstreamProbe]) -> Mapping[UUID, UpstreamResult | None]:
        self.batches.append(list(probes))
        if self.during is not None:
            self.during()
        if self.gate is not None:
            self.gate.wait(timeout=30)
        if self.error is not None:
            raise self.error
        if self.reply is not None:
            return self.reply  # type: ignore[no-any-return]
        return {p.session_id: self.answers.get(p.session_key) for p in probes}

    def release(self) -> None:
        if self.gate is not None:
            self.gate.set()


def adopt(svc: SessionAwareness, key: str = CHILD, **changes: str | None) -> int | None:
    """Adopt `key` from the fake catalog (marker `m0` unless changed)."""
    options: dict[str, Any] = {**SOURCE, "marker": "m0", **changes}
    return svc.record_adopted(key, **options)


def adopted_child(svc: SessionAwareness) -> None:
    """The manager spawned the child (so it watches it) and the child was adopted."""
    spawn(svc)
    adopt(svc)


def events(svc: SessionAwareness, key: str = CHILD, since: int = 0) -> list[dict[str, Any]]:
    status = svc.session_status(key, changes_since=since)
    return list(status["stateChanges"]["events"])


def kinds(svc: SessionAwareness, key: str = CHILD) -> list[str]:
    return [event["kind"] for event in events(svc, key)]


def marker(svc: SessionAwareness, key: str = CHILD) -> str | None:
    link = svc.upstream_link(key)
    assert link is not None
    return link["marker"]  # type: ignore[no-any-return]
