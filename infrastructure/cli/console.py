"""`console`: serve the read-only operator console and its metrics (R-O1)."""

from __future__ import annotations

import os
import socket
import threading
from contextlib import closing
from types import FrameType

import click

from session_awareness.application.retention import Retention
from session_awareness.infrastructure.cli.common import open_store, store_options
from session_awareness.infrastructure.cli.exits import EXIT_BAD_INPUT, EXIT_OK

#: The environment variable the token may come from (the console's `guard` module names it
#: too; repeated here so `--help` needs none of the console's dependencies).
TOKEN_ENV = "SESSION_AWARENESS_CONSOLE_TOKEN"  # noqa: S105 -- a variable's name


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535),
              help="The port to listen on.")  # fmt: skip
@click.option("--token", metavar="T", help=f"Required on every request (default: ${TOKEN_ENV}); "
              "needed to listen beyond loopback.")  # fmt: skip
@store_options
def console(
    *, host: str, port: int, token: str | None, database_url: str | None, verbose: int
) -> int:
    """Serve a read-only operator console (session trees, cursors, timelines, health, live
    updates) and Prometheus metrics at /metrics; loopback only unless given a token."""
    try:
        import uvicorn  # noqa: PLC0415 -- the console extra

        from session_awareness.infrastructure.console import create_app  # noqa: PLC0415
        from session_awareness.infrastructure.console.guard import (  # noqa: PLC0415
            TokenRequiredError,
            require_token,
        )
    except ImportError as error:
        raise click.ClickException(
            f'the console needs its extra: pip install "session-awareness[console]" ({error})'
        ) from None
    token = token or os.environ.get(TOKEN_ENV) or None
    try:
        require_token(host, token)
    except TokenRequiredError as error:
        raise click.UsageError(str(error)) from None
    retention = Retention()
    stopping = threading.Event()
    with (
        closing(listening_socket(host, port)) as sock,
        open_store(database_url, verbose=verbose, retention=retention) as svc,
    ):
        app = create_app(svc, token=token, retention=retention, stopping=stopping)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning",
                                timeout_graceful_shutdown=5)  # fmt: skip
        server = uvicorn.Server(config)
        stop = server.handle_exit

        def handle_exit(sig: int, frame: FrameType | None) -> None:
            stopping.set()  # the live-update streams end, so the server stops at once
            stop(sig, frame)

        server.handle_exit = handle_exit  # type: ignore[method-assign]
        shown = f"[{host}]" if ":" in host else host
        port = sock.getsockname()[1]  # the one the system chose, for --port 0
        click.echo(f"console on http://{shown}:{port}/ (read-only; Ctrl-C stops it)", err=True)
        server.run(sockets=[sock])
    return EXIT_OK


def listening_socket(host: str, port: int) -> socket.socket:
    """The console's socket, bound here rather than by uvicorn, so an address in use or a
    host that does not resolve is one line and exit 2 before the console says where it
    listens (uvicorn logs it in its own format and exits 3)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as error:
        raise BadInput(f"cannot listen on {host} port {port}: {reason(error)}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        sock.bind(address)
    except OSError as error:
        sock.close()
        raise BadInput(f"cannot listen on {host} port {port}: {reason(error)}") from None
    return sock


def reason(error: OSError) -> str:
    return (error.strerror or str(error)).lower()


class BadInput(click.ClickException):
    """A listening address the console cannot take: bad input (exit 2), one line."""

    exit_code = EXIT_BAD_INPUT
