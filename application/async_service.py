"""The asyncio API: `open_async_service(...)` and `AsyncSessionAwareness`.

Every public method of `SessionAwareness` is here as a coroutine with the same parameters and
docstring, generated from the sync method: the call runs on the service's own worker threads,
so a blocking database round trip (or an outage's connect timeout) never blocks the event loop.

Thread model. The sync service is thread-safe (its aggregate cache and signal backlog are
locked; SQLite reads use a connection per thread, PostgreSQL a pool), so one service serves
every worker thread. The workers are as many as the store can serve at once: on PostgreSQL the
pool's connections (`pool_size + max_overflow`, 10 by default), since a thread beyond them would
only wait for a connection and then time out; on SQLite, where writes are serialised anyway,
`SQLITE_THREADS`. Calls beyond that wait their turn without blocking the loop.

Wakes. A coroutine-function waker is awaited on the loop that opened the service, scheduled
from whichever thread committed (a worker, or the PostgreSQL wake listener) without waiting for
it. A plain waker is called as the sync service calls it: on the committing thread.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine, Generator
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Self, TypeVar, cast

from session_awareness.application.async_wakes import is_async_waker, on_loop
from session_awareness.application.errors import ConfigurationError
from session_awareness.application.ports import Waker
from session_awareness.application.service import SessionAwareness, open_service
from session_awareness.application.tools import SessionTools

P = ParamSpec("P")
R = TypeVar("R")
#: Worker threads on SQLite: reads run in parallel on per-thread connections, writes queue.
SQLITE_THREADS = 4
#: A waker the host may pass: a plain callable, or a coroutine function.
AnyWaker = Callable[[str], None] | Callable[[str], Awaitable[None]]
#: The sync methods with no coroutine twin, and why.
NOT_MIRRORED = {
    "start": "open_async_service runs the startup duties",
    "configure_upstream": "open_async_service takes the upstream options",
}


class Workers:
    """The service's worker threads. Once stopped, a call runs where it is awaited: the
    closed service answers at once, as the sync one does (a producer `None`, a query
    `StoreUnavailableError`)."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="session-awareness")
        self._stopped = False

    async def run(self, call: Callable[[], R]) -> R:
        if self._stopped:
            return call()
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def stop(self) -> None:
        """Let the threads end once the calls already queued have run."""
        self._stopped = True
        self._executor.shutdown(wait=False)


