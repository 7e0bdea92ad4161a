"""`session-awareness mcp`: the session tools over the Model Context Protocol (stdio).

One server process serves one caller: `--caller KEY`, or under Claude Code the session that
started it (`infrastructure/claude_state.py`), resolved on every call. Built on the official
SDK's low-level `Server`: the tools are listed with the exported JSON Schemas as their
`inputSchema`, and a tool call answers with the JSON of `svc.tools.call`, as text and as
structured content, flagged `isError` for a typed error.

Notices are also the resource `session-awareness://notices`. When a notice opens for the caller
its subscribers are told (`notifications/resources/updated` after `resources/subscribe`, or a
`subscriptions/listen` stream on the 2026 protocol): at once through the service's waker for
notices opened here and, on PostgreSQL, by other processes (their NOTIFY, R-N7); and, for the
notices no wake announces, by reading the caller's pending notices every `poll_seconds`:
ambient notices (R-W7), which wake no one on either backend, and on SQLite, which has no
cross-process wake, every notice another process opens. Whatever path reports it, a notice is
announced once: only a notice text not seen pending before is news (R-M3).

`session_notices` with `drain: true` hands the notices over: they are read, answered, and
acknowledged only once the answer is written to stdout (`Acknowledgements`, R-N8); a request
cancelled before then, an answer that fails or never goes out, acknowledges nothing
(`mcp_notices_unacknowledged`). The wire is `mcp_stdio`'s: fd 1 points at stderr while it
serves, and the service's logs go to stderr or nowhere, so stdout carries protocol traffic
only (R-M1, R-M2).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.lowlevel
import mcp_types as types
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError

from session_awareness import __version__
from session_awareness.configuration import store_identity
from session_awareness.infrastructure.mcp_handshake import INSTRUCTIONS, SERVER_NAME
from session_awareness.infrastructure.mcp_stdio import Deliveries, stdio_transport
from session_awareness.infrastructure.mcp_tools import NOTICES_TOOL, McpSurface
from session_awareness.logs import get_logger

if TYPE_CHECKING:
    from session_awareness.application import SessionAwareness
    from session_awareness.application.watching import Handover
    from session_awareness.infrastructure.mcp_tools import Handed

log = get_logger()

NOTICES_URI = "session-awareness://notices"
#: `serve_stdio`'s answer when the client ended the session (else the signal's name).
STDIN_CLOSED = "stdin_closed"
RESOURCE_NOT_FOUND = -32002


class WithoutAnswerTo:
    """The SDK's write stream, less its answer to the request `answered`: an `initialize`
    answered before the SDK was loaded (`mcp_handshake`), which the SDK is handed again so
    that its session is initialized. The answer dropped is logged at DEBUG."""

    def __init__(self, stream: Any, answered: int | str | None) -> None:
        self.stream, self.answered = stream, answered

    async def send(self, item: Any, /) -> None:
        message = getattr(item, "message", None)
        if (
            self.answered is not None
            and isinstance(message, types.JSONRPCResponse | types.JSONRPCError)
            and message.id == self.answered
        ):
            self.answered = None
            if isinstance(message, types.JSONRPCError):  # the SDK refused what was answered
                log.warning("mcp_initialize_refused", error=message.error.message)
            return
        await self.stream.send(item)

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def __aenter__(self) -> WithoutAnswerTo:
        await self.stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self.stream.__aexit__(*exc)  # type: ignore[no-any-return]


class WakeRelay:
    """The service's waker, handed to `open_service` before the event loop runs; wakes
    arriving on any thread are passed to the loop, those before it is attached are dropped
    (the feed's first read covers them)."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kick: asyncio.Event | None = None
        self.watcher: str | None = None

    def attach(self, loop: asyncio.AbstractEventLoop, kick: asyncio.Event) -> None:
        self._loop, self._kick = loop, kick

    def __call__(self, watcher: str) -> None:
        loop, kick = self._loop, self._kick
        if loop is None or kick is None or (self.watcher is not None and watcher != self.watcher):
            return
        with suppress(RuntimeError):  # the loop has closed: the server is going away
            loop.call_soon_threadsafe(kick.set)


class NoticeFeed:
    """Tells the notices resource's subscribers when a new notice is pending for the caller."""

    def __init__(
        self, surface: McpSurface, relay: WakeRelay, *, poll_seconds: float | None
    ) -> None:
        self.surface, self.relay, self.poll_seconds = surface, relay, poll_seconds
        self.bus = InMemorySubscriptionBus()
        self.subscriber: ServerSession | None = None  # stdio: one connection
        self._seen: tuple[str | None, frozenset[str]] = (None, frozenset())

    async def run(self) -> None:
        kick = asyncio.Event()
        self.relay.attach(asyncio.get_running_loop(), kick)
        self._seen = await self._read()
        while True:
            with anyio.move_on_after(self.poll_seconds if self.poll_seconds else float("inf")):
                await kick.wait()
            kick.clear()
            await self.check()

    async def check(self) -> None:
        caller, texts = await self._read()
        before_caller, before = self._seen
        self._seen = (caller, texts)
        fresh = texts - before if caller == before_caller else texts
        if caller is None or not fresh:
            return
        log.info("notices_resource_updated", caller=caller, fresh=len(fresh))
        await self.bus.publish(ResourceUpdated(uri=NOTICES_URI))
        if self.subscriber is not None:
            try:
                await self.subscriber.send_resource_updated(NOTICES_URI)
            except Exception as error:  # noqa: BLE001 -- a gone client must not stop the feed
                log.warning("notices_update_failed", error=repr(error))
                self.subscriber = None

    async def _read(self) -> tuple[str | None, frozenset[str]]:
        caller, texts = await anyio.to_thread.run_sync(self.surface.pending)
        self.relay.watcher = caller
        return caller, frozenset(texts)


class Acknowledgements:
    """Notices a `session_notices` answer hands over, acknowledged once that answer is out
    (R-N8): `expect` them before the answer is sent; `deliveries` then says it was written
    (the acknowledgement commits on a worker thread, the stop waiting for it) or why it was
    not (`mcp_notices_unacknowledged`: they stay pending). A read of the caller's notices
    waits for every answer expected and not yet settled (`settled`): from `expect` until its
    acknowledgement commits or it is known undelivered. So an answer out is never shown
    again by the next call, even one the client sends the moment it reads the answer, before
    the server's writer has heard that the write ended."""

    def __init__(self, svc: SessionAwareness, deliveries: Deliveries) -> None:
        self.svc, self.deliveries = svc, deliveries
        self.tasks: anyio.abc.TaskGroup | None = None
        self._under_way = 0
        self._settled = anyio.Event()
        self._settled.set()

    def expect(self, request_id: int | str, handed: Handed) -> None:
        if not self._under_way:
            self._settled = anyio.Event()
        self._under_way += 1  # until acknowledged or undelivered (`_settle`)
        self.deliveries.expect(
            request_id,
            partial(self._delivered, handed),
            partial(self._undelivered, handed, request_id),
        )

    def withdraw(self, request_id: int | str, reason: str) -> None:
        self.deliveries.withdraw(request_id, reason)

    async def settled(self) -> None:
        while self._under_way:
            await self._settled.wait()

    def _delivered(self, handed: Handed) -> None:
        if self.tasks is None:  # the server has stopped: nothing more is acknowledged
            self._undelivered(handed, None, "stopped")
            return
        self.tasks.start_soon(self._acknowledge, handed)

    async def _acknowledge(self, handed: Handed) -> None:
        watcher, handover = handed
        try:
            with anyio.CancelScope(shield=True):  # an answer out is acknowledged, stop or not
                acknowledge = partial(self.svc.acknowledge_handed, watcher, handover)
                done = await anyio.to_thread.run_sync(acknowledge)
            log.info("mcp_notices_acknowledged", watcher=watcher, handed=len(handover.notices),
                     acknowledged=len(done))  # fmt: skip
        except Exception as error:  # noqa: BLE001 -- still pending: shown again, never lost
            log.warning("mcp_notices_unacknowledged", watcher=watcher,
                        notices=len(handover.notices), reason="acknowledge_failed",
                        error=repr(error))  # fmt: skip
        finally:
            self._settle()

    def _undelivered(self, handed: Handed, request_id: int | str | None, reason: str) -> None:
        watcher, handover = handed
        log.warning("mcp_notices_unacknowledged", watcher=watcher, request_id=request_id,
                    notices=len(handover.notices), reason=reason)  # fmt: skip
        self._settle()

    def _settle(self) -> None:
        self._under_way -= 1
        if not self._under_way:
            self._settled.set()


def build_server(surface: McpSurface, feed: NoticeFeed, acks: Acknowledgements) -> Server[Any]:
    """The low-level SDK server with the tools and the notices resource."""
    listed = [
        types.Tool(name=s["name"], description=s["description"], input_schema=s["inputSchema"])
        for s in _schemas(surface)
    ]

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == NOTICES_TOOL:
            await acks.settled()
        with anyio.CancelScope(shield=True):  # what was handed over is known, cancelled or not
            result, handed = await anyio.to_thread.run_sync(
                partial(surface.answer, params.name, params.arguments)
            )
        if handed is not None:
            acks.expect(ctx.request_id, handed)
        try:
            await anyio.lowlevel.checkpoint_if_cancelled()  # cancelled meanwhile: no answer
        except anyio.get_cancelled_exc_class():
            if handed is not None:
                acks.withdraw(ctx.request_id, "cancelled")
            raise
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
            structured_content=result,
            is_error="error" in result,
        )

    async def list_resources(_ctx: Any, _params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    name="notices",
                    uri=NOTICES_URI,
                    description="Your pending notices (read-only; drain with session_notices).",
                    mime_type="application/json",
                )
            ]
        )

    async def read_resource(
        _ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        _known(str(params.uri))
        await acks.settled()
        caller, texts = await anyio.to_thread.run_sync(surface.pending)
        body = {"sessionKey": caller, "notices": texts}
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=NOTICES_URI, mime_type="application/json", text=json.dumps(body)
                )
            ]
        )

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        _known(str(params.uri))
        feed.subscriber = ctx.session
        return types.EmptyResult()

    async def unsubscribe(_ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        _known(str(params.uri))
        feed.subscriber = None
        return types.EmptyResult()

    return Server(
        SERVER_NAME,
        version=__version__,  # serverInfo.version; the SDK reports "" when not told
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_subscriptions_listen=ListenHandler(feed.bus),
    )


def _schemas(surface: McpSurface) -> list[dict[str, Any]]:
    from session_awareness.infrastructure.mcp_tools import mcp_tool_schemas  # noqa: PLC0415

    return mcp_tool_schemas(surface.tools)


def _known(uri: str) -> None:
    if uri != NOTICES_URI:
        raise MCPError(RESOURCE_NOT_FOUND, f"Unknown resource: {uri}")


async def serve_stdio(
    surface: McpSurface,
    relay: WakeRelay,
    *,
    poll_seconds: float | None,
    hook_socket: Path | None = None,
    database_url: str | None = None,
    early: tuple[bytes, int | str | None] = (b"", None),
) -> str:
    """Serve until the client closes stdin or the process gets SIGINT or SIGTERM (Claude Code
    sends SIGINT at every session end and waits), then return at once, so the caller closes
    the store: why it stopped, `STDIN_CLOSED` or the signal's name. With `hook_socket`,
    also take this Claude Code process's hook signals there (`infrastructure/claude_relay.py`).
    `early` is what was read off the wire before, and the id of the `initialize` request
    already answered in it, if any (`mcp_handshake`).
    """
    read_before, answered = early
    feed = NoticeFeed(surface, relay, poll_seconds=poll_seconds)
    stopped = STDIN_CLOSED
    async with stdio_transport(read_before=read_before) as wire:
        acks = Acknowledgements(surface.svc, wire.deliveries)
        server = build_server(surface, feed, acks)
        read, write = wire.read, WithoutAnswerTo(wire.write, answered)
        try:
            async with anyio.create_task_group() as tasks:
                acks.tasks = tasks
                tasks.start_soon(feed.run)
                if hook_socket is not None:
                    tasks.start_soon(partial(serve_hooks, surface, hook_socket, database_url))
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async with anyio.create_task_group() as serving:

                        async def until_signal() -> None:
                            nonlocal stopped
                            async for number in signals:
                                stopped = signal.Signals(number).name
                                wire.abandon()  # a write a client holds up holds no stop
                                serving.cancel_scope.cancel()

                        serving.start_soon(until_signal)
                        await server.run(read, write, server.create_initialization_options())
                        serving.cancel_scope.cancel()
                tasks.cancel_scope.cancel()
        finally:
            acks.tasks = None  # an answer written from now on is not acknowledged here
    log.info("mcp_server_stopped", reason=stopped)
    return stopped


#: How long the server waits for a hook's confirmation that it printed the notices handed
#: over (a hook prints at once; Claude Code's own hook timeout is a minute).
CONFIRM_TIMEOUT = 60.0


class OtherStore(ValueError):
    """A hook of this server's session names another store than the server's."""


def same_store(hook: object, server: str | None) -> bool:
    """Whether the hook's URL names the server's store: the same URL, or two spellings of
    one store (`store_identity`: a SQLite file's real path; a server's user, host, port,
    database and schema)."""
    if hook == server:
        return True
    if not isinstance(hook, str) or server is None:
        return False
    try:
        mine = store_identity(server)
        return mine is not None and store_identity(hook) == mine
    except ValueError:  # a URL that names no store the service can use
        return False


class HookRelay:
    """The server's side of the hook relay. A prompt's hook is answered with its session's
    pending notices, read, not acknowledged, and a token; they are acknowledged when the
    hook confirms with that token, after printing them, and not otherwise (R-N8): a hook
    that timed out, broke or died leaves them pending (`hook_relay_unconfirmed`), for the
    next hook run to show. A hook that does not ask for a hand-over (an older one) gets its
    notices drained, as before."""

    def __init__(self, surface: McpSurface, database_url: str | None) -> None:
        self.svc, self.database_url = surface.svc, database_url

    async def handle(self, stream: anyio.abc.SocketStream) -> None:
        """One hook run's connection: its signal, the answer, then its confirmation."""
        async with stream:
            received = BufferedByteReceiveStream(stream)
            handed: tuple[str, Handover, str] | None = None
            try:
                reply, handed = await self._answer(await received.receive_until(b"\n", 1 << 16))
            except OtherStore as error:  # the hook records in-process, and tells its user
                log.warning("hook_relay_other_store", error=str(error))
                reply = {"error": str(error), "otherStore": True}
            except Exception as error:  # noqa: BLE001 -- the hook then records in-process
                log.warning("hook_relay_failed", error=repr(error))
                reply = {"error": str(error)}
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await stream.send(json.dumps(reply).encode() + b"\n")
            if handed is not None:
                await self._confirmed(stream, received, *handed)

    async def _answer(self, line: bytes) -> tuple[dict[str, Any], tuple[str, Handover, str] | None]:
        """Record the request's signal: the answer, and for notices handed over, the
        session, the hand-over and its token."""
        from session_awareness.infrastructure.claude_hooks import (  # noqa: PLC0415
            Signal,
            apply,
            hand_over,
            valid_agent,
        )

        request = json.loads(line)
        if not same_store(request.get("databaseUrl"), self.database_url):
            raise OtherStore("the hook names another store than this server's")
        agent = request.get("agent")
        if not isinstance(agent, str) or not valid_agent(agent):
            raise ValueError("agent is not an agent id")
        signal = Signal.from_json(request.get("signal"))
        if request.get("handover") is not True:  # an older hook, which never confirms
            notices = await anyio.to_thread.run_sync(partial(apply, self.svc, signal, agent=agent))
            self._check_recorded()
            return {"notices": notices}, None
        handed = await anyio.to_thread.run_sync(partial(hand_over, self.svc, signal, agent=agent))
        if handed is None or not handed[1].notices:
            return {"notices": []}, None
        key, handover = handed
        token = secrets.token_hex(16)
        return {"notices": list(handover.notices), "token": token}, (key, handover, token)

    def _check_recorded(self) -> None:
        if self.svc.kept_signals:
            raise RuntimeError("the store failed while recording")

    async def _confirmed(
        self,
        stream: anyio.abc.SocketStream,
        received: BufferedByteReceiveStream,
        key: str,
        handover: Handover,
        token: str,
    ) -> None:
        """Acknowledge the notices handed over once the hook confirms it printed them."""
        try:
            with anyio.fail_after(CONFIRM_TIMEOUT):
                line = await received.receive_until(b"\n", 1 << 10)
            if json.loads(line) != {"confirm": token}:
                raise ValueError("not the confirmation of this answer")
        except Exception as error:  # noqa: BLE001 -- whatever failed, nothing was confirmed
            log.warning("hook_relay_unconfirmed", watcher=key, notices=len(handover.notices),
                        error=repr(error))  # fmt: skip
            return
        try:
            done = await anyio.to_thread.run_sync(self.svc.acknowledge_handed, key, handover)
        except Exception as error:  # noqa: BLE001 -- still pending: shown again, never lost
            log.warning("hook_relay_acknowledge_failed", watcher=key, error=repr(error))
            return
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await stream.send(json.dumps({"acknowledged": len(done)}).encode() + b"\n")


async def serve_hooks(surface: McpSurface, path: Path, database_url: str | None) -> None:
    """Record the signals hook runs relay here (`HookRelay`)."""
    relay = HookRelay(surface, database_url)

    # The socket is bound and listening under a private name, then renamed into place: the
    # path a hook connects to exists only once it accepts (bind and listen are two steps).
    staging = path.with_name(f"{path.stem}.{os.getpid()}.new")
    listener: anyio.abc.SocketListener | None = None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.parent.chmod(0o700)
        listener = await anyio.create_unix_listener(staging)
        staging.replace(path)
    except OSError as error:
        staging.unlink(missing_ok=True)
        if listener is not None:
            await listener.aclose()
        log.warning("hook_relay_unavailable", path=str(path), error=repr(error))
        return
    try:
        await listener.serve(relay.handle)
    finally:
        path.unlink(missing_ok=True)
