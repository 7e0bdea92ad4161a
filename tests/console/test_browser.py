"""The console in a real browser: headless Chromium (Debian's `chromium`, driven through its
`chromium-driver` by Selenium; nothing downloads a browser) loads each page of
`session-awareness console`, run as an operator runs it, over a store a scenario built (R-O1).

Screenshots land in build/console-screenshots/<backend>/. Without chromium these tests skip,
except under CI (CI=true), where they fail: `.ci/run` installs it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.error import URLError

import pytest

from session_awareness.application import SessionAwareness
from session_awareness.infrastructure.cli.console import TOKEN_ENV
from session_awareness.infrastructure.console.views import session_href
from session_awareness.testing import wait_until
from tests.conftest import ServiceFactory
from tests.console.scenario import (
    CHILD,
    HOSTILE_CHANNEL,
    HOSTILE_KEY,
    HOSTILE_LABEL,
    MANAGER,
    build,
    notice,
)

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
SHOTS = Path(__file__).resolve().parents[2] / "build" / "console-screenshots"
TOKEN = "browser-token"  # noqa: S105 -- the test's own
#: How soon a page must show a signal another process recorded (R-O1: within 1 s), plus
#: the browser's own time to repaint on a busy machine.
LIVE_WITHIN = 1.0


def browser_or_skip() -> tuple[str, str]:
    if CHROMIUM is None or DRIVER is None:
        missing = "chromium and chromium-driver (apt-get install -y chromium chromium-driver)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"the console's browser tests need {missing}; .ci/run installs them")
        pytest.skip(f"needs {missing}")
    return CHROMIUM, DRIVER


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 -- our own server
            return bool(response.status == 200)
    except (URLError, OSError):
        return False


@pytest.fixture
def writer(open_svc: ServiceFactory) -> SessionAwareness:
    svc = open_svc()
    build(svc)
    return svc


@pytest.fixture
def console_url(writer: SessionAwareness, database_url: str) -> Iterator[str]:
    """`session-awareness console` on a free loopback port, over the scenario's store."""
    yield from serve(database_url, token=None)


@pytest.fixture
def guarded_url(writer: SessionAwareness, database_url: str) -> Iterator[str]:
    """The same behind a token, given as the environment variable."""
    yield from serve(database_url, token=TOKEN)


def serve(database_url: str, token: str | None) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, "-m", "session_awareness.infrastructure.cli", "console",
               "--database-url", database_url, "--port", str(port)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    if token is not None:
        env[TOKEN_ENV] = token
    server = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    health = url + "/health" + ("" if token is None else f"?token={token}")
    try:
        if not wait_until(lambda: answers(health) or server.poll() is not None, 30):
            pytest.fail("the console did not answer within 30 s")
        if server.poll() is not None:
            pytest.fail(f"the console exited: {server.stderr.read() if server.stderr else ''}")
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if server.stderr is not None:
            server.stderr.close()


@pytest.fixture
def browser() -> Iterator[object]:
    from selenium import webdriver  # noqa: PLC0415 -- only where the browser tests run
    from selenium.webdriver.chrome.service import Service  # noqa: PLC0415

    chromium, driver = browser_or_skip()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=1280,900"):  # fmt: skip
        options.add_argument(argument)
    session = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    try:
        yield session
    finally:
        session.quit()


def shot(browser: object, request: pytest.FixtureRequest, name: str) -> Path:
    backend = request.node.callspec.params["database_url"]
    path = SHOTS / backend / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(path))  # type: ignore[attr-defined]
    assert path.stat().st_size > 0
    return path


def never_ran(browser: object) -> None:
    """No hostile text became a script that ran."""
    assert browser.execute_script("return window.__pwned === undefined")  # type: ignore[attr-defined]


