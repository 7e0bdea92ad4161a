"""The notice tools (`session_notices`, `session_watch`, `session_unwatch`) are declared,
validated and answered by the tool catalog, through the one envelope of `svc.tools.call`:
a host that offers them (the MCP server) only names which tools it offers."""

from __future__ import annotations

import ast
from pathlib import Path

from session_awareness.application import open_service
from session_awareness.application.tools import TOOLS, SessionTools
from session_awareness.application.tools.catalog import NOTICE_TOOLS, offered_tools

LEAD, CHILD = "agent:main:main", "agent:main:subagent:child"
#: What a bare service offers an MCP client: no dispatcher, no spawner.
UNPORTED = ["session_status", "sessions_list", "subagents", "sessions_history"]
ROOT = Path(__file__).resolve().parents[2]


class TestTheCatalogAnswersTheNoticeTools:
    def test_a_host_offering_them_gets_their_answers_from_the_catalog(
        self, database_url: str
    ) -> None:
        """R-W2, R-W6, R-N3: watch, the notice, drain, unwatch, through `SessionTools` alone."""
        with open_service(database_url, visibility="agent") as svc:
            svc.open_session(LEAD)
            svc.open_session(CHILD)
            tools = SessionTools(svc, {**TOOLS, **NOTICE_TOOLS})
            assert tools.call("session_watch", {"sessionKey": CHILD}, caller=LEAD) == {
                "sessionKey": CHILD, "watched": True}  # fmt: skip
            svc.record_human_direct_message(CHILD, channel="tui")
            pending = tools.call("session_notices", "{}", caller=LEAD)
            assert pending["drained"] is False and len(pending["notices"]) == 1
            drained = tools.call("session_notices", '{"drain": true}', caller=LEAD)
            assert drained["notices"] == pending["notices"] and drained["drained"] is True
            assert tools.call("session_notices", {}, caller=LEAD)["notices"] == []
            assert tools.call("session_unwatch", {"sessionKey": CHILD}, caller=LEAD) == {
                "sessionKey": CHILD, "unwatched": True}  # fmt: skip

    def test_their_refusals_are_the_rules_texts(self, database_url: str) -> None:
        """R-T1, R-T2: a bad `drain` reads as its rule; an invisible session as a missing one;
        a caller that is no key is the host's mistake."""
        with open_service(database_url, visibility="self") as svc:
            svc.open_session(LEAD)
            svc.open_session(CHILD)
            tools = SessionTools(svc, {**TOOLS, **NOTICE_TOOLS})
            assert tools.call("session_notices", {"drain": "yes"}, caller=LEAD) == {
                "error": {"code": "invalid_input", "field": "drain",
                          "message": "drain must be a boolean (true or false)"}}  # fmt: skip
            invisible = tools.call("session_watch", {"sessionKey": CHILD}, caller=LEAD)
            missing = tools.call("session_watch", {"sessionKey": "agent:main:nobody"}, caller=LEAD)
            assert invisible["error"]["code"] == missing["error"]["code"] == "unknown_session"
            refused = tools.call("session_notices", {}, caller="")
            assert refused["error"]["code"] == "invalid_caller"

    def test_the_service_alone_still_offers_only_the_session_tools(self) -> None:
        """R-T1: `svc.tools` answers the session tools; the notice tools are a host's choice."""
        with open_service("sqlite:///:memory:") as svc:
            answer = svc.tools.call("session_notices", {}, caller=LEAD)
            assert answer["error"]["code"] == "unknown_tool"
            assert list(offered_tools(svc)) == [*UNPORTED, *NOTICE_TOOLS]


def test_the_mcp_server_declares_validates_and_answers_no_tool_itself() -> None:
    """R-T1: the server's module holds no input model, no validation and no tool's answer:
    one envelope, the catalog's."""
    tree = ast.parse((ROOT / "infrastructure" / "mcp_tools.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names}  # fmt: skip
    classes = [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    assert "ValidationError" not in imported and "Field" not in imported
    assert classes == ["McpSurface"]
