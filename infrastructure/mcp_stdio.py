"""The MCP server's wire: every request that carries an id is answered, reading stops the
moment the server does, and the server learns when an answer is out.

The official SDK's `stdio_server` (mcp 2.3.0) turns a line it cannot parse or validate into
an exception on the read stream, and its server drops those (a DEBUG line): a `tools/call`
holding a lone surrogate, whose `params` is a string, or nested past the parser's depth got
no answer, and the client waited forever. It also reads stdin in a worker thread that
cannot be cancelled, so a server told to stop (SIGINT, SIGTERM) waited for the next line.
So the server reads stdin here: lines are read without a thread (readiness, then
`os.read`), each is checked with the SDK's own message parser, and a line it refuses is
answered here (`answers_for`) and never reaches the SDK.

It writes stdout here too (`StdoutLines`), one message a line, as the SDK's writer does,
because the SDK's write stream cannot tell when a message is out: a send returns once its
writer has taken the message, before it is written. Here a message's bytes are in the pipe
before the next is taken, so `Deliveries` runs what waits on an answer (R-N8: acknowledging
the notices it hands over) only once it is written, and only if no `notifications/cancelled`
for its request was read before; otherwise it says why not. A write blocked by a client
that stopped reading is abandoned when the server is told to stop (R-M2). Like the SDK, the
wire is moved off fd 0 and fd 1 while serving (fd 0 reads the null device, fd 1 writes to
stderr), so nothing else in the process reads or writes protocol traffic.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import SessionMessage

from session_awareness.infrastructure.mcp_refusals import ID_SCAN, answers_for
from session_awareness.logs import get_logger

log = get_logger()

#: A line longer than this is not read into memory: it is skipped up to its end and refused.
MAX_LINE = 8 << 20
CHUNK = 1 << 16


class StdinLines:
    """The messages of the wire (`async for message`): the lines the SDK's parser accepts;
    every other is answered through `write` (when it carries an id, or cannot tell one) and
    left out."""

    def __init__(self, fd: int | None, max_line: int = MAX_LINE, read: bytes = b"") -> None:
        self.fd, self.max_line = fd, max_line
        self.write: Any = None  # the SDK's write stream, set once the transport is up
        self._buffer = bytearray(read)  # what was read off the wire before (mcp_handshake)
        self._eof = fd is None
        self._stopped = False
        self._scope: anyio.CancelScope | None = None

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> SessionMessage:
        with anyio.CancelScope() as self._scope:
            while not self._stopped:
                line = await self._line()
                if line is None:
                    raise StopAsyncIteration
                if isinstance(line, bytes):
                    text = line.decode("utf-8", errors="replace")  # as the SDK decodes it
                    if not text.strip():
                        continue  # a blank line is no message
                    try:
                        message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
                    except Exception as error:  # noqa: BLE001 -- what the SDK's reader catches
                        await self._refuse(answers_for(text, error))
                        continue
                    return SessionMessage(message)
                await self._refuse(line)
        raise StopAsyncIteration  # stopped, or while waiting for a line

    def stop(self) -> None:
        """End the iteration now, even while waiting for input."""
        self._stopped = True
        if self._scope is not None:
            self._scope.cancel()

    async def _refuse(self, answers: list[types.JSONRPCError]) -> None:
        for answer in answers if self.write is not None else ():
            try:
                await self.write.send(SessionMessage(answer))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._stopped = True  # the server has gone: nothing more is read
                return

    async def _line(self) -> bytes | list[types.JSONRPCError] | None:
        """The next line (without its end), a refusal of one too long, or None at the end."""
        skipping: bytes | None = None  # the head of a line too long, while it is skipped
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end]).removesuffix(b"\r")
                del self._buffer[: end + 1]
                if skipping is None and end <= self.max_line:
                    return line
                head = line[:ID_SCAN] if skipping is None else skipping
                return answers_for(head.decode("utf-8", "replace"), None, too_long=True)
            if len(self._buffer) > self.max_line:
                if skipping is None:
                    skipping = bytes(self._buffer[:ID_SCAN])
                self._buffer.clear()
            if self._eof:
                rest, self._buffer = bytes(self._buffer), bytearray()
                if skipping is not None:
                    return answers_for(skipping.decode("utf-8", "replace"), None, too_long=True)
                return rest or None
            chunk = await self._read()
            self._eof = not chunk
            self._buffer += chunk

    async def _read(self) -> bytes:
        assert self.fd is not None  # noqa: S101 -- only read before the end
        with suppress(OSError):  # a regular file or the null device: reading never waits
            await anyio.wait_readable(self.fd)
        try:
            return os.read(self.fd, CHUNK)
        except OSError as error:
            log.warning("mcp_stdin_failed", error=repr(error))
            return b""


@contextmanager
def claimed_stdin() -> Iterator[int | None]:
    """The wire on a private descriptor, fd 0 on the null device meanwhile; None when the
    process has no stdin."""
    with _claimed(0, lambda: os.open(os.devnull, os.O_RDONLY)) as wire:
        yield wire


@contextmanager
def claimed_stdout() -> Iterator[int | None]:
    """The wire's write side on a private descriptor, fd 1 writing to stderr meanwhile (so
    stray output misses the wire); None when the process has no stdout."""
    with _claimed(1, _stderr_or_null) as wire:
        yield wire


def _stderr_or_null() -> int:
    try:
        return os.dup(2)
    except OSError:
        return os.open(os.devnull, os.O_WRONLY)


@contextmanager
def _claimed(fd: int, stand_in: Callable[[], int]) -> Iterator[int | None]:
    """`fd` moved to a private descriptor (yielded; None when the process has no `fd`), and
    `stand_in()`'s descriptor in its place until the block ends; then `fd` is the wire again."""
    try:
        wire = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        yield None
        return
    replacement = stand_in()
    try:
        os.dup2(replacement, fd)
    finally:
        os.close(replacement)
    try:
        yield wire
    finally:
        os.dup2(wire, fd)
        os.close(wire)