class TestInABrowser:
    def test_the_overview_shows_the_tree_and_hostile_text_as_text(
        self, browser: object, console_url: str, request: pytest.FixtureRequest
    ) -> None:
        """R-O1: a person sees each agent's tree (the child under the manager, with its
        pending notices counted) and the hostile label as the characters it is."""
        from selenium.webdriver.common.by import By  # noqa: PLC0415

        browser.get(console_url + "/")  # type: ignore[attr-defined]
        manager = browser.find_element(  # type: ignore[attr-defined]
            By.CSS_SELECTOR, f'li > div.session[data-key="{MANAGER}"]'
        )
        assert "2 pending notices" in manager.text
        children = manager.find_element(By.XPATH, "..").find_elements(
            By.CSS_SELECTOR, ":scope > ul.tree div.session"
        )
        assert {c.get_attribute("data-key") for c in children} == {CHILD, HOSTILE_KEY}
        page = browser.find_element(By.TAG_NAME, "main").text  # type: ignore[attr-defined]
        assert HOSTILE_LABEL in page and HOSTILE_KEY in page
        never_ran(browser)
        shot(browser, request, "overview")

    def test_the_watches_show_a_pending_edge_with_its_notice(
        self, browser: object, console_url: str, request: pytest.FixtureRequest
    ) -> None:
        """R-O1: the picture draws the pending cursor and the ambient one; the table shows
        the pending one's L, N, M and its notice text."""
        from selenium.webdriver.common.by import By  # noqa: PLC0415

        browser.get(console_url + "/watches")  # type: ignore[attr-defined]
        drawn = browser.find_elements(By.CSS_SELECTOR, "#picture g.edge")  # type: ignore[attr-defined]
        assert {e.get_attribute("class") for e in drawn} == {
            "edge pending",
            "edge ambient",
            "edge synced",
        }
        row = next(
            r
            for r in browser.find_elements(By.CSS_SELECTOR, "#cursors tr.edge.pending")  # type: ignore[attr-defined]
            if CHILD in r.text
        )
        cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
        assert cells[2:5] == ["1", "2", "3"] and cells[5] == "pending"
        assert cells[6] == notice(CHILD, 1)
        never_ran(browser)
        shot(browser, request, "watches")

    def test_a_session_shows_its_timeline_and_updates_live(
        self,
        browser: object,
        console_url: str,
        writer: SessionAwareness,
        request: pytest.FixtureRequest,
    ) -> None:
        """R-O1: the child's timeline shows #1–#3 (the hostile summary as text); a signal
        another process records appears without a reload, within a second."""
        browser.get(console_url + session_href(CHILD))  # type: ignore[attr-defined]
        self.timeline_updates_live(browser, writer, request)

    def test_behind_a_token_the_pages_and_their_live_updates_work(
        self,
        browser: object,
        guarded_url: str,
        writer: SessionAwareness,
        request: pytest.FixtureRequest,
    ) -> None:
        """R-O1: without the token the console shows nothing; opened once with `?token=`,
        its links, its refreshes and its event stream carry the cookie it set."""
        from selenium.webdriver.common.by import By  # noqa: PLC0415

        browser.get(guarded_url + session_href(CHILD))  # type: ignore[attr-defined]
        assert "token is required" in browser.find_element(By.TAG_NAME, "body").text  # type: ignore[attr-defined]
        browser.get(f"{guarded_url}/?token={TOKEN}")  # type: ignore[attr-defined]
        browser.find_element(By.CSS_SELECTOR, f'a[href="{session_href(CHILD)}"]').click()  # type: ignore[attr-defined]
        self.timeline_updates_live(browser, writer, request, "session-with-token")

    def timeline_updates_live(
        self,
        browser: object,
        writer: SessionAwareness,
        request: pytest.FixtureRequest,
        name: str = "session",
    ) -> None:
        from selenium.webdriver.common.by import By  # noqa: PLC0415

        def sequences() -> list[str]:
            """The timeline's sequence column, read in one go (the page swaps it live)."""
            return list(
                browser.execute_script(  # type: ignore[attr-defined]
                    "return Array.from(document.querySelectorAll("
                    "'#timeline tr.signal td:first-child'), td => td.textContent)"
                )
            )

        assert wait_until(lambda: sequences() == ["1", "2", "3"], timeout=10)
        timeline = browser.find_element(By.ID, "timeline").text  # type: ignore[attr-defined]
        assert "human message via " + HOSTILE_CHANNEL in timeline
        assert browser.find_element(By.ID, "live").text == "read-only · live"  # type: ignore[attr-defined]
        shot(browser, request, name)

        recorded = time.monotonic()
        writer.record_goal_changed(CHILD, summary="goal updated", actor_type="human")
        assert wait_until(lambda: sequences() == ["1", "2", "3", "4"], timeout=10, interval=0.02)
        took = time.monotonic() - recorded
        assert took < LIVE_WITHIN, f"the page showed the new signal after {took:.2f} s"
        assert browser.find_element(By.ID, "state-version").text == "4"  # type: ignore[attr-defined]
        assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-refreshed")  # type: ignore[attr-defined]
        never_ran(browser)

    def test_the_health_page(
        self, browser: object, console_url: str, request: pytest.FixtureRequest
    ) -> None:
        """R-O1: the backend, the store's state and retention, as a person reads them."""
        from selenium.webdriver.common.by import By  # noqa: PLC0415

        browser.get(console_url + "/health")  # type: ignore[attr-defined]
        backend = request.node.callspec.params["database_url"]
        assert browser.find_element(By.ID, "backend").text == backend  # type: ignore[attr-defined]
        assert browser.find_element(By.ID, "store").text == "ok"  # type: ignore[attr-defined]
        shot(browser, request, "health")
