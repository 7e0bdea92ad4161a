"""The asyncio API on PostgreSQL: an outage never blocks the event loop, and wakes from other
processes reach an async waker on the loop (R-L8, R-N7)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest
from structlog.testing import capture_logs

from session_awareness.application import (
    StoreUnavailableError,
    open_async_service,
    open_service,
)
from session_awareness.testing.pgcluster import PostgresCluster
from tests.asyncio_support import Heartbeat, eventually
from tests.contract.helpers import CHILD, MANAGER, notice, spawn

#: Generous on purpose: this bounds a hang, it does not measure speed.
NO_HANG = 20.0
#: The longest the loop may go without a heartbeat tick; a call blocking the loop would take
#: `connect_timeout` (1 s) at least.
FREE_LOOP = 0.5


@pytest.fixture
def own_cluster() -> Iterator[PostgresCluster]:
    """A cluster of its own: this test stops and restarts it."""
    with PostgresCluster() as cluster:
        yield cluster


class TestAsyncOutage:
    def test_the_loop_stays_responsive_while_the_database_is_down(
        self, own_cluster: PostgresCluster
    ) -> None:
        """R-L8: with the database stopped, producers return None, queries raise
        StoreUnavailableError after the connect timeout, and a heartbeat task keeps ticking
        all along; once the database is back the kept signals are recorded in order and the
        notice is there."""
        url = own_cluster.url + "?schema=async_outage&connect_timeout=1"

        async def scenario() -> None:
            heartbeat = Heartbeat()
            async with open_async_service(url) as svc:
                await asyncio.to_thread(spawn, svc.sync)
                heartbeat.start()
                await asyncio.to_thread(own_cluster.stop, mode="immediate")

                with capture_logs() as logs:
                    recorded = await asyncio.gather(
                        svc.record_human_direct_message(CHILD, channel="telegram"),
                        svc.record_goal_changed(CHILD, summary="goal updated"),
                    )
                assert recorded == [None, None]
                failures = {e["kind"] for e in logs if e["event"] == "signal_record_failed"}
                assert failures == {"human_direct_message", "goal_changed"}

                ticks, started = heartbeat.ticks, time.monotonic()
                queries = [svc.session_status(CHILD, changes_since=0) for _ in range(3)]
                outcomes = await asyncio.gather(*queries, return_exceptions=True)
                assert all(isinstance(o, StoreUnavailableError) for o in outcomes), outcomes
                assert time.monotonic() - started < NO_HANG
                assert heartbeat.ticks > ticks  # the loop ran while the queries waited
                assert (await svc.health())["signals"]["buffered"] == 2

                await asyncio.to_thread(own_cluster.start)
                assert await eventually(svc.flush_signals, timeout=NO_HANG)
                status = await svc.session_status(CHILD, changes_since=1)
                kinds = [e["kind"] for e in status["stateChanges"]["events"]]
                assert sorted(kinds) == ["goal_changed", "human_direct_message"]
                assert await svc.pending_notices(MANAGER) == [notice(CHILD, 1)]
                await heartbeat.stop()
            assert heartbeat.longest_gap < FREE_LOOP, heartbeat.longest_gap

        asyncio.run(scenario())


class TestAsyncWakesAcrossProcesses:
    def test_a_notice_opened_elsewhere_is_awaited_on_this_loop(
        self, postgres: PostgresCluster
    ) -> None:
        """R-N7: another service (another process, for all it knows) opens a notice; this
        service's wake listener hears it and the async waker runs on this loop."""
        url = postgres.url + "?schema=async_wakes"
        woken: list[tuple[str, int]] = []

        async def waker(watcher: str) -> None:
            woken.append((watcher, threading.get_ident()))

        async def scenario() -> int:
            async with open_async_service(url, waker=waker) as svc:
                with open_service(url) as other:
                    await asyncio.to_thread(spawn, other)
                    await asyncio.to_thread(
                        other.record_goal_changed, CHILD, summary="goal updated"
                    )
                    assert await eventually(lambda: _woken(woken), timeout=NO_HANG)
                assert await svc.pending_notices(MANAGER) == [notice(CHILD, 1)]
            return threading.get_ident()

        loop_thread = asyncio.run(scenario())
        assert woken == [(MANAGER, loop_thread)]


async def _woken(woken: list[tuple[str, int]]) -> bool:
    return bool(woken)
