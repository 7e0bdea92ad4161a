"""Test doubles for the service's ports: a clock a test moves, and a waker that remembers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

#: Where a `FakeClock` starts unless told otherwise.
START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


class FakeClock:
    """The service clock (`() -> aware UTC datetime`), moved only by the test.

    >>> clock = FakeClock()
    >>> clock.advance(minutes=5) - START
    datetime.timedelta(seconds=300)
    """

    def __init__(self, now: datetime = START) -> None:
        if now.tzinfo is None:
            raise ValueError("now must be an aware datetime (the service clock is UTC)")
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        """Move forward by `timedelta(**delta)` (e.g. `seconds=20`) and return the new time."""
        self.now += timedelta(**delta)
        return self.now


class RecordingWaker:
    """The host's waker (`(watcher_key) -> None`): remembers whom it woke, in order."""

    def __init__(self) -> None:
        self.woken: list[str] = []

    def __call__(self, watcher_key: str) -> None:
        self.woken.append(watcher_key)
