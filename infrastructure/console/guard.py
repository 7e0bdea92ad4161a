"""Who the console answers, and the headers every answer carries (R-O1).

- With a token, every request — pages, `/events`, `/metrics` — must present it: as
  `Authorization: Bearer <token>`, as the `session_awareness_console` cookie, or once as
  `?token=`, which sets that cookie (HttpOnly, SameSite=Strict; it holds the token's SHA-256
  digest, not the token) so links, the live-update stream and the page's refreshes carry
  it. Compared in constant time.
- Without a token the console is bound to loopback (`require_token` refuses anything else at
  start), and it answers only requests addressed to a loopback name, so a web page a browser
  opened elsewhere cannot reach it by pointing a hostname at 127.0.0.1 (DNS rebinding).
- Every answer forbids framing, sniffing and caching, and allows only scripts and styles that
  carry the request's nonce: text from the store can never become a script that runs.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import MutableMapping
from typing import Any

from starlette.datastructures import Headers, QueryParams
from starlette.types import ASGIApp, Receive, Scope, Send

#: The environment variable `session-awareness console` reads its token from.
TOKEN_ENV = "SESSION_AWARENESS_CONSOLE_TOKEN"  # noqa: S105 -- a variable's name
COOKIE = "session_awareness_console"


class TokenRequiredError(Exception):
    """The console was asked to listen beyond loopback without a token."""


def is_loopback(host: str) -> bool:
    """Whether a host name or address names this machine only."""
    name = host.strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def require_token(host: str, token: str | None) -> None:
    """Refuse to listen on `host` beyond loopback without a token."""
    if not is_loopback(host) and not token:
        raise TokenRequiredError(
            f"the console listens on {host}, beyond loopback: give it a token "
            f"(--token or ${TOKEN_ENV})"
        )


def _host_name(header: str) -> str:
    """The name in a Host header, without its port (`[::1]:8765` → `::1`)."""
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


class Guard:
    """ASGI middleware: the token rule, the loopback rule and the security headers."""

    def __init__(self, app: ASGIApp, token: str | None = None) -> None:
        self.app = app
        self.token = token or None
        #: What a request presents, hashed: the cookie holds this, never the token itself.
        self.cookie = _digest(token) if token else ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        nonce = secrets.token_urlsafe(16)
        scope.setdefault("state", {})["nonce"] = nonce
        set_cookie = False
        if self.token is None:
            if not is_loopback(_host_name(headers.get("host", ""))):
                await _refuse(send, 403, "the console answers loopback names only")
                return
        else:
            presented, set_cookie = _presented(scope, headers)
            if presented is None or not hmac.compare_digest(
                presented.encode(), self.cookie.encode()
            ):
                await _refuse(send, 401, "a valid console token is required")
                return

        async def send_guarded(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], *_security_headers(nonce)]
                if set_cookie and self.token is not None:
                    cookie = f"{COOKIE}={self.cookie}; Path=/; HttpOnly; SameSite=Strict"
                    message["headers"].append((b"set-cookie", cookie.encode()))
            await send(message)

        await self.app(scope, receive, send_guarded)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _presented(scope: Scope, headers: Headers) -> tuple[str | None, bool]:
    """The digest of the token a request presents, and whether it came in the query (then
    the cookie is set): a header first, then the query, then the cookie, so a fresh token
    in the URL replaces a stale cookie."""
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return _digest(value.strip()), False
    query = QueryParams(scope.get("query_string", b"").decode("latin-1")).get("token")
    if query:
        return _digest(query), True
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE and value:
            return value, False
    return None, False


def _security_headers(nonce: str) -> list[tuple[bytes, bytes]]:
    policy = (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
        "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    )
    return [
        (b"content-security-policy", policy.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", b"DENY"),
        (b"referrer-policy", b"no-referrer"),
        (b"cache-control", b"no-store"),
    ]


async def _refuse(send: Send, status: int, reason: str) -> None:
    body = (reason + "\n").encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            *_security_headers("-"),
        ],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})
