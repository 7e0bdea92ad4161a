"""Who the console answers: loopback by default, a token everywhere else (R-O1)."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from session_awareness.application import SessionAwareness
from session_awareness.infrastructure.console import create_app
from session_awareness.infrastructure.console.guard import (
    COOKIE,
    TokenRequiredError,
    is_loopback,
    require_token,
)

TOKEN = "s3cret-token"  # noqa: S105 -- the tests' own
EVERY_PATH = ["/", "/watches", "/health", "/metrics", "/events", "/sessions/agent%3Amain%3Amain"]


@pytest.fixture
def guarded(reader: SessionAwareness) -> TestClient:
    return TestClient(create_app(reader, token=TOKEN, stream_seconds=0.2))


class TestToken:
    def test_every_path_refuses_a_request_without_the_token(self, guarded: TestClient) -> None:
        """R-O1: pages, the live-update stream and /metrics all need the token."""
        for path in EVERY_PATH:
            assert guarded.get(path).status_code == 401, path
            wrong = guarded.get(path, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401, path
            assert (
                guarded.get(path + ("&" if "?" in path else "?") + "token=nope").status_code == 401
            )

    def test_a_bearer_token_opens_every_path(self, guarded: TestClient) -> None:
        """R-O1: `Authorization: Bearer` is accepted everywhere."""
        for path in EVERY_PATH:
            page = guarded.get(path, headers={"Authorization": f"Bearer {TOKEN}"})
            assert page.status_code == 200, path

    def test_a_token_in_the_url_sets_a_cookie_that_opens_the_rest(
        self, guarded: TestClient
    ) -> None:
        """R-O1: `?token=` once sets an HttpOnly, SameSite=Strict cookie holding no token,
        which the links, the refreshes and the event stream then carry."""
        first = guarded.get(f"/?token={TOKEN}")
        assert first.status_code == 200
        cookie = first.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
        for path in EVERY_PATH:
            assert guarded.get(path).status_code == 200, path  # the client keeps the cookie
        guarded.cookies.set(COOKIE, "forged")
        assert guarded.get("/").status_code == 401

    def test_text_that_is_not_ascii_is_refused_like_any_wrong_token(
        self, guarded: TestClient
    ) -> None:
        """R-O1: a cookie or token beyond ASCII is a 401, never a server error."""
        for headers in (
            {"Cookie": f"{COOKIE}=\u00e9t\u00e9".encode()},
            {"Authorization": "Bearer \u00e9t\u00e9".encode()},
        ):
            assert guarded.get("/", headers=headers).status_code == 401

    def test_with_a_token_any_host_name_is_answered(self, guarded: TestClient) -> None:
        """R-O1: behind a token the console may be reached by any name (e.g. a proxy's)."""
        page = guarded.get("/health", headers={"Authorization": f"Bearer {TOKEN}",
                                               "Host": "console.example"})  # fmt: skip
        assert page.status_code == 200


class TestLoopback:
    def test_without_a_token_only_loopback_names_are_answered(
        self, reader: SessionAwareness
    ) -> None:
        """R-O1: a page that points another name at 127.0.0.1 (DNS rebinding) is refused."""
        app = create_app(reader, stream_seconds=0.2)
        for base in ("http://localhost", "http://127.0.0.1:8765", "http://[::1]:8765"):
            with TestClient(app, base_url=base) as c:
                assert c.get("/health").status_code == 200, base
        with TestClient(app, base_url="http://attacker.example") as c:
            for path in EVERY_PATH:
                assert c.get(path).status_code == 403, path

    def test_listening_beyond_loopback_needs_a_token(self) -> None:
        """R-O1: refused at start without a token; loopback needs none."""
        for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
            require_token(host, None)
        for host in ("0.0.0.0", "192.168.1.5", "::", "example.org"):  # noqa: S104 -- the point
            assert not is_loopback(host)
            with pytest.raises(TokenRequiredError, match="--token"):
                require_token(host, None)
            with pytest.raises(TokenRequiredError):
                require_token(host, "")
            require_token(host, TOKEN)


class TestHeaders:
    def test_answers_forbid_framing_sniffing_caching_and_foreign_scripts(
        self, client: TestClient
    ) -> None:
        """R-O1: every page is served with a nonce-only script policy and no caching."""
        page = client.get("/")
        policy = page.headers["content-security-policy"]
        assert "script-src 'nonce-" in policy and "default-src 'none'" in policy
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["cache-control"] == "no-store"
