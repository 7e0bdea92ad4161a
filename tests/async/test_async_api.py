"""The asyncio API: `open_async_service` and `AsyncSessionAwareness`, on both backends."""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from typing import Any

import pytest
from structlog.testing import capture_logs

from session_awareness.application import (
    AsyncSessionAwareness,
    AsyncSessionTools,
    ConfigurationError,
    SessionAwareness,
    StoreUnavailableError,
    UnknownSessionError,
    open_async_service,
)
from session_awareness.application.async_service import NOT_MIRRORED, SQLITE_THREADS
from session_awareness.application.tools import SessionTools
from tests.asyncio_support import Heartbeat, eventually
from tests.conftest import FakeClock, assert_rebuild_matches
from tests.contract.helpers import CHILD, MANAGER, OTHER, notice

CHILDREN = [CHILD, OTHER]


def public_methods(cls: type) -> dict[str, Any]:
    """The public methods `cls` and its session_awareness bases define."""
    found: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith("session_awareness"):
            found |= {
                name: value
                for name, value in vars(klass).items()
                if not name.startswith("_") and inspect.isfunction(value)
            }
    return found


async def spawned(svc: AsyncSessionAwareness) -> None:
    """MANAGER spawned CHILD and OTHER, so it watches both."""
    await svc.open_session(MANAGER)
    for child in CHILDREN:
        await svc.record_child_spawned(child, parent=MANAGER, run_id=f"run-{child[-5:]}")


class TestTwins:
    @pytest.mark.parametrize(
        ("sync", "twin"),
        [(SessionAwareness, AsyncSessionAwareness), (SessionTools, AsyncSessionTools)],
    )
    def test_every_public_sync_method_has_a_coroutine_twin_with_its_signature_and_docs(
        self, sync: type, twin: type
    ) -> None:
        """Every public method of the sync facade is a coroutine function on the async one,
        with the same parameters and docstring (none is forgotten when one is added)."""
        methods = public_methods(sync)
        missing = sorted(set(methods) - set(NOT_MIRRORED) - set(dir(twin)))
        assert missing == []
        for name, method in methods.items():
            if name in NOT_MIRRORED:
                continue
            ours = getattr(twin, name)
            assert inspect.iscoroutinefunction(ours), name
            if name == "close":
                continue  # written by hand: it also stops the worker threads
            assert inspect.signature(ours).parameters == inspect.signature(method).parameters
            if method.__doc__:
                assert ours.__doc__ == method.__doc__, name


