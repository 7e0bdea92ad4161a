"""`session_notices` with `drain: true` hands the notices over and acknowledges them only once
its answer is written to stdout (R-N8, ADR 048): a request cancelled before then (Claude
Code's tool timeout, the user's Esc), a server stopped with the answer unwritten, leave every
notice pending; a notice opened between the read and the write stays pending. The official
client over the real server process, on both backends.

The answer is held between the read and the write as a client that stopped reading holds
it: the client's reads are held (`HeldReads`), two small answers fill its reader, and the
drain's answer, larger than a pipe, stays in the server's write until the reads go on."""

from __future__ import annotations

import json
import os
import signal
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client
from mcp.client.stdio import stdio_client

from session_awareness.application import SessionAwareness, open_service
from session_awareness.infrastructure.mcp_server import Acknowledgements
from session_awareness.infrastructure.mcp_stdio import Deliveries
from tests.hooks.helpers import seed_notices, watched_targets
from tests.mcp.helpers import DEADLINE, call, server_params
from tests.mcp.test_mcp_handover import server_pid

LEAD = "agent:claude:lead"
#: Notices enough for an answer of about 600 KB: more than the server's stdout pipe and
#: everything the client's asyncio reader buffers ahead (at most about 256 KiB) can take.
HELD = 256


def long_targets(count: int = HELD) -> list[str]:
    """Target keys of about 500 characters (R-K1 allows 512): the most bytes per notice."""
    return [f"agent:claude:worker-{n:03d}-{'x' * 480}" for n in range(count)]


def pending(url: str) -> list[str]:
    with open_service(url) as svc:
        return svc.pending_notices(LEAD)


def events(log: Path) -> list[dict[str, Any]]:
    """The server's log events (`--log-format json`)."""
    lines = log.read_text().splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


async def logged(log: Path, event: str, **fields: object) -> dict[str, Any]:
    """The first log event `event` with `fields`, once the server has logged it (a deadline,
    not a pause)."""
    with anyio.fail_after(DEADLINE):
        while True:
            for found in events(log):
                if found["event"] == event and all(found.get(k) == v for k, v in fields.items()):
                    return found
            await anyio.sleep(0.02)


async def until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(DEADLINE):
        while not condition():
            await anyio.sleep(0.01)


class HeldReads:
    """The client's read stream, which can be held: while held, each message the client
    would read waits here, so the client's reader stops taking the server's stdout once it
    holds a line of its own, and the server's next large write fills the pipe and blocks."""

    def __init__(self) -> None:
        self.inner: Any = None  # the client transport's memory stream
        self.holding = 0
        self._going = anyio.Event()
        self._going.set()

    def hold(self) -> None:
        self._going = anyio.Event()

    def go_on(self) -> None:
        self._going.set()

    def reader_blocked(self) -> bool:
        """The client's stdout reader has a line it cannot hand on: it reads no more."""
        assert self.inner is not None
        waiting: int = self.inner.statistics().tasks_waiting_send
        return waiting > 0

    async def receive(self) -> Any:
        assert self.inner is not None
        item = await self.inner.receive()
        if not self._going.is_set():
            self.holding += 1
            await self._going.wait()
        return item

    def __aiter__(self) -> HeldReads:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        assert self.inner is not None
        await self.inner.aclose()

    async def __aenter__(self) -> HeldReads:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()


@asynccontextmanager
async def held_client(url: str, state: Path, log: Path, reads: HeldReads) -> AsyncIterator[Client]:
    """The official client over a real server for `LEAD`, its reads through `reads`, once
    the server's start-up sweep is done (R-N6)."""
    params = server_params(url, state, "--caller", LEAD, "--verbose", "--log-format", "json")

    @asynccontextmanager
    async def transport() -> AsyncIterator[tuple[Any, Any]]:
        with log.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                reads.inner = read
                yield reads, write

    async with Client(transport(), mode="legacy") as client:
        await logged(log, "notices_swept")
        yield client


async def ping(client: Client) -> None:
    with warnings.catch_warnings():  # the 2025 protocol's ping, removed by 2026's
        warnings.simplefilter("ignore")
        answered = client.send_ping()
    await answered


async def drain_held(
    client: Client, reads: HeldReads, log: Path, tasks: anyio.abc.TaskGroup
) -> anyio.CancelScope:
    """Start a drain whose answer the server has read, not written: held in its write. The
    drain's scope, to cancel it."""
    reads.hold()
    tasks.start_soon(ping, client)  # its answer waits in `reads`
    await until(lambda: reads.holding == 1)
    tasks.start_soon(ping, client)  # its answer waits in the client's reader
    await until(reads.reader_blocked)
    scope = anyio.CancelScope()

    async def drain() -> None:
        with scope:
            await call(client, "session_notices", {"drain": True})

    tasks.start_soon(drain)
    await logged(log, "tool_completed", tool="session_notices")
    return scope


