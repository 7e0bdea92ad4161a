"""The hook relay hands notices over, then acknowledges (R-N8, ADR 047): the MCP server answers
a prompt's hook with the session's pending notices and a token, and acknowledges them only
when the hook confirms it printed them. A hook that times out, cannot read the answer, is
killed, or confirms wrongly leaves them pending for the next prompt. The real server, the
real hook (or its own relay code), on both backends."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from session_awareness.application import open_service
from session_awareness.infrastructure import claude_relay
from session_awareness.infrastructure.claude_hooks import parse
from session_awareness.infrastructure.claude_relay import relay_request, socket_path
from session_awareness.infrastructure.claude_state import ClaudeState, process_identity
from session_awareness.infrastructure.mcp_server import serve_hooks
from session_awareness.infrastructure.mcp_tools import McpSurface
from session_awareness.testing.waiting import wait_until
from tests.hooks.helpers import (
    StalledHook,
    fixture,
    lead_key,
    run_hook,
    seed_notices,
    watched_targets,
)
from tests.mcp.helpers import DEADLINE, connected, logged, run

LEAD = "lead-1"
PROMPT = fixture("user_prompt_submit", session_id=LEAD)


def pending(url: str) -> list[str]:
    with open_service(url) as svc:
        return svc.pending_notices(lead_key(LEAD))


def request(url: str, state: Path, *, handover: bool = True) -> bytes:
    """The line the lead's prompt hook sends the server (`claude_relay.relay_request`)."""
    parsed = parse(json.dumps(PROMPT), ClaudeState(state), now_ms=int(time.time() * 1000))
    line = relay_request(parsed.to_json(), agent="claude", database_url=url)
    if handover:
        return line
    body = json.loads(line)
    del body["handover"]
    return json.dumps(body).encode()


def server_pid() -> int:
    """The MCP server process this test started (its child running `mcp`)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat, command = (entry / "stat").read_text(), (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and b"mcp" in command.split(b"\0"):
            return int(entry.name)
    raise AssertionError("no MCP server among this process's children")


async def serving(
    url: str, state: Path, log: Path, scenario: Callable[[Path], Awaitable[None]]
) -> None:
    """Run `scenario` with the socket's path while a real server (`--verbose`, logging to
    `log`) serves this process's hooks, once its start-up sweep is done (R-N6)."""
    with log.open("w") as errlog:
        async with connected(url, state, "--verbose", errlog=errlog):
            await logged(log, "notices_swept")
            host = process_identity(os.getpid())
            assert host is not None
            path = socket_path(ClaudeState(state), host)
            with anyio.fail_after(DEADLINE):
                while not path.exists():
                    await anyio.sleep(0.02)
            await scenario(path)


async def handled(log: Path) -> None:
    """Wait until the server is done with a relayed prompt it got no confirmation for:
    it says so (`hook_relay_unconfirmed`), or, as it did before R-N8, it drained."""
    with anyio.fail_after(DEADLINE):
        while not any(e in log.read_text() for e in ("hook_relay_unconfirmed", "notice_drained")):
            await anyio.sleep(0.02)


def start_lead(url: str, state: Path) -> None:
    done = run_hook(fixture("session_start", session_id=LEAD), url=url, state_dir=state)
    assert (done.returncode, done.stdout) == (0, "")


