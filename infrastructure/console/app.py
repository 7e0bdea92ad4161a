"""The console's web application: routes, templates and live updates (R-O1).

Pages are rendered by the server (Jinja2, every value escaped) and carry one small inline
script, allowed by a per-request nonce: it listens to `/events` (server-sent events) and,
when the store moves, fetches the page again and swaps its content in. `/events` polls the
event store's head (the newest notification id) every `poll_seconds`, on SQLite and
PostgreSQL alike, so a signal any process records shows within a second.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlencode

import anyio
import anyio.to_thread
from jinja2 import Environment, PackageLoader, StrictUndefined
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Route

from session_awareness.application import SessionAwareness
from session_awareness.application.errors import (
    InvalidArgumentError,
    SessionAwarenessError,
    StoreUnavailableError,
    UnknownSessionError,
)
from session_awareness.application.retention import Retention
from session_awareness.domain.session import SESSION_KINDS
from session_awareness.infrastructure.cli.common import when
from session_awareness.infrastructure.console import cursors, views
from session_awareness.infrastructure.console.guard import Guard
from session_awareness.infrastructure.console.metrics import registry_for
from session_awareness.infrastructure.console.picture import picture
from session_awareness.logs import get_logger

log = get_logger()

#: How often `/events` reads the store's head.
POLL_SECONDS = 0.25
#: How long one `/events` stream lasts; the browser reconnects at once (`retry`), sending
#: the last head it saw, so nothing is missed in between.
STREAM_SECONDS = 60.0


def templates() -> Environment:
    """The page templates, every expression autoescaped whatever the file's name."""
    env = Environment(
        loader=PackageLoader("session_awareness.infrastructure.console", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = when
    env.globals["session_href"] = views.session_href
    return env


def create_app(
    svc: SessionAwareness,
    *,
    token: str | None = None,
    retention: Retention | None = None,
    poll_seconds: float = POLL_SECONDS,
    stream_seconds: float = STREAM_SECONDS,
    page_size: int = views.PAGE_SIZE,
    edges_page: int = cursors.EDGES_PAGE,
    stopping: threading.Event | None = None,
) -> Starlette:
    """The console over a service opened for looking (not started: it writes nothing);
    `retention`: the one the service was opened with, which the health page names;
    `stopping`: set when the server stops, it ends the open `/events` streams at once.
    With a `token`, every request must carry it (see `Guard`); without one, only requests
    addressed to a loopback name are answered."""
    retention = retention or Retention()
    stopping = stopping or threading.Event()
    env = templates()
    registry = registry_for(svc)

    def page(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = env.get_template(name).render(
            nonce=request.state.nonce, head=request.state.head, path=request.url.path, **context
        )
        return HTMLResponse(html, status_code=status)

    def failing(endpoint: Callable[[Request], Response]) -> Callable[[Request], Response]:
        """A page, with the store's head read before its data (a change in between makes
        the page refresh, never go missing); an unknown session is a 404 page, bad input a
        400 page, an unreachable store a 503 page, each naming it."""

        def answer(request: Request) -> Response:
            request.state.head = 0
            try:
                request.state.head = views.store_head(svc)
                return endpoint(request)
            except UnknownSessionError as error:
                return page(request, "error.html", 404, title="Unknown session", error=str(error))
            except StoreUnavailableError as error:
                log.warning("console_store_unavailable", path=request.url.path, error=str(error))
                return page(request, "error.html", 503, title="Store unavailable", error=str(error))
            except (InvalidArgumentError, ValueError, SessionAwarenessError) as error:
                return page(request, "error.html", 400, title="Bad request", error=str(error))

        return answer

    @failing
    def overview(request: Request) -> Response:
        q = request.query_params
        kinds = [kind for kind in q.getlist("kind") if kind] or None  # "" is the form's "any"
        found = views.overview(
            svc,
            agent_id=q.get("agentId") or None,
            kinds=kinds,
            label=q.get("label") or None,
            active_minutes=_number(q.get("activeMinutes"), "activeMinutes", float),
            page=_number(q.get("page"), "page", int) or 0,
            page_size=page_size,
        )
        return page(request, "overview.html", title="Sessions", found=found, query=q,
                    kinds=sorted(SESSION_KINDS), chosen=set(kinds or ()),
                    link=lambda **change: _with(request, **change))  # fmt: skip

    @failing
    def watches(request: Request) -> Response:
        q = request.query_params
        found = cursors.watches(
            svc,
            watcher=q.get("watcher") or None,
            target=q.get("target") or None,
            pending_only=q.get("state") == "pending",
            page=_number(q.get("page"), "page", int) or 0,
            page_size=edges_page,
        )
        return page(request, "watches.html", title="Watches", found=found, query=q,
                    picture=picture(found.edges),
                    link=lambda **change: _with(request, **change))  # fmt: skip

    @failing
    def session(request: Request) -> Response:
        q = request.query_params
        found = cursors.session_page(
            svc,
            request.path_params["key"],
            q.get("agentId") or None,
            _number(q.get("since"), "since", int),
        )
        return page(request, "session.html", title=found.row.key, s=found,
                    link=lambda **change: _with(request, **change))  # fmt: skip

    @failing
    def health(request: Request) -> Response:
        return page(request, "health.html", title="Health", h=views.health(svc, retention))

    def metrics(request: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    async def events(request: Request) -> Response:
        seen = request.headers.get("last-event-id") or request.query_params.get("since")
        last = int(seen) if seen is not None and seen.isdigit() else None
        return StreamingResponse(
            _changes(svc, last, poll_seconds, stream_seconds, stopping),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    app = Starlette(
        routes=[
            Route("/", overview),
            Route("/watches", watches),
            Route("/sessions/{key:path}", session),
            Route("/health", health),
            Route("/metrics", metrics),
            Route("/events", events),
        ]
    )
    app.add_middleware(Guard, token=token)
    return app


async def _changes(
    svc: SessionAwareness,
    last: int | None,
    poll_seconds: float,
    stream_seconds: float,
    stopping: threading.Event,
) -> AsyncIterator[str]:
    """`change` events, each with the store's new head as its id, for `stream_seconds` or
    until the server stops."""
    yield "retry: 500\n\n"
    deadline = anyio.current_time() + stream_seconds
    while anyio.current_time() < deadline and not stopping.is_set():
        head: int | None
        try:
            head = await anyio.to_thread.run_sync(views.store_head, svc)
        except Exception as error:  # noqa: BLE001 -- the stream outlives a store hiccup
            log.warning("console_head_unreadable", error=str(error))
            head = last
        if head is not None and head != last:
            yield f"id: {head}\nevent: {'change' if last is not None else 'head'}\ndata: {head}\n\n"
            last = head
        await anyio.sleep(poll_seconds)


def _number(text: str | None, name: str, kind: type[int] | type[float]) -> Any:
    """A query parameter's number; a `ValueError` naming it otherwise."""
    if text is None or text == "":
        return None
    try:
        value = kind(text)
    except ValueError:
        raise ValueError(f"{name} must be a number, not {text[:40]!r}") from None
    if not value >= 0:  # negative, or NaN (which compares false with everything)
        raise ValueError(f"{name} must not be negative")
    return value


def _with(request: Request, **change: Any) -> str:
    """This page's URL with some query parameters changed (None drops one)."""
    params = [(k, v) for k, v in request.query_params.multi_items() if k not in change]
    params += [(k, str(v)) for k, v in change.items() if v is not None]
    query = urlencode(params)
    return request.url.path + ("?" + query if query else "")