Undelivered = Callable[[str], None]


#: How many cancelled requests are remembered for an answer not yet expected (a handler
#: still running when its cancellation was read).
CANCELLED_KEPT = 1024


class Deliveries:
    """What waits on the answer to a request: `expect(id, delivered, undelivered)` before the
    answer is sent; then exactly one of the two runs, on the event loop: `delivered()` once
    the request's result is written whole, or `undelivered(reason)`: `cancelled` (the client
    cancelled the request before its answer was out, even before it was expected),
    `answered_with_error`, `not_written` (stdout failed), `stopped` (the server stopped
    first), `duplicate_request_id` (two requests of one id under way: their answers cannot
    be told apart, so neither counts as delivered)."""

    def __init__(self) -> None:
        self._expected: dict[int | str, tuple[Callable[[], None], Undelivered]] = {}
        self._cancelled: dict[int | str, None] = {}  # oldest first, at most CANCELLED_KEPT

    def expect(
        self, request_id: int | str, delivered: Callable[[], None], undelivered: Undelivered
    ) -> None:
        key = coerce_request_id(request_id)
        if key in self._expected:
            self._settle(key, "duplicate_request_id")
            undelivered("duplicate_request_id")
            return
        self._expected[key] = (delivered, undelivered)
        if key in self._cancelled:
            self._settle(key, "cancelled")

    def withdraw(self, request_id: int | str, reason: str) -> None:
        """The answer will not be sent (its handler was cancelled): `undelivered(reason)`."""
        self._settle(request_id, reason)

    def read(self, message: Any) -> None:
        """A message read off the wire: a cancellation settles what waits on its request, or
        will wait on it."""
        if isinstance(message, types.JSONRPCNotification) and (
            message.method == "notifications/cancelled"
        ):
            request_id = cancelled_request_id_from_params(message.params)
            if request_id is not None:
                self._cancelled[coerce_request_id(request_id)] = None
                if len(self._cancelled) > CANCELLED_KEPT:
                    del self._cancelled[next(iter(self._cancelled))]
                self._settle(request_id, "cancelled")

    def written(self, message: Any) -> None:
        """A message is out on the wire: its request's result delivered, or answered
        otherwise."""
        if isinstance(message, types.JSONRPCResponse):
            self._settle(message.id, None)
        elif isinstance(message, types.JSONRPCError) and message.id is not None:
            self._settle(message.id, "answered_with_error")

    def not_written(self, message: Any) -> None:
        answer = isinstance(message, types.JSONRPCResponse | types.JSONRPCError)
        if answer and message.id is not None:
            self._settle(message.id, "not_written")

    def close(self) -> None:
        """The wire is done: whatever still waits was never delivered."""
        for request_id in list(self._expected):
            self._settle(request_id, "stopped")

    def _settle(self, request_id: int | str, reason: str | None) -> None:
        key = coerce_request_id(request_id)
        expected = self._expected.pop(key, None)
        if expected is None:
            return
        self._cancelled.pop(key, None)
        delivered, undelivered = expected
        if reason is None:
            delivered()
        else:
            undelivered(reason)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class StdoutLines:
    """The wire's write side: each message sent is written whole, as one line (the SDK's
    serialization), before the next is taken; `deliveries` hears of each once it is out."""

    def __init__(self, fd: int | None, deliveries: Deliveries, broken: Callable[[], None]) -> None:
        self.fd, self.deliveries, self.broken = fd, deliveries, broken

    async def run(self, messages: MemoryObjectReceiveStream[SessionMessage]) -> None:
        async with messages:
            async for item in messages:
                line = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                try:
                    if self.fd is None:
                        raise OSError("the process has no stdout")
                    # abandoned on a stop: a client that stopped reading holds no server
                    await anyio.to_thread.run_sync(
                        _write_all, self.fd, line.encode(), abandon_on_cancel=True
                    )
                except OSError as error:
                    log.warning("mcp_stdout_failed", error=repr(error))
                    self.deliveries.not_written(item.message)
                    self.broken()  # nothing more can be answered: the server ends
                    return
                self.deliveries.written(item.message)


