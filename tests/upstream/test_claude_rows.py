"""Which transcript rows are a human's turns (R-U3)."""

from __future__ import annotations

from typing import Any

import pytest

from session_awareness.infrastructure.claude_code import human_text
from tests.upstream.claude_files import user_row

TOOL_RESULT = [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]
TEXT_BLOCKS = [{"type": "text", "text": " Ship\n it "}, {"type": "text", "text": "now"}]


class TestHumanRows:
    @pytest.mark.parametrize(
        "row",
        [
            user_row(TOOL_RESULT, "u"),
            user_row("Caveat: generated while running local commands.", "u", isMeta=True),
            user_row("This session is being continued from a previous conversation …", "u"),
            user_row("[Inter-session message from agent:main:main] hi", "u"),
            user_row("a sub-agent's prompt", "u", isSidechain=True),
            user_row("   ", "u"),
            user_row([{"type": "image", "source": {}}], "u"),
            {"type": "assistant", "message": {"role": "assistant", "content": "hello"}},
            {"type": "system", "subtype": "stop_hook_summary"},
            {"type": "user"},
        ],
        ids=[
            "tool_result", "meta", "compaction", "inter_session", "sidechain", "blank",
            "image_only", "assistant", "system", "no_message",
        ],
    )  # fmt: skip
    def test_rows_that_are_not_a_humans_turn(self, row: dict[str, Any]) -> None:
        """R-U3: only user rows with text a human typed count."""
        assert human_text(row) is None

    def test_a_string_content_is_a_turn_normalised(self) -> None:
        """R-U3: whitespace is normalised for the self-echo comparison."""
        assert human_text(user_row("  Use   the v2\tendpoint \n", "u")) == "Use the v2 endpoint"

    def test_text_blocks_are_a_turn(self) -> None:
        """R-U3: content made of `text` blocks is a human turn."""
        assert human_text(user_row(TEXT_BLOCKS, "u")) == "Ship it now"
