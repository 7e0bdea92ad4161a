"""The MCP server answers `initialize` while it imports the SDK and opens the store (R-M4):
the answer is the SDK's own, every later request is answered as before, and a store that
cannot be opened still ends the server with one line on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from session_awareness import __version__
from session_awareness.application import open_service
from session_awareness.infrastructure.mcp_handshake import HANDSHAKE_VERSIONS, initialize_result
from tests.mcp.helpers import DEADLINE, RawServer, call, connected, run

LEAD = "agent:main:main"
DOWN = "postgresql://nobody@127.0.0.1:9/none?connect_timeout=1"
PING = {"jsonrpc": "2.0", "id": "first", "method": "ping"}


def initialize(offered: str, request_id: int | str = 0) -> bytes:
    request = {**RawServer.INITIALIZE, "id": request_id}
    request["params"] = {**RawServer.INITIALIZE["params"], "protocolVersion": offered}  # type: ignore[dict-item]
    return json.dumps(request).encode()


class TestInitializeBeforeTheStoreOpens:
    def test_a_store_that_cannot_be_opened_is_reported_after_initialize_is_answered(
        self, tmp_path: Path
    ) -> None:
        """The answer to `initialize` does not wait for the store: with a store that cannot
        be opened it still comes, and the server then exits 2 with one line on stderr, as
        before (R-M4)."""
        with RawServer(DOWN, tmp_path / "state") as server:
            server.send(initialize("2025-11-25"))
            answer = server.answer()
            assert answer["id"] == 0
            assert answer["result"]["serverInfo"] == {
                "name": "session-awareness",
                "version": __version__,
            }
            assert server.process.wait(timeout=DEADLINE) == 2
            lines = server.stderr().splitlines()
        assert len(lines) == 1 and "session store unavailable" in lines[0]

    @pytest.mark.parametrize("offered", [*HANDSHAKE_VERSIONS, "2026-07-28", "1999-01-01"])
    def test_the_early_answer_is_the_one_the_sdk_gives(self, offered: str, tmp_path: Path) -> None:
        """For every revision a client may offer, the answer given before the SDK is loaded
        is the one the SDK's server gives when `initialize` is not the first line (a ping
        first leaves it to the SDK)."""
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        with RawServer(url, tmp_path / "state") as early:
            early.send(initialize(offered))
            early_answer = early.answer()
        with RawServer(url, tmp_path / "state") as sdk:
            sdk.send(json.dumps(PING).encode())
            assert sdk.answer()["id"] == "first"
            sdk.send(initialize(offered))
            sdk_answer = sdk.answer()
        assert early_answer == sdk_answer
        assert early_answer["result"] == initialize_result(offered, __version__)

    def test_the_revisions_are_the_sdks(self) -> None:
        """The revisions answered early are those the SDK negotiates through `initialize`."""
        assert HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS


class TestEveryLaterRequest:
    def test_each_request_is_answered_once_after_an_early_initialize(self, tmp_path: Path) -> None:
        """The SDK's own answer to the `initialize` it is handed again never reaches the
        wire: the next line is the answer to the next request (R-M1, R-M4)."""
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        with RawServer(url, tmp_path / "state") as server:
            server.initialize()
            server.send(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}')
            listed = server.answer()
            server.send(b'{"jsonrpc": "2.0", "id": 2, "method": "ping"}')
            pinged = server.answer()
        assert listed["id"] == 1 and listed["result"]["tools"]
        assert pinged == {"jsonrpc": "2.0", "id": 2, "result": {}}

    def test_the_official_client_works_on_both_backends(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """Through the SDK's own client (which sends `initialize` first, so it is answered
        early): the server names itself and a tool call reads the store (R-M4)."""
        with open_service(database_url) as svc:
            svc.open_session(LEAD)

        async def scenario() -> None:
            async with connected(database_url, tmp_path / "state", "--caller", LEAD) as client:
                assert client.server_info is not None
                assert client.server_info.name == "session-awareness"
                status, failed, _ = await call(client, "session_status", {"sessionKey": LEAD})
                assert not failed and status["sessionKey"] == LEAD
                with anyio.fail_after(DEADLINE):
                    listed = await client.list_tools()
                assert "session_status" in [tool.name for tool in listed.tools]

        run(scenario)
