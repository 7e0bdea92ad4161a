"""Wakes for asyncio hosts: a coroutine-function waker is scheduled on the host's event loop
from whichever thread committed, and awaited there (ADR 009)."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable
from concurrent.futures import Future

from session_awareness.application.ports import Waker
from session_awareness.application.store import log


def is_async_waker(waker: object) -> bool:
    """A coroutine function, or an object whose `__call__` is one."""
    return inspect.iscoroutinefunction(waker) or inspect.iscoroutinefunction(
        getattr(waker, "__call__", None)  # noqa: B004 -- the method itself is inspected
    )


def on_loop(waker: Callable[[str], Awaitable[None]], loop: asyncio.AbstractEventLoop) -> Waker:
    """A sync waker that schedules the async `waker` on `loop` from any thread and returns at
    once; a failure of the coroutine is logged as `waker_failed`, like a sync waker's."""

    def wake(watcher: str) -> None:
        if loop.is_closed():
            log.warning("waker_failed", watcher=watcher, error="the event loop is closed")
            return
        awaitable = waker(watcher)
        try:
            future = asyncio.run_coroutine_threadsafe(_awaiting(awaitable), loop)
        except RuntimeError as error:  # the loop closed meanwhile
            log.warning("waker_failed", watcher=watcher, error=repr(error))
            if inspect.iscoroutine(awaitable):
                awaitable.close()
            return
        future.add_done_callback(functools.partial(_log_failure, watcher))

    return wake


async def _awaiting(awaitable: Awaitable[None]) -> None:
    await awaitable


def _log_failure(watcher: str, future: Future[None]) -> None:
    if future.cancelled():
        return
    error = future.exception()
    if error is not None:
        log.warning("waker_failed", watcher=watcher, error=repr(error))