class TestNothingIsLost:
    def test_a_hook_that_gave_up_on_a_slow_server_leaves_the_notices_pending(
        self, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """(a) R-N8: the server is held (stopped) past the hook's relay timeout; the hook
        gives up and the server, once it runs again, records the turn and reads the notices
        but acknowledges nothing unconfirmed (`hook_relay_unconfirmed`): the next prompt
        shows them all."""
        url, state, log = database_url, tmp_path / "state", tmp_path / "server.log"
        start_lead(url, state)
        expected = seed_notices(url, lead_key(LEAD), watched_targets(3))
        monkeypatch.setattr(claude_relay, "RELAY_TIMEOUT", 0.2)

        async def scenario(path: Path) -> None:
            pid = server_pid()
            os.kill(pid, signal.SIGSTOP)
            try:
                with pytest.raises(OSError):  # the hook's own relay call times out
                    await anyio.to_thread.run_sync(
                        claude_relay._ask, str(path), request(url, state)
                    )
            finally:
                os.kill(pid, signal.SIGCONT)
            await handled(log)

        run(lambda: serving(url, state, log, scenario))
        assert pending(url) == expected
        assert "hook_relay_unconfirmed" in log.read_text()
        done = run_hook(PROMPT, url=url, state_dir=state)
        assert done.context is not None and done.context.split("\n") == expected

    def test_an_answer_over_64_kib_is_shown_whole_and_acknowledged_once(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """(b) R-N8, R-N4: the notices of a large fan-out make an answer past the hook's old
        64 KiB read: the hook reads it to its newline, prints every notice, confirms, and
        they are acknowledged by the time it exits; the next prompt shows none again."""
        url, state, log = database_url, tmp_path / "state", tmp_path / "server.log"
        start_lead(url, state)
        expected = seed_notices(url, lead_key(LEAD), watched_targets())
        assert len(json.dumps({"notices": expected})) > 1 << 16

        async def scenario(_: Path) -> None:
            done = await anyio.to_thread.run_sync(
                lambda: run_hook(PROMPT, url=url, state_dir=state, args=("--verbose",))
            )
            assert done.context is not None and done.context.split("\n") == expected
            assert done.stderr == ""  # relayed: the hook itself opened no service
            assert pending(url) == []
            again = await anyio.to_thread.run_sync(
                lambda: run_hook(PROMPT, url=url, state_dir=state)
            )
            assert again.context is None

        run(lambda: serving(url, state, log, scenario))

    def test_a_hook_killed_before_it_confirms_leaves_the_notices_pending(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """(c) R-N8: a relayed hook is killed while it prints (before its confirmation, as
        Claude Code's hook timeout or a ^C does): the server acknowledges nothing, and the
        next prompt shows every notice."""
        url, state, log = database_url, tmp_path / "state", tmp_path / "server.log"
        start_lead(url, state)
        # More than the stalled hook's pipe holds, less than the old 64 KiB answer cap.
        expected = seed_notices(url, lead_key(LEAD), watched_targets(20))
        assert 1 << 12 < len(json.dumps({"notices": expected})) < 1 << 16

        async def scenario(_: Path) -> None:
            hook = StalledHook(PROMPT, url=url, state_dir=state)
            await anyio.to_thread.run_sync(hook.kill_while_printing)
            await handled(log)
            assert pending(url) == expected
            assert "hook_relay_unconfirmed" in log.read_text()
            done = await anyio.to_thread.run_sync(
                lambda: run_hook(PROMPT, url=url, state_dir=state)
            )
            assert done.context is not None and done.context.split("\n") == expected
            assert pending(url) == []

        run(lambda: serving(url, state, log, scenario))


class TestTheConfirmation:
    def test_a_notice_opened_before_the_confirmation_stays_pending(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """R-N8: the confirmation acknowledges the notices handed over and only those: a
        notice that opened after the server's answer stays pending for the next prompt."""
        url, state, log = database_url, tmp_path / "state", tmp_path / "server.log"
        start_lead(url, state)
        targets = watched_targets(3)
        expected = seed_notices(url, lead_key(LEAD), targets[:2])

        def late_notice() -> list[str]:
            return seed_notices(url, lead_key(LEAD), targets[2:])

        async def scenario(path: Path) -> None:
            relayed = await anyio.to_thread.run_sync(
                claude_relay._ask, str(path), request(url, state)
            )
            assert relayed is not None and relayed.notices == expected
            late = await anyio.to_thread.run_sync(late_notice)
            await anyio.to_thread.run_sync(relayed.confirm)
            assert pending(url) == late

        run(lambda: serving(url, state, log, scenario))

    def test_a_wrong_confirmation_acknowledges_nothing(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """R-N8, R-L9: a confirmation that is not this answer's (another token, garbage) is
        refused with `hook_relay_unconfirmed`; the notices stay pending."""
        url, state, log = database_url, tmp_path / "state", tmp_path / "server.log"
        start_lead(url, state)
        expected = seed_notices(url, lead_key(LEAD), watched_targets(2))

        def confirm_wrongly(path: Path) -> None:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(DEADLINE)
                conn.connect(str(path))
                conn.sendall(request(url, state) + b"\n")
                answer = json.loads(conn.makefile("rb").readline())
                assert answer["notices"] == expected and answer["token"]
                conn.sendall(json.dumps({"confirm": "0" * 32}).encode() + b"\n")
                assert conn.recv(1 << 10) == b""  # closed without an acknowledgement

        async def scenario(path: Path) -> None:
            await anyio.to_thread.run_sync(confirm_wrongly, path)
            await logged(log, "hook_relay_unconfirmed")

        run(lambda: serving(url, state, log, scenario))
        assert pending(url) == expected

    def test_an_older_hook_that_never_confirms_has_its_notices_drained_as_before(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """R-N3: a hook that does not ask for a hand-over (one installed before it) is
        answered with drained notices and no token, as it expects: it never confirms."""
        url, state, log = database_url, tmp_path / "state", tmp_path / "server.log"
        start_lead(url, state)
        expected = seed_notices(url, lead_key(LEAD), watched_targets(2))

        def ask_as_before(path: Path) -> dict[str, object]:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(DEADLINE)
                conn.connect(str(path))
                conn.sendall(request(url, state, handover=False) + b"\n")
                answer: dict[str, object] = json.loads(conn.makefile("rb").readline())
                return answer

        async def scenario(path: Path) -> None:
            answer = await anyio.to_thread.run_sync(ask_as_before, path)
            assert answer == {"notices": expected}
            assert wait_until(lambda: pending(url) == [], timeout=DEADLINE)

        run(lambda: serving(url, state, log, scenario))

    def test_an_acknowledgement_that_fails_leaves_the_notices_and_the_relay_serving(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """R-N8, R-L8: the server's service cannot acknowledge (here it has closed) after the
        hook confirmed: the notices stay pending (`hook_relay_acknowledge_failed`), and the
        relay goes on answering the next hook (an error, on which it records in-process)."""
        url, state = database_url, tmp_path / "state"
        path = tmp_path / "relay" / "hooks.sock"
        expected = seed_notices(url, lead_key(LEAD), watched_targets(2))
        svc = open_service(url)

        def hook_confirms_after_the_service_closed() -> list[str]:
            relayed = claude_relay._ask(str(path), request(url, state))
            assert relayed is not None
            svc.close()
            relayed.confirm()
            return relayed.notices

        async def scenario() -> None:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(serve_hooks, McpSurface(svc, lambda: None), path, url)
                with anyio.fail_after(DEADLINE):
                    while not path.exists():
                        await anyio.sleep(0.02)
                with capture_logs() as logs:
                    shown = await anyio.to_thread.run_sync(hook_confirms_after_the_service_closed)
                    again = await anyio.to_thread.run_sync(
                        claude_relay._ask, str(path), request(url, state)
                    )
                tasks.cancel_scope.cancel()
            assert shown == expected
            assert again is None  # answered with an error: the hook records in-process
            assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
                "hook_relay_acknowledge_failed",
                "hook_relay_failed",
            ]

        run(scenario)
        assert pending(url) == expected


class TestAHookThatNamesAnotherStore:
    def test_it_records_there_and_tells_the_user_with_the_notices(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """R-L9: the session's hooks and its MCP server name two stores (one of the two
        files `install` writes, edited by hand). The server refused the relay and logged it
        on a stderr no one reads; the hook recorded into its own store, and the session's
        tools read the other. The hook still records there, and tells the user, in the same
        output as the notices it hands over."""
        other, state, log = (
            f"sqlite:///{tmp_path / 'other.db'}",
            tmp_path / "state",
            tmp_path / "server.log",
        )
        start_lead(other, state)
        expected = seed_notices(other, lead_key(LEAD), watched_targets(2))

        async def scenario(_: Path) -> None:
            done = await anyio.to_thread.run_sync(
                lambda: run_hook(PROMPT, url=other, state_dir=state)
            )
            output = json.loads(done.stdout)
            assert output["hookSpecificOutput"]["additionalContext"].split("\n") == expected
            assert "serves another store than the hooks' --database-url" in output["systemMessage"]
            assert pending(other) == []  # handed over in-process, printed, acknowledged
            none = await anyio.to_thread.run_sync(
                lambda: run_hook(PROMPT, url=other, state_dir=state)
            )
            assert none.told is not None and "another store" in none.told  # told every run

        run(lambda: serving(database_url, state, log, scenario))
        assert "hook_relay_other_store" in log.read_text()

    def test_the_same_store_spelled_another_way_is_relayed(self, tmp_path: Path) -> None:
        """R-L9 without a false alarm: two spellings of one SQLite file (`?mode=rwc`, the
        default, written out) name one store: the server takes the hook's signal, and
        nothing is told."""
        store = tmp_path / "sessions.db"
        url, state, log = f"sqlite:///{store}", tmp_path / "state", tmp_path / "server.log"
        start_lead(url, state)

        async def scenario(_: Path) -> None:
            done = await anyio.to_thread.run_sync(
                lambda: run_hook(
                    PROMPT, url=f"{url}?mode=rwc", state_dir=state, args=("--verbose",)
                )
            )
            assert (done.returncode, done.stdout, done.stderr) == (0, "", "")  # relayed

        run(lambda: serving(url, state, log, scenario))
        assert "hook_relay" not in log.read_text()