class _OffLoop:
    """What the generated coroutines need: the sync object and the workers to run it on."""

    _target: Any
    _workers: Workers

    async def _run(self, method: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        return await self._workers.run(functools.partial(method, self._target, *args, **kwargs))


def awaited(
    method: Callable[Concatenate[Any, P], R],
) -> Callable[Concatenate[_OffLoop, P], Coroutine[Any, Any, R]]:
    """The coroutine twin of a sync method: same parameters and docstring, run off the loop."""

    @functools.wraps(method)
    async def twin(self: _OffLoop, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._run(method, *args, **kwargs)

    if not twin.__doc__:
        twin.__doc__ = f"The sync `{method.__name__}`, awaited off the event loop."
    return twin


class AsyncSessionTools(_OffLoop):
    """The session tools as coroutines: `await svc.tools.call(name, arguments, caller=key)`."""

    def __init__(self, tools: SessionTools, workers: Workers) -> None:
        self._target, self._workers = tools, workers

    call = awaited(SessionTools.call)
    session_status = awaited(SessionTools.session_status)
    sessions_list = awaited(SessionTools.sessions_list)
    sessions_send = awaited(SessionTools.sessions_send)
    sessions_spawn = awaited(SessionTools.sessions_spawn)
    subagents = awaited(SessionTools.subagents)
    sessions_history = awaited(SessionTools.sessions_history)
    session_notices = awaited(SessionTools.session_notices)
    session_watch = awaited(SessionTools.session_watch)
    session_unwatch = awaited(SessionTools.session_unwatch)


class AsyncSessionAwareness(_OffLoop):
    """`SessionAwareness` for asyncio hosts: the same methods as coroutines, `async with`."""

    def __init__(self, service: SessionAwareness, workers: Workers) -> None:
        self._target, self._workers = service, workers
        self.tools = AsyncSessionTools(service.tools, workers)

    @property
    def sync(self) -> SessionAwareness:
        """The sync service underneath: safe from any thread, but each call blocks."""
        return self._target  # type: ignore[no-any-return]

    @property
    def closed(self) -> bool:
        """Whether `close()` was called."""
        return self.sync.closed

    @property
    def strict(self) -> bool:
        """Whether the producers raise for the caller's mistakes (`strict=True` at open,
        R-L9); either way never for a storage failure (R-L8)."""
        return self.sync.strict

    @property
    def maintenance_idle(self) -> bool:
        """Whether the maintenance has nothing under way or due now (ADR 038)."""
        return self.sync.maintenance_idle

    @property
    def threads(self) -> int:
        """How many worker threads run the calls."""
        return self._workers.threads

    async def close(self) -> None:
        """Stop the monitors and the wake listener, release the connections, then the worker
        threads; the service cannot be used afterwards. Await the calls in flight first: one
        still running meets a closed store."""
        if not self.sync.closed:
            await self._run(SessionAwareness.close)
        self._workers.stop()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # -- generated from the sync facade (tests/async check that none is missing) -----------

    open_session = awaited(SessionAwareness.open_session)
    is_sandboxed = awaited(SessionAwareness.is_sandboxed)
    reset_session = awaited(SessionAwareness.reset_session)
    delete_session = awaited(SessionAwareness.delete_session)
    set_session_label = awaited(SessionAwareness.set_session_label)
    pin_session = awaited(SessionAwareness.pin_session)
    unpin_session = awaited(SessionAwareness.unpin_session)
    archive_session = awaited(SessionAwareness.archive_session)
    unarchive_session = awaited(SessionAwareness.unarchive_session)
    migrate_read_models = awaited(SessionAwareness.migrate_read_models)
    record_child_spawned = awaited(SessionAwareness.record_child_spawned)
    record_human_direct_message = awaited(SessionAwareness.record_human_direct_message)
    record_goal_changed = awaited(SessionAwareness.record_goal_changed)
    record_run_terminal = awaited(SessionAwareness.record_run_terminal)
    record_compacted = awaited(SessionAwareness.record_compacted)
    record_adopted = awaited(SessionAwareness.record_adopted)
    record_upstream_activity = awaited(SessionAwareness.record_upstream_activity)
    record_upstream_missing = awaited(SessionAwareness.record_upstream_missing)
    flush_signals = awaited(SessionAwareness.flush_signals)
    watch = awaited(SessionAwareness.watch)
    unwatch = awaited(SessionAwareness.unwatch)
    pending_notices = awaited(SessionAwareness.pending_notices)
    drain_notices = awaited(SessionAwareness.drain_notices)
    hand_over_notices = awaited(SessionAwareness.hand_over_notices)
    acknowledge_handed = awaited(SessionAwareness.acknowledge_handed)
    session_status = awaited(SessionAwareness.session_status)
    sessions_list = awaited(SessionAwareness.sessions_list)
    sessions_history = awaited(SessionAwareness.sessions_history)
    note_transcript = awaited(SessionAwareness.note_transcript)
    transcript_session = awaited(SessionAwareness.transcript_session)
    session_rows = awaited(SessionAwareness.session_rows)
    children = awaited(SessionAwareness.children)
    descendants = awaited(SessionAwareness.descendants)
    resolve = awaited(SessionAwareness.resolve)
    resolve_id = awaited(SessionAwareness.resolve_id)
    prune = awaited(SessionAwareness.prune)
    prune_preview = awaited(SessionAwareness.prune_preview)
    sweep = awaited(SessionAwareness.sweep)
    maintain = awaited(SessionAwareness.maintain)
    audit = awaited(SessionAwareness.audit)
    history = awaited(SessionAwareness.history)
    health = awaited(SessionAwareness.health)
    upstream_link = awaited(SessionAwareness.upstream_link)
    scan_upstream_once = awaited(SessionAwareness.scan_upstream_once)
    start_upstream_monitor = awaited(SessionAwareness.start_upstream_monitor)
    stop_upstream_monitor = awaited(SessionAwareness.stop_upstream_monitor)


def worker_threads(service: SessionAwareness) -> int:
    """As many workers as the store serves at once (see the module docstring)."""
    # A PostgreSQL store serves as many calls at once as its pool has connections
    # (`pool_size + max_overflow`, psycopg_pool's public `max_size`); SQLite has no such pool.
    pool = getattr(getattr(service.store.recorder, "datastore", None), "pool", None)
    max_size = getattr(pool, "max_size", None)
    return max_size if isinstance(max_size, int) and max_size > 0 else SQLITE_THREADS


class _Opening:
    """`await open_async_service(...)`, or `async with open_async_service(...) as svc`."""

    def __init__(
        self, database_url: str | None, waker: AnyWaker | None, threads: int | None, options: Any
    ) -> None:
        self._args = (database_url, waker, threads, options)
        self._service: AsyncSessionAwareness | None = None

    def __await__(self) -> Generator[Any, None, AsyncSessionAwareness]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncSessionAwareness:
        self._service = await self._open()
        return self._service

    async def __aexit__(self, *exc_info: object) -> None:
        if self._service is not None:
            await self._service.close()

    async def _open(self) -> AsyncSessionAwareness:
        database_url, waker, threads, options = self._args
        loop = asyncio.get_running_loop()
        sync_waker = cast(Waker | None, waker)
        if waker is not None and is_async_waker(waker):
            sync_waker = on_loop(cast(Callable[[str], Awaitable[None]], waker), loop)
        opening = ThreadPoolExecutor(1, thread_name_prefix="session-awareness-open")
        try:
            call = functools.partial(open_service, database_url, waker=sync_waker, **options)
            service = await loop.run_in_executor(opening, call)
        finally:
            opening.shutdown(wait=False)
        return AsyncSessionAwareness(service, Workers(threads or worker_threads(service)))


def open_async_service(
    database_url: str | None = None,
    *,
    waker: AnyWaker | None = None,
    threads: int | None = None,
    **options: Any,
) -> _Opening:
    """Open the service for an asyncio host: `svc = await open_async_service(url)` or
    `async with open_async_service(url) as svc`. `waker` may be a coroutine function (awaited
    on this event loop) or a plain callable; `threads` overrides the number of worker threads;
    every other keyword is `open_service`'s."""
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
    ):
        raise ConfigurationError(f"threads must be a positive integer, got {threads!r}")
    return _Opening(database_url, waker, threads, options)
