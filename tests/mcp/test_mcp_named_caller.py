"""A server started for a named caller (`--caller KEY`, as Codex's configuration starts it:
no hook of ours opens its session) serves that caller as a session of the store, so its
watches are taken and its notices arrive (R-A1, R-W2)."""

from __future__ import annotations

from pathlib import Path

from session_awareness.application import open_service
from tests.mcp.helpers import call, connected, run

CALLER = "agent:codex:main"
WORKER = "agent:gemini:gemini:w1"


class TestNamedCaller:
    def test_a_caller_no_hook_opened_watches_and_hears_of_a_change(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """R-A1: started with `--caller agent:codex:main` on a store that has never heard of
        it, the server opens the caller's session, so the caller's `session_watch` of
        another CLI's session is taken (it was `unknown_session`, naming the caller), and a
        human turn there is the caller's one notice."""
        with open_service(database_url) as svc:
            svc.open_session(WORKER, agent_id="gemini", kind="main")

        async def scenario() -> None:
            async with connected(database_url, tmp_path, "--caller", CALLER,
                                 "--visibility", "all") as client:  # fmt: skip
                watched, failed, text = await call(client, "session_watch",
                                                   {"sessionKey": WORKER})  # fmt: skip
                assert (failed, watched) == (False, {"sessionKey": WORKER, "watched": True}), text
                with open_service(database_url) as svc:
                    svc.record_human_direct_message(WORKER, channel="gemini-cli")
                notices, failed, _ = await call(client, "session_notices", {"drain": True})
                assert (failed, notices["sessionKey"]) == (False, CALLER)
                [notice] = notices["notices"]
                assert notice.startswith(f'Session "{WORKER}" changed (other actor).')

        run(scenario)
        with open_service(database_url) as svc:
            assert {row.key for row in svc.session_rows()} == {CALLER, WORKER}