async def _read_in(
    lines: StdinLines, messages: MemoryObjectSendStream[SessionMessage | Exception],
    deliveries: Deliveries,
) -> None:  # fmt: skip
    async with messages:
        try:
            async for message in lines:
                deliveries.read(message.message)
                await messages.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return  # the server stopped reading


class Wire:
    """The streams `Server.run` takes, what waits on answers (`deliveries`), and `abandon`:
    a stop that does not wait for a write under way."""

    def __init__(
        self,
        read: MemoryObjectReceiveStream[SessionMessage | Exception],
        write: MemoryObjectSendStream[SessionMessage],
        deliveries: Deliveries,
    ) -> None:
        self.read, self.write, self.deliveries = read, write, deliveries
        self.abandoned = False

    def abandon(self) -> None:
        self.abandoned = True


@asynccontextmanager
async def stdio_transport(
    max_line: int = MAX_LINE, read_before: bytes = b""
) -> AsyncIterator[Wire]:
    """The wire, stdin and stdout: its first bytes `read_before` (what was read off the wire
    before the server started)."""
    deliveries = Deliveries()
    with claimed_stdin() as fd_in, claimed_stdout() as fd_out:
        lines = StdinLines(fd_in, max_line, read_before)
        read_in, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write, write_out = anyio.create_memory_object_stream[SessionMessage](0)
        lines.write = write
        wire = Wire(read, write, deliveries)
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_read_in, lines, read_in, deliveries)
                tasks.start_soon(StdoutLines(fd_out, deliveries, lines.stop).run, write_out)
                try:
                    yield wire
                finally:
                    lines.stop()
                    write.close()  # the writer ends once what it holds is out
                    if wire.abandoned:
                        tasks.cancel_scope.cancel()
        finally:
            deliveries.close()
