"""The MCP server's wire: every request that has an id is answered, whatever the line holds
(R-M1), over raw stdio and through the official SDK's client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from session_awareness.infrastructure.mcp_refusals import answers_for
from session_awareness.infrastructure.mcp_stdio import MAX_LINE
from tests.mcp.helpers import RawServer, call, connected, run

LEAD = "agent:main:main"
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602


def tools_call(request_id: object, params: str) -> bytes:
    """A `tools/call` line whose params are given as JSON text, written as a client would."""
    return (
        f'{{"jsonrpc": "2.0", "id": {json.dumps(request_id)}, "method": "tools/call", '
        f'"params": {params}}}'
    ).encode()


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


#: A line, and the (id, code) of each answer it gets.
BROKEN: dict[str, tuple[bytes, list[tuple[Any, int]]]] = {
    "a lone surrogate in the arguments": (
        tools_call(
            1, r'{"name": "session_status", "arguments": {"sessionKey": "agent:main:\ud800"}}'
        ),
        [(1, PARSE_ERROR)],
    ),
    "a lone surrogate in the tool name": (
        tools_call("two", r'{"name": "session_\udfff", "arguments": {}}'),
        [("two", PARSE_ERROR)],
    ),
    "params that are a string": (tools_call(3, '"session_status"'), [(3, INVALID_PARAMS)]),
    "arguments nested 5,000 deep": (
        tools_call(4, f'{{"name": "session_status", "arguments": {{"x": {nested(5_000)}}}}}'),
        [(4, PARSE_ERROR)],
    ),
    "text that is not JSON": (b"session_status please", [(None, PARSE_ERROR)]),
    "JSON cut short after its id": (
        b'{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"na',
        [(6, PARSE_ERROR)],
    ),
    "a request without a method": (b'{"jsonrpc": "2.0", "id": 7}', [(7, INVALID_REQUEST)]),
    "a batch of two requests": (
        b'[{"jsonrpc": "2.0", "id": 8, "method": "ping"},'
        b' {"jsonrpc": "2.0", "id": "nine", "method": "ping"}]',
        [(8, INVALID_REQUEST), ("nine", INVALID_REQUEST)],
    ),
    "an empty batch": (b"[]", [(None, INVALID_REQUEST)]),
    "a line longer than the server reads": (
        tools_call(
            10,
            '{"name": "session_status", "arguments": {"sessionKey": "'
            + "k" * (MAX_LINE + 1)
            + '"}}',
        ),
        [(10, INVALID_REQUEST)],
    ),
}


class TestEveryRequestIsAnswered:
    @pytest.mark.parametrize("case", list(BROKEN))
    def test_a_broken_request_gets_a_json_rpc_error_and_the_server_goes_on(
        self, case: str, tmp_path: Path
    ) -> None:
        """R-M1: a line the SDK cannot parse or validate is answered with a JSON-RPC error
        carrying the request's id (`null` when the line shows none), and the next request is
        served as usual."""
        line, expected = BROKEN[case]
        url = f"sqlite:///{tmp_path / 's.db'}"
        with RawServer(url, tmp_path, "--caller", LEAD, "--log-format", "json") as server:
            server.initialize()
            server.send(line)
            answers = [server.answer() for _ in expected]
            assert [(a["id"], a["error"]["code"]) for a in answers] == expected
            assert all(a["error"]["message"] and a["error"]["data"] for a in answers)
            server.send(tools_call(99, '{"name": "session_status", "arguments": {}}'))
            after = server.answer()
            assert after["id"] == 99
            assert after["result"]["structuredContent"]["error"]["code"] == "unknown_session"
            server.process.stdin.close()  # type: ignore[union-attr]
            assert server.process.wait(timeout=30) == 0
        refused = [
            (e["id"], e["code"]) for e in server.events() if e["event"] == "mcp_message_refused"
        ]
        assert refused == expected  # at WARNING: shown without --verbose

    def test_a_long_line_within_the_bound_is_served(self, tmp_path: Path) -> None:
        """R-M1: a call of a few MiB, under the line bound, is read whole and answered by
        the tool (here a typed error for the over-long key)."""
        key = "k" * (MAX_LINE // 2)
        with RawServer(f"sqlite:///{tmp_path / 's.db'}", tmp_path, "--caller", LEAD) as server:
            server.initialize()
            server.send(
                tools_call(
                    1, json.dumps({"name": "session_status", "arguments": {"sessionKey": key}})
                )
            )
            answer = server.answer()
            assert answer["id"] == 1
            assert answer["result"]["structuredContent"]["error"]["code"] == "invalid_input"

    def test_a_broken_notification_or_response_is_never_answered(self, tmp_path: Path) -> None:
        """R-M1: JSON-RPC answers requests only: a malformed notification or response is
        logged (`mcp_message_dropped`), and the next answer is the next request's."""
        url = f"sqlite:///{tmp_path / 's.db'}"
        with RawServer(url, tmp_path, "--caller", LEAD, "--log-format", "json") as server:
            server.initialize()
            server.send(b'{"jsonrpc": "2.0", "method": "notifications/x", "params": "a"}')
            server.send(b'{"jsonrpc": "2.0", "id": 5, "result": "not an object"}')
            server.send(b'[{"jsonrpc": "2.0", "method": "notifications/x"}]')
            server.send(b'{"jsonrpc": "2.0", "id": 6, "method": "ping"}')
            assert server.answer() == {"jsonrpc": "2.0", "id": 6, "result": {}}
            server.process.stdin.close()  # type: ignore[union-attr]
            assert server.process.wait(timeout=30) == 0
        dropped = [e for e in server.events() if e["event"] == "mcp_message_dropped"]
        assert len(dropped) == 3


class TestTheIdOfALineTooDeepToParse:
    @pytest.mark.parametrize(
        ("line", "found"),
        [
            (
                f'{{"jsonrpc": "2.0", "method": "m", "params": {{"a": {nested(5_000)}}}, "id": 7}}',
                7,
            ),
            (f'{{"method": "id", "params": {{"id": 1, "x": {nested(5_000)}}}, "id": "s"}}', "s"),
            (f'{{"params": {{"q": "\\"id\\": 3", "x": {nested(5_000)}}}, "id": 4}}', 4),
            (f'{{"params": {{"x": {nested(5_000)}}}}}', None),
            (f'[{{"id": 5, "x": {nested(5_000)}}}]', None),
        ],
    )
    def test_only_the_top_level_id_is_echoed(self, line: str, found: object) -> None:
        """R-M1: when nothing parses a line, its id is read from the top-level object alone,
        never from a nested object, a string or a value that spells `id`."""
        answers = answers_for(line, None)
        assert [(a.id, a.error.code) for a in answers] == [(found, PARSE_ERROR)]


class TestThroughTheSdkClient:
    def test_arguments_nested_past_the_servers_parser_raise_in_the_client(
        self, tmp_path: Path
    ) -> None:
        """R-M1: the official client writes arguments nested 250 deep, which the server's
        parser refuses: the call raises a parse error at once instead of waiting forever,
        and the next call is answered."""
        url = f"sqlite:///{tmp_path / 's.db'}"

        async def scenario() -> None:
            async with connected(url, tmp_path, "--caller", LEAD) as client:
                deep: list[object] = []
                for _ in range(250):
                    deep = [deep]
                with pytest.raises(MCPError) as raised:
                    await client.call_tool("session_status", {"sessionKey": deep})
                assert raised.value.error.code == PARSE_ERROR
                result, failed, _ = await call(client, "session_status")
                assert failed and result["error"]["code"] == "unknown_session"

        run(scenario)