class TestAsyncService:
    def test_the_story_runs_with_await_and_async_with(
        self, database_url: str, clock: FakeClock
    ) -> None:
        """R-N1, R-S1: open, spawn, a human steps in, one notice, exact reconciliation, all
        awaited; the service is closed when the block ends."""

        async def story() -> AsyncSessionAwareness:
            async with open_async_service(database_url, clock=clock) as svc:
                await spawned(svc)
                sequence = await svc.record_human_direct_message(CHILD, channel="telegram")
                assert sequence == 2
                assert await svc.drain_notices(MANAGER) == [notice(CHILD, 1)]
                status = await svc.session_status(CHILD, changes_since=1)
                assert [e["sequence"] for e in status["stateChanges"]["events"]] == [2]
                with pytest.raises(UnknownSessionError):
                    await svc.session_status("agent:main:nobody")
                assert_rebuild_matches(svc.sync)
            return svc

        svc = asyncio.run(story())
        assert svc.closed

    def test_await_opens_it_and_close_may_be_awaited_twice(self, database_url: str) -> None:
        """`svc = await open_async_service(url)`, then `await svc.close()` (idempotent);
        afterwards calls answer as the closed sync service does, at once."""

        async def scenario() -> None:
            svc = await open_async_service(database_url)
            await svc.open_session(MANAGER)
            assert (await svc.health())["store"] == "ok"
            await svc.close()
            await svc.close()
            assert svc.closed
            assert await svc.record_goal_changed(MANAGER, summary="goal updated") is None
            with pytest.raises(StoreUnavailableError):
                await svc.session_status(MANAGER)

        asyncio.run(scenario())

    def test_after_close_a_read_says_the_service_is_closed_and_health_answers(
        self, database_url: str
    ) -> None:
        """docs/api.md (Thread model): after close() a query raises StoreUnavailableError (not
        the library's raw error) and health() answers, its store `closed`."""

        async def scenario() -> None:
            svc = await open_async_service(database_url)
            await svc.open_session(MANAGER)
            await svc.close()
            with pytest.raises(StoreUnavailableError, match="the service is closed"):
                await svc.pending_notices(MANAGER)
            assert (await svc.health())["store"] == "closed"

        asyncio.run(scenario())

    def test_the_tools_are_awaited_with_the_raw_arguments_a_model_wrote(
        self, database_url: str
    ) -> None:
        """R-T1: `await svc.tools.call(name, arguments_text, caller=key)`."""

        async def scenario() -> dict[str, Any]:
            async with open_async_service(database_url) as svc:
                await spawned(svc)
                arguments = json.dumps({"sessionKey": CHILD, "changesSince": None})
                return await svc.tools.call("session_status", arguments, caller=MANAGER)

        assert asyncio.run(scenario()) == {"sessionKey": CHILD, "stateVersion": 1}

    def test_a_blocking_call_leaves_the_event_loop_free(self, database_url: str) -> None:
        """While a call blocks (the host's dispatcher waits), the loop goes on: a heartbeat
        keeps ticking and releases the call itself."""
        release = threading.Event()

        def dispatcher(sender: str, target: str, message: str) -> str:
            assert release.wait(30)
            return target

        async def scenario() -> None:
            heartbeat = Heartbeat()
            async with open_async_service(database_url, dispatcher=dispatcher) as svc:
                await spawned(svc)
                heartbeat.start()
                arguments = {"sessionKey": CHILD, "message": "hi"}
                call = asyncio.ensure_future(
                    svc.tools.call("sessions_send", arguments, caller=MANAGER)
                )
                assert await eventually(lambda: _ticked(heartbeat, 20))
                assert not call.done()
                release.set()
                assert (await call)["status"] == "accepted"
                await heartbeat.stop()
            assert heartbeat.longest_gap < 1.0

        asyncio.run(scenario())

    def test_concurrent_producers_and_a_drainer_record_every_signal_once_in_order(
        self, database_url: str
    ) -> None:
        """R-L4, R-N2, R-N3: eight producer tasks on two children and a draining task at the
        same time: sequences are contiguous, every change reaches the watcher as a notice
        or its reopening, and the read models match a rebuild."""

        async def scenario() -> None:
            async with open_async_service(database_url, threads=4) as svc:
                await spawned(svc)
                stop = asyncio.Event()
                drained: list[str] = []

                async def produce(child: str) -> list[int | None]:
                    return [
                        await svc.record_human_direct_message(child, channel="chat")
                        for _ in range(10)
                    ]

                async def drain() -> None:
                    while not stop.is_set():
                        drained.extend(await svc.drain_notices(MANAGER))
                        await asyncio.sleep(0)

                drainer = asyncio.ensure_future(drain())
                results = await asyncio.gather(*(produce(c) for c in CHILDREN * 4))
                stop.set()
                await drainer
                drained.extend(await svc.drain_notices(MANAGER))
                drained.extend(await svc.drain_notices(MANAGER))
                for index, child in enumerate(CHILDREN):
                    got = sorted(s for r in results[index::2] for s in r)  # type: ignore[type-var]
                    assert got == list(range(2, 42))
                    assert (await svc.session_status(child))["stateVersion"] == 41
                    assert any(f'"{child}"' in text for text in drained)
                assert await svc.pending_notices(MANAGER) == []
                assert_rebuild_matches(svc.sync)

        asyncio.run(scenario())


