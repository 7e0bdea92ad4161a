"""The notices resource tells its subscribers of every notice that opens for the caller,
ambient ones included, on both backends (R-M3, R-W7)."""

from __future__ import annotations

import json
from pathlib import Path

from mcp import Client

from session_awareness.application import open_service
from tests.mcp.helpers import NOTICES, Updates, call, connected, logged, run, subscribe

MAIN, TEAM = "agent:main:main", "agent:main:team"


def notice(target: str, since: int) -> str:
    return (
        f'Session "{target}" changed (other actor). Reconcile before acting: '
        f'session_status sessionKey "{target}" changesSince {since}.'
    )


class TestAmbientNotices:
    def test_an_ambient_notice_updates_the_resource_though_it_wakes_no_one(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """R-M3, R-W7: a human turn on a group, recorded by another process, opens an ambient
        notice for the agent's main session, which publishes no wake (no NOTIFY on
        PostgreSQL); the server serving main still tells its subscribers, and again when a
        drain through it reopens the notice (R-N3), itself a notice that wakes no one. The
        turns come after the server's start-up sweep: one that ran after them would raise
        the notice to M (ADR 034, R-N6), and the drain would then leave nothing to reopen."""
        with open_service(database_url) as svc:
            svc.open_session(MAIN)
            svc.open_session(TEAM, kind="group")
        updates = Updates()
        log = tmp_path / "server.log"

        async def scenario() -> None:
            with log.open("w") as errlog:
                async with connected(
                    database_url, tmp_path, "--caller", MAIN, "--verbose", updates=updates,
                    errlog=errlog,
                ) as client:  # fmt: skip
                    await subscribe(client)
                    await logged(log, "notices_swept")
                    await turns_then_drain(client)

        async def turns_then_drain(client: Client) -> None:
            with open_service(database_url) as other:
                for _ in range(2):
                    other.record_human_direct_message(TEAM, channel="slack")
            await updates.wait_for(1, timeout=15)
            read = await client.read_resource(NOTICES)
            body = json.loads(read.contents[0].text)  # type: ignore[union-attr]
            assert body == {"sessionKey": MAIN, "notices": [notice(TEAM, 0)]}
            drained, _, _ = await call(client, "session_notices", {"drain": True})
            assert drained["notices"] == [notice(TEAM, 0)]
            await updates.wait_for(2, timeout=15)  # reopened for the second turn
            assert updates.uris == [NOTICES, NOTICES]

        run(scenario)
