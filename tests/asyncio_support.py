"""Helpers of the asyncio API tests (`tests/async`, a folder name no import statement can
spell): a heartbeat that shows whether the event loop stays free, and a wait for a condition
on the loop with a deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


class Heartbeat:
    """A task that ticks every `period` seconds and remembers the longest gap between two
    ticks: a blocked event loop shows as a long gap."""

    def __init__(self, period: float = 0.01) -> None:
        self.period = period
        self.ticks = 0
        self.longest_gap = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._beat())

    async def _beat(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(self.period)
            now = time.monotonic()
            self.longest_gap = max(self.longest_gap, now - last)
            self.ticks += 1
            last = now

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def eventually(condition: Callable[[], Awaitable[bool]], timeout: float = 30) -> bool:
    """Await `condition` until it holds or the deadline passes (the loop stays free)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await condition():
            return True
        await asyncio.sleep(0.01)
    return await condition()