class TestWakers:
    def test_an_async_waker_is_awaited_on_the_services_loop(self, database_url: str) -> None:
        """R-N5: a coroutine-function waker runs on the loop that opened the service, for a
        notice committed on a worker thread."""
        woken: list[tuple[str, int]] = []

        async def waker(watcher: str) -> None:
            woken.append((watcher, threading.get_ident()))

        async def scenario() -> int:
            async with open_async_service(database_url, waker=waker) as svc:
                await spawned(svc)
                await svc.record_goal_changed(CHILD, summary="goal updated", actor_type="human")
                assert await eventually(lambda: _holds(bool(woken)))
            return threading.get_ident()

        loop_thread = asyncio.run(scenario())
        assert woken == [(MANAGER, loop_thread)]

    def test_a_plain_waker_is_called_on_the_committing_worker_thread(
        self, database_url: str
    ) -> None:
        """R-N5: a plain waker is called as the sync service calls it, after commit, on the
        thread that committed: a worker, never the loop."""
        woken: list[tuple[str, int]] = []

        def waker(watcher: str) -> None:
            woken.append((watcher, threading.get_ident()))

        async def scenario() -> int:
            async with open_async_service(database_url, waker=waker) as svc:
                await spawned(svc)
                await svc.record_goal_changed(CHILD, summary="goal updated", actor_type="human")
            return threading.get_ident()

        loop_thread = asyncio.run(scenario())
        assert [watcher for watcher, _ in woken] == [MANAGER]
        assert woken[0][1] != loop_thread

    def test_a_failing_async_waker_is_logged_and_undoes_nothing(self, database_url: str) -> None:
        """R-N5: the notice is committed whatever the waker does; the failure is logged."""

        async def waker(watcher: str) -> None:
            raise RuntimeError("host down")

        async def scenario() -> list[str]:
            async with open_async_service(database_url, waker=waker) as svc:
                await spawned(svc)
                with capture_logs() as logs:
                    await svc.record_goal_changed(CHILD, summary="goal updated", actor_type="human")
                    assert await eventually(
                        lambda: _holds(any(e["event"] == "waker_failed" for e in logs))
                    )
                failed = next(e for e in logs if e["event"] == "waker_failed")
                assert (failed["watcher"], failed["error"]) == (
                    MANAGER,
                    "RuntimeError('host down')",
                )
                return await svc.pending_notices(MANAGER)

        assert asyncio.run(scenario()) == [notice(CHILD, 1)]


class TestThreads:
    def test_the_workers_match_what_the_store_serves_at_once(self, database_url: str) -> None:
        """SQLite: SQLITE_THREADS; PostgreSQL: the pool's pool_size + max_overflow."""

        async def workers(url: str, **options: Any) -> int:
            async with open_async_service(url, **options) as svc:
                return svc.threads

        if database_url.startswith("sqlite"):
            assert asyncio.run(workers(database_url)) == SQLITE_THREADS
        else:
            assert asyncio.run(workers(database_url)) == 2 + 8
            assert asyncio.run(workers(f"{database_url}&pool_size=3&max_overflow=1")) == 4
        assert asyncio.run(workers(database_url, threads=1)) == 1

    @pytest.mark.parametrize("threads", [0, -1, True, 2.5, "4"])
    def test_a_bad_thread_count_is_refused(self, threads: object) -> None:
        """A host's configuration mistake is a ConfigurationError naming the option."""

        async def scenario() -> None:
            await open_async_service("sqlite:///:memory:", threads=threads)  # type: ignore[arg-type]

        with pytest.raises(ConfigurationError, match=r"^threads must be a positive integer"):
            asyncio.run(scenario())


async def _ticked(heartbeat: Heartbeat, ticks: int) -> bool:
    return heartbeat.ticks >= ticks


async def _holds(value: bool) -> bool:
    return value
