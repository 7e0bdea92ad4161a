"""`session-awareness mcp` through the official SDK's stdio client, on both backends."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import threading
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from session_awareness import __version__
from session_awareness.application import open_service
from session_awareness.application.tools import TOOLS, tool_schemas
from session_awareness.infrastructure.claude_relay import socket_path
from session_awareness.infrastructure.claude_state import ClaudeState, process_identity
from session_awareness.infrastructure.mcp_tools import EXTRA_TOOLS, McpSurface
from tests.hooks.helpers import fixture, lead_key, run_hook
from tests.mcp.helpers import (
    NOTICES,
    Updates,
    call,
    connected,
    run,
    server_params,
    subscribe,
)

LEAD, WORKER = "agent:main:main", "agent:main:worker"
#: The default transcript source (Claude Code's) is always there, so sessions_history is listed.
OFFERED = [
    "session_status",
    "sessions_list",
    "subagents",
    "sessions_history",
    "session_notices",
    "session_watch",
    "session_unwatch",
]


def seed(url: str) -> None:
    with open_service(url) as svc:
        svc.open_session(LEAD)
        svc.open_session(WORKER)
        svc.open_session("agent:other:elsewhere")


class TestInitialize:
    def test_the_server_names_itself_with_the_package_version(self, tmp_path: Path) -> None:
        """`initialize` answers `serverInfo` with the package's name and version, so a
        client can tell which release it talks to."""
        url = f"sqlite:///{tmp_path / 'sessions.db'}"

        async def scenario() -> None:
            async with connected(url, tmp_path, "--caller", LEAD) as client:
                info = client.server_info
                assert info is not None
                assert (info.name, info.version) == ("session-awareness", __version__)

        run(scenario)


class TestListing:
    def test_tools_are_listed_with_the_exported_schemas_and_without_missing_ports(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """The tools carry MCP's name/description/inputSchema, built from the exported JSON
        Schemas; sessions_send (no dispatcher) and sessions_spawn (no spawner) are left out,
        subagents stays (its list needs no port; its cancel answers `not_configured`)."""
        exported = {entry["name"]: entry["parameters"] for entry in tool_schemas()}

        async def scenario() -> None:
            async with connected(database_url, tmp_path, "--caller", LEAD) as client:
                tools = (await client.list_tools()).tools
                assert [tool.name for tool in tools] == OFFERED
                for tool in tools:
                    assert tool.description
                    assert tool.input_schema["type"] == "object"
                    assert tool.input_schema["additionalProperties"] is False
                    if tool.name in exported:
                        assert tool.input_schema == exported[tool.name]
                resources = (await client.list_resources()).resources
                assert [str(r.uri) for r in resources] == [NOTICES]

        run(scenario)

    def test_the_docs_tool_list_names_every_tool_the_server_can_offer(self) -> None:
        """The MCP server's section of docs/claude-code.md lists each tool the server may offer
        (the service's tools and the notice tools), so a reader knows what a client can call."""
        readme = (Path(__file__).resolve().parents[2] / "docs" / "claude-code.md").read_text()
        section = readme[readme.index("**The MCP server**") :]
        bullet = section[section.index("- Tools: ") :].split("\n- ", 1)[0]
        named = set(re.findall(r"`(\w+)`", bullet))
        assert {*TOOLS, *EXTRA_TOOLS} <= named


class TestCalls:
    def test_each_tool_answers_good_arguments_as_tools_call_does(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """Every offered tool, good arguments: the same JSON as `svc.tools.call`, as text and
        structured content, not flagged as an error (R-T1, R-W2, R-N3, R-W6)."""
        seed(database_url)
        with open_service(database_url, visibility="agent") as svc:
            expected = svc.tools.call("session_status", {"sessionKey": WORKER}, caller=LEAD)

        async def scenario() -> None:
            async with connected(
                database_url, tmp_path, "--caller", LEAD, "--visibility", "agent"
            ) as client:
                status, failed, text = await call(client, "session_status", {"sessionKey": WORKER})
                assert (status, failed, json.loads(text)) == (expected, False, expected)
                listed, failed, _ = await call(client, "sessions_list", {"kinds": ["main"]})
                assert not failed
                assert {row["sessionKey"] for row in listed["sessions"]} == {LEAD, WORKER}
                runs, failed, _ = await call(client, "subagents", {"action": "list"})
                assert (runs["subagents"], failed) == ([], False)
                watched, _, _ = await call(client, "session_watch", {"sessionKey": WORKER})
                assert watched == {"sessionKey": WORKER, "watched": True}
                with open_service(database_url) as other:
                    other.record_human_direct_message(WORKER, channel="terminal")
                notice = (
                    f'Session "{WORKER}" changed (other actor). Reconcile before acting: '
                    f'session_status sessionKey "{WORKER}" changesSince 0.'
                )
                pending, _, _ = await call(client, "session_notices")
                assert pending == {"sessionKey": LEAD, "notices": [notice], "drained": False}
                drained, _, _ = await call(client, "session_notices", {"drain": True})
                assert drained == {"sessionKey": LEAD, "notices": [notice], "drained": True}
                again, _, _ = await call(client, "session_notices", {"drain": True})
                assert again["notices"] == []
                unwatched, _, _ = await call(client, "session_unwatch", {"sessionKey": WORKER})
                assert unwatched == {"sessionKey": WORKER, "unwatched": True}

        run(scenario)

    @pytest.mark.parametrize(
        ("tool", "arguments", "code", "field"),
        [
            ("session_status", {"changesSince": -1}, "invalid_input", "changesSince"),
            ("session_status", {"sessionKey": "agent:main:gone"}, "unknown_session", "sessionKey"),
            ("sessions_list", {"limit": 1.0}, "invalid_input", "limit"),
            ("sessions_list", {"bogus": 1}, "invalid_input", "bogus"),
            ("session_notices", {"drain": "yes"}, "invalid_input", "drain"),
            ("session_notices", {"drian": None}, "invalid_input", "drian"),
            ("session_status", {"sesionKey": None}, "invalid_input", "sesionKey"),
            ("session_watch", {}, "invalid_input", "sessionKey"),
            ("session_watch", {"sessionKey": "agent:main:gone"}, "unknown_session", "sessionKey"),
            ("session_unwatch", {"sessionKey": " x"}, "invalid_input", "sessionKey"),
            ("sessions_send", {"sessionKey": WORKER, "message": "hi"}, "unknown_tool", None),
        ],
    )
    def test_bad_arguments_are_typed_tool_errors(  # noqa: PLR0917 -- pytest parameters
        self,
        tool: str,
        arguments: dict[str, object],
        code: str,
        field: str | None,
        database_url: str,
        tmp_path: Path,
    ) -> None:
        """A refused call is an MCP tool error carrying code, field and message, never a
        protocol error or a traceback (R-T1, R-S4)."""
        seed(database_url)

        async def scenario() -> None:
            async with connected(database_url, tmp_path, "--caller", LEAD) as client:
                result, failed, text = await call(client, tool, arguments)
                assert failed and json.loads(text) == result
                assert result["error"]["code"] == code
                assert result["error"].get("field") == field
                assert result["error"]["message"]

        run(scenario)

    def test_an_invisible_session_reads_exactly_like_a_missing_one(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """Under `tree`, another agent's session is unknown to every tool, in text and shape
        (R-T2)."""
        seed(database_url)

        async def scenario() -> None:
            async with connected(database_url, tmp_path, "--caller", LEAD) as client:
                for tool in ("session_status", "session_watch", "session_unwatch"):
                    hidden = await call(client, tool, {"sessionKey": "agent:other:elsewhere"})
                    missing = await call(client, tool, {"sessionKey": "agent:other:nowhere"})
                    assert json.loads(hidden[2].replace("elsewhere", "nowhere")) == missing[0]

        run(scenario)


class TestMadeUpNames:
    """A name the client made up is echoed and logged bounded and on one line, as
    `svc.tools.call` shows one (R-T1, R-N1)."""

    MADE_UP = "x\u202e\x07\x1b[31m" + "x" * 5_000
    SHOWN = "x\\u202e\\u0007\\u001b[31m" + "x" * 56 + "…"

    def test_an_unknown_tools_name_is_echoed_bounded_and_escaped(self, tmp_path: Path) -> None:
        """R-T1: a 5,000-character tool name with control and format characters: the error quotes
        its first 64 characters, those escaped as `\\uXXXX`, then `…`."""
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        seed(url)

        async def scenario() -> None:
            async with connected(url, tmp_path, "--caller", LEAD) as client:
                result, failed, _ = await call(client, self.MADE_UP)
                assert failed and result["error"]["code"] == "unknown_tool"
                known = ", ".join(OFFERED)
                assert result["error"]["message"] == f"Unknown tool: {self.SHOWN} (known: {known})"

        run(scenario)

    def test_an_unknown_tools_name_is_logged_escaped(self, tmp_path: Path) -> None:
        """R-T1: the `tool_failed` event carries the name as the error shows it, never in full
        with its raw characters."""
        with open_service(f"sqlite:///{tmp_path / 'sessions.db'}") as svc:
            surface = McpSurface(svc, lambda: LEAD)
            with capture_logs() as logs:
                surface.call(self.MADE_UP, {})
        assert [(e["event"], e["tool"], e["code"]) for e in logs] == [
            ("tool_failed", self.SHOWN, "unknown_tool")
        ]


class TestCaller:
    def test_without_a_caller_a_call_says_how_to_give_one(self, tmp_path: Path) -> None:
        """No --caller and no Claude Code session: a clear typed error, on every call."""
        url = f"sqlite:///{tmp_path / 'sessions.db'}"

        async def scenario() -> None:
            async with connected(url, tmp_path / "state") as client:
                result, failed, _ = await call(client, "session_status")
                assert failed and result["error"]["code"] == "invalid_caller"
                assert "--caller" in result["error"]["message"]

        run(scenario)

    def test_under_claude_code_the_caller_is_the_session_that_started_the_server(
        self, tmp_path: Path
    ) -> None:
        """The caller follows the Claude Code process's current session: the one its
        SessionStart hook recorded (after `/clear` too), else $CLAUDE_CODE_SESSION_ID."""
        url, state = f"sqlite:///{tmp_path / 'sessions.db'}", tmp_path / "state"
        env = {"CLAUDE_CODE_SESSION_ID": "from-env"}

        async def current(client: object) -> str:
            status, _, _ = await call(client, "session_status", {"sessionKey": "current"})  # type: ignore[arg-type]
            return str(status.get("sessionKey") or status["error"]["message"])

        async def scenario() -> None:
            async with connected(url, state, env=env) as client:
                assert "from-env" in await current(client)
                # The hook and the server are children of one process, as under Claude Code.
                for session, source in (("first-id", "startup"), ("second-id", "clear")):
                    event = fixture("session_start", session_id=session, source=source)
                    assert run_hook(event, url=url, state_dir=state).returncode == 0
                    assert await current(client) == lead_key(session)

        run(scenario)


class TestNoticesResource:
    def test_subscribers_hear_when_another_process_records_a_human_turn(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """A subscriber to the notices resource gets `notifications/resources/updated` when a
        human turn recorded by another process opens a notice for the caller (R-N5, R-N7:
        PostgreSQL's NOTIFY; SQLite's bounded poll), once per notice."""
        state = tmp_path / "state"
        for session in ("lead-1", "worker-1"):
            event = fixture("session_start", session_id=session)
            assert run_hook(event, url=database_url, state_dir=state).returncode == 0
        updates = Updates()

        async def scenario() -> None:
            async with connected(
                database_url,
                state,
                "--caller",
                lead_key("lead-1"),
                "--visibility",
                "agent",
                updates=updates,
            ) as client:
                await subscribe(client)
                watched, _, _ = await call(
                    client, "session_watch", {"sessionKey": lead_key("worker-1")}
                )
                assert watched["watched"] is True
                human = fixture("user_prompt_submit", session_id="worker-1")
                assert run_hook(human, url=database_url, state_dir=state).returncode == 0
                await updates.wait_for(1)
                assert updates.uris == [NOTICES]
                read = await client.read_resource(NOTICES)
                body = json.loads(read.contents[0].text)  # type: ignore[union-attr]
                assert body["sessionKey"] == lead_key("lead-1")
                assert [n.split('"')[1] for n in body["notices"]] == [lead_key("worker-1")]
                # A second turn while the notice is pending is no news (R-N2).
                assert run_hook(human, url=database_url, state_dir=state).returncode == 0
                drained, _, _ = await call(client, "session_notices", {"drain": True})
                assert len(drained["notices"]) == 1
                await updates.wait_for(2)  # the drain reopened one fresh notice (R-N3)
                assert updates.uris == [NOTICES, NOTICES]

        run(scenario)

    def test_listen_streams_carry_the_update_on_the_2026_protocol(self, tmp_path: Path) -> None:
        """A client on the 2026-07-28 protocol subscribes with `subscriptions/listen` and gets
        the same update."""
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        seed(url)

        async def scenario() -> None:
            async with connected(
                url, tmp_path, "--caller", LEAD, "--visibility", "agent", mode="auto"
            ) as client:
                assert client.protocol_version == "2026-07-28"
                watched, _, _ = await call(client, "session_watch", {"sessionKey": WORKER})
                assert watched["watched"] is True
                async with client.listen(resource_subscriptions=[NOTICES]) as events:
                    with open_service(url) as other:
                        other.record_human_direct_message(WORKER, channel="terminal")
                    async for event in events:
                        assert getattr(event, "uri", None) == NOTICES
                        break

        run(scenario)


class TestStdout:
    def test_stdout_carries_protocol_messages_only_even_with_logs_on(self, tmp_path: Path) -> None:
        """With --verbose the service logs every call, on stderr: each line on stdout is a
        JSON-RPC message."""
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        seed(url)
        requests = [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "session_status", "arguments": {"changesSince": 0}},
            },
        ]
        params = server_params(url, tmp_path, "--caller", LEAD, "--verbose")
        server = subprocess.Popen(
            [params.command, *params.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=params.env,
        )
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(x) for x in server.stdout], daemon=True).start()  # type: ignore[union-attr]
        try:
            assert server.stdin is not None
            server.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
            server.stdin.flush()
            answers = [json.loads(lines.get(timeout=30)) for _ in range(2)]
        finally:
            server.stdin.close()  # type: ignore[union-attr]
            server.wait(timeout=30)
        stderr = server.stderr.read()  # type: ignore[union-attr]
        assert [a["id"] for a in answers] == [1, 2]
        assert answers[1]["result"]["structuredContent"]["sessionKey"] == LEAD
        assert lines.empty()
        assert "tool_completed" in stderr


class TestHookRelay:
    def test_hooks_under_the_servers_claude_code_process_record_through_the_server(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """The lead/worker story under one Claude Code process: a hook run whose parent also
        started the MCP server hands its signal to the server (which has the store open) and
        prints the notices it drained, the hook process itself opening no service (its
        --verbose stderr shows no service events); session_status over MCP returns the delta."""
        state = tmp_path / "state"
        url = database_url

        async def scenario() -> None:
            async with connected(
                url, state, "--visibility", "agent", env={"CLAUDE_CODE_SESSION_ID": "lead-1"}
            ) as client:
                # The server is a child of this process, as it is of Claude Code's.
                host = process_identity(os.getpid())
                assert host is not None
                path = socket_path(ClaudeState(state), host)
                with anyio.fail_after(30):
                    while not path.exists():
                        await anyio.sleep(0.02)
                for session in ("lead-1", "worker-1"):
                    done = run_hook(
                        fixture("session_start", session_id=session),
                        url=url,
                        state_dir=state,
                        args=("--verbose",),
                    )
                    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
                # The lead session runs in this process again (as after a restart).
                start = fixture("session_start", session_id="lead-1", source="resume")
                assert run_hook(start, url=url, state_dir=state).returncode == 0
                watched, _, _ = await call(
                    client, "session_watch", {"sessionKey": lead_key("worker-1")}
                )
                assert watched["watched"] is True
                human = fixture("user_prompt_submit", session_id="worker-1")
                assert run_hook(human, url=url, state_dir=state, args=("--verbose",)).stderr == ""
                done = run_hook(
                    fixture("user_prompt_submit", session_id="lead-1"),
                    url=url,
                    state_dir=state,
                    args=("--verbose",),
                )
                assert done.stderr == ""
                assert done.context is not None and lead_key("worker-1") in done.context
                since = int(done.context.rstrip(".").rsplit(" ", 1)[1])
                status, failed, _ = await call(
                    client,
                    "session_status",
                    {"sessionKey": lead_key("worker-1"), "changesSince": since},
                )
                assert not failed
                assert [e["kind"] for e in status["stateChanges"]["events"]] == [
                    "human_direct_message"
                ]

        run(scenario)

    def test_a_malformed_relay_message_is_refused_and_the_server_goes_on(
        self, tmp_path: Path
    ) -> None:
        """Whatever arrives on the hook socket is checked like any input: a bad message gets
        an error answer (the hook would then record in-process) and records nothing."""
        url, state = f"sqlite:///{tmp_path / 'sessions.db'}", tmp_path / "state"
        host = process_identity(os.getpid())
        assert host is not None
        path = socket_path(ClaudeState(state), host)
        bad = [
            b"not json\n",
            json.dumps(
                {"signal": {"event": "Stop"}, "agent": "claude", "databaseUrl": url}
            ).encode()
            + b"\n",
            json.dumps(
                {
                    "signal": fixture("session_start"),
                    "agent": "claude",
                    "databaseUrl": "sqlite:///elsewhere.db",
                }
            ).encode()
            + b"\n",
            json.dumps(
                {
                    "signal": {
                        "event": "SessionStart",
                        "session_id": "x",
                        "at": 1,
                        "source": "startup",
                    },
                    "agent": "a:b",
                    "databaseUrl": url,
                }
            ).encode()
            + b"\n",
        ]

        async def ask(message: bytes) -> dict[str, object]:
            async with await anyio.connect_unix(str(path)) as stream:
                await stream.send(message)
                reply: dict[str, object] = json.loads(await stream.receive())
                return reply

        async def scenario() -> None:
            async with connected(url, state) as client:
                with anyio.fail_after(30):
                    while not path.exists():
                        await anyio.sleep(0.02)
                for message in bad:
                    assert "error" in await ask(message)
                assert (await call(client, "session_notices"))[1]  # still serving (no caller)

        run(scenario)
        with open_service(url) as svc:
            assert svc.session_rows() == []


def test_a_bad_caller_is_refused_at_start(tmp_path: Path) -> None:
    """`--caller` that is not a session key: exit 2 and one line on stderr."""
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    params = server_params(url, tmp_path, "--caller", "two\nlines")
    done = subprocess.run(
        [params.command, *params.args],
        capture_output=True,
        text=True,
        timeout=60,
        env=params.env,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert len(done.stderr.splitlines()) == 1 and "--caller" in done.stderr
