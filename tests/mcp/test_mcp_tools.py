"""The MCP server's own tools (`session_watch`, `session_unwatch`) on the surface the server
calls, on both backends."""

from __future__ import annotations

import pytest

from session_awareness.application import open_service
from session_awareness.infrastructure.mcp_tools import McpSurface

LEAD = "agent:main:main"
#: A bare session key that is the word the tools read as "the caller".
LITERAL = "current"


class TestCurrent:
    @pytest.mark.parametrize("tool", ["session_watch", "session_unwatch"])
    def test_current_names_the_callers_own_session_never_a_session_keyed_current(
        self, tool: str, database_url: str
    ) -> None:
        """R-W3, R-T1: `"current"` is the caller, as in every session tool; watching it is the
        refused self-watch (`false`, no cursor), even when a visible session is keyed
        `current` in the caller's agent, which is left unwatched."""
        with open_service(database_url, visibility="agent") as svc:
            svc.open_session(LEAD)
            svc.open_session(LITERAL, agent_id="main")
            surface = McpSurface(svc, lambda: LEAD)
            verb = "watched" if tool == "session_watch" else "unwatched"
            assert surface.call(tool, {"sessionKey": "current"}) == {
                "sessionKey": LEAD,
                verb: False,
            }
            assert svc.read_model.cursors_of_watcher(LEAD, pending_only=False) == []
            assert svc.read_model.cursors_of_watcher(LITERAL, pending_only=False) == []

    def test_current_is_the_caller_when_no_session_is_keyed_current(
        self, database_url: str
    ) -> None:
        """R-W3, R-T1: without a session keyed `current`, the word still names the caller
        (a refused self-watch), never `Unknown sessionKey: current`."""
        with open_service(database_url) as svc:
            svc.open_session(LEAD)
            surface = McpSurface(svc, lambda: LEAD)
            assert surface.call("session_watch", {"sessionKey": "current"}) == {
                "sessionKey": LEAD,
                "watched": False,
            }
