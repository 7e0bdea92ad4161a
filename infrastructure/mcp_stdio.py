"""The MCP server's stdin: every request that carries an id is answered, and reading stops
the moment the server does.

The official SDK's `stdio_server` (mcp 2.3.0) turns a line it cannot parse or validate into
an exception on the read stream, and its server drops those (a DEBUG line): a `tools/call`
holding a lone surrogate, whose `params` is a string, or nested past the parser's depth got
no answer, and the client waited forever. It also reads stdin in a worker thread that
cannot be cancelled, so a server told to stop (SIGINT, SIGTERM) waited for the next line.
So the server keeps the SDK's transport for stdout and feeds it stdin from here: lines are
read without a thread (readiness, then `os.read`), each is checked with the SDK's own
message parser first, and a line it refuses is answered here (`answers_for`) and never
reaches the SDK. Like the SDK, the wire is moved off fd 0 while serving (fd 0 reads the null
device), so nothing else in the process reads protocol traffic.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any, cast

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from session_awareness.infrastructure.mcp_refusals import ID_SCAN, answers_for
from session_awareness.logs import get_logger

log = get_logger()

#: A line longer than this is not read into memory: it is skipped up to its end and refused.
MAX_LINE = 8 << 20
CHUNK = 1 << 16


class StdinLines:
    """The lines of the wire, as the SDK's stdin reader iterates them (`async for line`):
    only those the SDK's parser accepts; every other is answered through `write` (when it
    carries an id, or cannot tell one) and left out."""

    def __init__(self, fd: int | None, max_line: int = MAX_LINE, read: bytes = b"") -> None:
        self.fd, self.max_line = fd, max_line
        self.write: Any = None  # the SDK's write stream, set once the transport is up
        self._buffer = bytearray(read)  # what was read off the wire before (mcp_handshake)
        self._eof = fd is None
        self._stopped = False
        self._scope: anyio.CancelScope | None = None

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
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
                        types.jsonrpc_message_adapter.validate_json(text, by_name=False)
                    except Exception as error:  # noqa: BLE001 -- what the SDK's reader catches
                        await self._refuse(answers_for(text, error))
                        continue
                    return text
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
    try:
        wire = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        yield None
        return
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield wire
    finally:
        os.dup2(wire, 0)
        os.close(wire)


@asynccontextmanager
async def stdio_transport(
    max_line: int = MAX_LINE, read_before: bytes = b""
) -> AsyncIterator[tuple[Any, Any]]:
    """The read and write streams `Server.run` takes: stdout is the SDK's, stdin ours, its
    first bytes `read_before` (what was read off the wire before the server started)."""
    with claimed_stdin() as fd:
        lines = StdinLines(fd, max_line, read_before)
        async with stdio_server(stdin=cast(Any, lines)) as (read, write):
            lines.write = write
            try:
                yield read, write
            finally:
                lines.stop()