def scenario(
    url: str, tmp_path: Path, test: Callable[[Client, HeldReads, Path], Awaitable[None]]
) -> Path:
    """Run `test` with a client of a real server; the server's log."""
    log, reads = tmp_path / "server.log", HeldReads()

    async def run() -> None:
        async with held_client(url, tmp_path / "state", log, reads) as client:
            await test(client, reads, log)

    anyio.run(run)
    return log


class TestADeliveredDrain:
    def test_a_drain_answered_is_acknowledged_and_the_next_call_shows_nothing(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """R-N8, R-N3: the drain's answer holds the notices; once it is written the server
        acknowledges them (`mcp_notices_acknowledged`), before it reads for the next call,
        so a drain right after shows none, and the store has none pending."""
        expected = seed_notices(database_url, LEAD, watched_targets(3))

        async def test(client: Client, _: HeldReads, log: Path) -> None:
            drained, failed, _ = await call(client, "session_notices", {"drain": True})
            assert (failed, drained["notices"], drained["drained"]) == (False, expected, True)
            again, _, _ = await call(client, "session_notices", {"drain": True})
            assert again["notices"] == []
            done = [e for e in events(log) if e["event"] == "mcp_notices_acknowledged"]
            assert [(e["handed"], e["acknowledged"]) for e in done] == [(3, 3)]

        scenario(database_url, tmp_path, test)
        assert pending(database_url) == []


class TestAnUndeliveredDrain:
    def test_a_drain_cancelled_before_its_answer_is_written_acknowledges_nothing(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """R-N8, R-N4: the server has read the notices and is writing the answer when the
        client cancels the request (`notifications/cancelled`, as a tool timeout or Esc
        does): nothing is acknowledged, even once the answer's bytes go out, and the server
        says why (`mcp_notices_unacknowledged`, `cancelled`); every notice is still pending."""
        expected = seed_notices(database_url, LEAD, long_targets())

        async def test(client: Client, reads: HeldReads, log: Path) -> None:
            async with anyio.create_task_group() as tasks:
                drain = await drain_held(client, reads, log, tasks)
                assert pending(database_url) == expected  # read, not acknowledged
                drain.cancel()
                unacknowledged = await logged(log, "mcp_notices_unacknowledged")
                assert unacknowledged["reason"] == "cancelled"
                assert unacknowledged["notices"] == len(expected)
                reads.go_on()
            shown, _, _ = await call(client, "session_notices")  # after the answer is out
            assert shown["notices"] == expected

        log = scenario(database_url, tmp_path, test)
        assert pending(database_url) == expected
        assert not [e for e in events(log) if e["event"] == "mcp_notices_acknowledged"]

    def test_a_server_stopped_with_the_answer_unwritten_acknowledges_nothing(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """R-N8, R-M2: SIGTERM while the drain's answer is held in its write: the server
        stops (`mcp_server_stopped`) without waiting for a client that does not read, says
        the notices were not acknowledged (`stopped`), and all stay pending."""
        expected = seed_notices(database_url, LEAD, long_targets())

        async def test(client: Client, reads: HeldReads, log: Path) -> None:
            async with anyio.create_task_group() as tasks:
                await drain_held(client, reads, log, tasks)
                assert pending(database_url) == expected
                os.kill(server_pid(), signal.SIGTERM)
                await logged(log, "mcp_server_stopped", reason="SIGTERM")
                tasks.cancel_scope.cancel()
            reads.go_on()

        log = scenario(database_url, tmp_path, test)
        unacknowledged = [e for e in events(log) if e["event"] == "mcp_notices_unacknowledged"]
        assert [e["reason"] for e in unacknowledged] == ["stopped"]
        assert pending(database_url) == expected

    def test_a_notice_opened_between_the_read_and_the_write_stays_pending(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """R-N8, R-N3: while the answer is held, another actor opens a notice on a new
        target and changes a target already handed over. Once the answer is out, exactly
        the notices it showed are acknowledged: the new notice stays pending, and the
        changed target, acknowledged up to what was shown, opens a fresh notice for the
        change after (`changesSince 1`)."""
        targets = long_targets()
        expected = seed_notices(database_url, LEAD, targets)
        newcomer = "agent:claude:newcomer"

        async def test(client: Client, reads: HeldReads, log: Path) -> None:
            async with anyio.create_task_group() as tasks:
                await drain_held(client, reads, log, tasks)
                assert pending(database_url) == expected
                with open_service(database_url) as other:
                    other.open_session(newcomer)
                    assert other.watch(LEAD, newcomer)
                    assert other.record_human_direct_message(newcomer, channel="slack")
                    assert other.record_human_direct_message(targets[0], channel="slack")
                reads.go_on()
            await logged(log, "mcp_notices_acknowledged")
            shown, _, _ = await call(client, "session_notices")
            assert sorted(shown["notices"]) == sorted([notice(newcomer, 0), notice(targets[0], 1)])

        scenario(database_url, tmp_path, test)


def notice(target: str, since: int) -> str:
    """A notice's text (R-N1)."""
    return (
        f'Session "{target}" changed (other actor). Reconcile before acting: '
        f'session_status sessionKey "{target}" changesSince {since}.'
    )


class TestDeliveries:
    """What waits on an answer, as the wire sees the messages (`mcp_stdio.Deliveries`)."""

    @staticmethod
    def settled() -> tuple[list[str], Deliveries]:
        outcomes: list[str] = []
        deliveries = Deliveries()
        deliveries.expect(7, lambda: outcomes.append("delivered"), outcomes.append)
        return outcomes, deliveries

    def test_an_answer_written_is_delivered_once_and_a_later_cancellation_changes_nothing(
        self,
    ) -> None:
        """R-N8: the result's line out, what waits on it runs once; a cancellation read
        after that finds nothing waiting."""
        outcomes, deliveries = self.settled()
        deliveries.written(types.JSONRPCResponse(jsonrpc="2.0", id=7, result={}))
        deliveries.read(cancelled("7"))
        deliveries.close()
        assert outcomes == ["delivered"]

    def test_a_cancellation_read_while_the_handler_still_ran_is_remembered(self) -> None:
        """R-N8: a cancellation read before the answer was expected (the tool still reading)
        settles it as cancelled when it is expected, and its answer then acknowledges
        nothing, should the SDK still write it."""
        outcomes: list[str] = []
        deliveries = Deliveries()
        deliveries.read(cancelled(7))
        deliveries.expect(7, lambda: outcomes.append("delivered"), outcomes.append)
        deliveries.written(types.JSONRPCResponse(jsonrpc="2.0", id=7, result={}))
        assert outcomes == ["cancelled"]

    def test_an_error_answer_or_a_stop_delivers_nothing(self) -> None:
        """R-N8: an error in place of the result, or a wire closed first, is undelivered."""
        outcomes, deliveries = self.settled()
        error = types.ErrorData(code=-32603, message="failed")
        deliveries.written(types.JSONRPCError(jsonrpc="2.0", id=7, error=error))
        assert outcomes == ["answered_with_error"]
        outcomes, deliveries = self.settled()
        deliveries.close()
        assert outcomes == ["stopped"]

    def test_two_requests_of_one_id_under_way_deliver_neither(self) -> None:
        """R-N8: a second request of an id whose answer is still awaited makes both answers
        indistinguishable: neither is delivered, and nothing waits on them any more."""
        outcomes, deliveries = self.settled()
        deliveries.expect(7, lambda: outcomes.append("delivered"), outcomes.append)
        deliveries.written(types.JSONRPCResponse(jsonrpc="2.0", id=7, result={}))
        assert outcomes == ["duplicate_request_id", "duplicate_request_id"]


class TestAcknowledgements:
    """The server's side of an answer's acknowledgement (`mcp_server.Acknowledgements`), on a
    real store."""

    @staticmethod
    def handed_over(tmp_path: Path) -> tuple[SessionAwareness, Any]:
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        seed_notices(url, LEAD, watched_targets(2))
        svc = open_service(url)
        return svc, (LEAD, svc.hand_over_notices(LEAD))

    def test_a_read_waits_from_the_answers_expectation_until_its_acknowledgement(
        self, tmp_path: Path
    ) -> None:
        """R-N8: a read of the caller's notices waits for an answer expected and not yet
        out, then for its acknowledgement: the client may send its next call the moment it
        reads the answer, before the server's writer has heard that the write ended, and
        that call must not show the same notices again."""
        svc, handed = self.handed_over(tmp_path)

        async def scenario() -> None:
            deliveries = Deliveries()
            acks = Acknowledgements(svc, deliveries)
            read = anyio.Event()

            async def next_read() -> None:
                await acks.settled()
                read.set()

            async with anyio.create_task_group() as tasks:
                acks.tasks = tasks
                acks.expect(7, handed)
                tasks.start_soon(next_read)
                await anyio.wait_all_tasks_blocked()
                assert not read.is_set()  # the answer is not out yet
                deliveries.written(types.JSONRPCResponse(jsonrpc="2.0", id=7, result={}))
                with anyio.fail_after(DEADLINE):
                    await read.wait()
                assert svc.pending_notices(LEAD) == []

        try:
            anyio.run(scenario)
        finally:
            svc.close()

    def test_an_undelivered_answer_lets_the_read_go_and_acknowledges_nothing(
        self, tmp_path: Path
    ) -> None:
        """R-N8: an answer cancelled, or of an id used twice, settles at once: the next read
        goes on, and every notice is still pending."""
        svc, handed = self.handed_over(tmp_path)

        async def scenario() -> None:
            deliveries = Deliveries()
            acks = Acknowledgements(svc, deliveries)
            async with anyio.create_task_group() as tasks:
                acks.tasks = tasks
                acks.expect(7, handed)
                deliveries.read(cancelled(7))
                acks.expect(8, handed)
                acks.expect(8, handed)
                with anyio.fail_after(DEADLINE):
                    await acks.settled()

        try:
            anyio.run(scenario)
            assert svc.pending_notices(LEAD) == list(handed[1].notices)
        finally:
            svc.close()


def cancelled(request_id: int | str) -> types.JSONRPCNotification:
    return types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/cancelled", params={"requestId": request_id}
    )
