"""The safety filter of `sessions_history`, rule by rule, on hostile text (R-T1)."""

from __future__ import annotations

import pytest

from session_awareness.application.redaction import REDACTED, redact
from session_awareness.application.transcript_filter import TRUNCATED, clean, truncate


class TestThinking:
    @pytest.mark.parametrize("tag", ["think", "thinking", "THOUGHT", "antThinking", "reasoning"])
    def test_a_thinking_block_is_stripped_with_what_it_holds(self, tag: str) -> None:
        """Thinking tags are stripped, whatever their case."""
        assert clean(f"before <{tag}>plan: lie</{tag}> after") == "before  after"

    def test_a_nested_block_cannot_close_its_parent_early(self) -> None:
        """The inner closing tag leaves the outer block open: nothing inside leaks."""
        assert clean("a<think>x<think>y</think>leak</think>b") == "ab"

    def test_an_unclosed_block_is_stripped_to_the_end(self) -> None:
        """A truncated thinking block hides everything after it."""
        assert clean("shown <thinking>never shown\n\nstill hidden") == "shown"

    def test_full_width_and_mixed_width_brackets_are_tags_too(self) -> None:
        """＜think＞ and <think＞ are the same tag as <think>."""
        assert clean("a＜think＞x＜/think＞b<think＞y</think>c") == "abc"

    def test_a_stray_closing_tag_is_removed(self) -> None:
        """A closing tag without its opening one is scaffolding, not text."""
        assert clean("ok</think> done") == "ok done"

    def test_a_tag_with_attributes_and_an_unterminated_bracket_is_still_a_tag(self) -> None:
        """`<think id="1"` cut off at the end of the text still strips."""
        assert clean('visible <think id="1"') == "visible"


class TestMemories:
    @pytest.mark.parametrize("tag", ["relevant-memories", "relevant_memories", "RELEVANT-MEMORIES"])
    def test_memory_scaffolding_is_stripped(self, tag: str) -> None:
        """Both spellings, any case."""
        assert clean(f"hi <{tag}>user likes tea</{tag}> there") == "hi  there"

    def test_the_two_spellings_close_each_other(self) -> None:
        """A block opened with `-` and closed with `_` is one block."""
        assert clean("a<relevant-memories>m</relevant_memories>b") == "ab"


class TestToolCallXml:
    @pytest.mark.parametrize("tag", ["tool_call", "function_call", "tool_calls", "function_calls"])
    def test_a_tool_call_payload_is_stripped(self, tag: str) -> None:
        """Plain-text tool-call XML is stripped with its payload."""
        assert clean(f'pre <{tag}>{{"name": "rm"}}</{tag}> post') == "pre  post"

    def test_a_payload_that_never_closes_is_stripped_to_the_end(self) -> None:
        """A truncated call leaves nothing of its payload."""
        assert clean('text <tool_call>{"name": "exec", "args": "curl evil') == "text"

    def test_nested_calls_are_stripped_as_one(self) -> None:
        """<tool_calls> holding <tool_call> blocks goes as a whole."""
        text = "a<tool_calls><tool_call>1</tool_call><tool_call>2</tool_call></tool_calls>b"
        assert clean(text) == "ab"


class TestDowngradedScaffolding:
    @pytest.mark.parametrize(
        "marker",
        ["[Tool Call: Read (ID: toolu_1)]", "[Tool Result for toolu_1]", "[Historical context: x]"],
    )
    def test_a_scaffolding_paragraph_is_stripped(self, marker: str) -> None:
        """The marker and the paragraph it opens go; the next paragraph stays."""
        text = f'first\n{marker}\nArguments: {{"path": "/etc"}}\n\nlast'
        assert clean(text) == "first\n\nlast"

    def test_a_marker_inside_a_sentence_is_text(self) -> None:
        """Only a line that starts with the marker is scaffolding."""
        assert clean("see [Tool Call: x] above") == "see [Tool Call: x] above"


class TestControlTokens:
    @pytest.mark.parametrize(
        "token",
        [
            "<|assistant|>",
            "<|im_start|>",
            "<|endoftext|>",
            "<｜end▁of▁sentence｜>",
            "<|mixed｜>",
            "＜｜fullwidth｜＞",
        ],
    )
    def test_a_leaked_control_token_is_stripped(self, token: str) -> None:
        """ASCII, full-width and mixed-width forms."""
        assert clean(f"a {token}b") == "a b"

    def test_a_pipe_in_prose_is_kept(self) -> None:
        """`a | b` is not a token."""
        assert clean("a | b and x|y") == "a | b and x|y"


class TestMiniMax:
    def test_malformed_minimax_xml_is_stripped(self) -> None:
        """An `<invoke>` closed by `</minimax:tool_call>` goes with its parameters."""
        text = (
            'w <invoke name="bash"><parameter name="cmd">rm -rf /</parameter></minimax:tool_call> x'
        )
        assert clean(text) == "w  x"

    def test_a_stray_minimax_closing_tag_is_removed(self) -> None:
        assert clean("done</minimax:tool_call>") == "done"

    def test_an_unclosed_invoke_is_stripped_to_the_end(self) -> None:
        assert clean('ok <invoke name="x"><parameter name="a">1') == "ok"


class TestRedaction:
    @pytest.mark.parametrize(
        "secret",
        [
            "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz012345",
            "sk-proj-AbCdEfGhIjKlMnOpQrStUv",
            "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
            "github_pat_11AbCdEfGhIjKlMnOpQrSt_uv",
            "xoxb-1234567890-abcdefghij",
            "AKIAIOSFODNN7EXAMPLE",
            "AIzaSyA-abcdefghijklmnopqrstuvwxyz12345",
            "glpat-AbCdEfGhIjKlMnOpQrSt",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJlLXZhbHVl",
        ],
    )
    def test_an_api_key_or_token_is_redacted(self, secret: str) -> None:
        """The common key shapes never reach the reader."""
        texts, redacted = redact([f"use {secret} now"])
        assert redacted and secret not in texts[0] and REDACTED in texts[0]

    def test_a_bearer_token_keeps_its_scheme(self) -> None:
        texts, _ = redact(["Authorization: Bearer abc.DEF-123_456.789xyz"])
        assert texts == [f"Authorization: Bearer {REDACTED}"]

    def test_a_password_in_a_url_is_hidden_and_the_user_kept(self) -> None:
        texts, _ = redact(["postgresql://gateway:s3cr3t!@db.internal/agents"])
        assert texts == [f"postgresql://gateway:{REDACTED}@db.internal/agents"]

    @pytest.mark.parametrize(
        "text", ["password=hunter22", 'api_key: "abcdef123456"', "TOKEN=zzzzzzzz"]
    )
    def test_an_assigned_secret_is_redacted(self, text: str) -> None:
        texts, redacted = redact([text])
        assert redacted and REDACTED in texts[0]

    def test_a_private_key_is_redacted_whole(self) -> None:
        key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA\n-----END OPENSSH PRIVATE KEY-----"
        texts, _ = redact([f"here:\n{key}\nthanks"])
        assert texts == [f"here:\n{REDACTED}\nthanks"]

    def test_an_unclosed_private_key_is_redacted_to_the_end(self) -> None:
        texts, _ = redact(["-----BEGIN RSA PRIVATE KEY-----\nMIIEow..."])
        assert texts == [REDACTED]

    def test_a_key_split_across_two_blocks_is_found_in_both(self) -> None:
        """Neither half alone looks like a key; together they are one, redacted in each."""
        texts, redacted = redact(["my key is sk-", "ant-api03-AbCdEfGhIjKlMnOpQrSt and more"])
        assert redacted
        assert texts == [f"my key is {REDACTED}", f"{REDACTED} and more"]

    def test_a_private_key_split_across_blocks_is_redacted_in_both(self) -> None:
        first = "-----BEGIN PRIVATE KEY-----\nMIIB"
        second = "AAAA\n-----END PRIVATE KEY-----\nafter"
        texts, _ = redact([first, second])
        assert texts == [REDACTED, f"{REDACTED}\nafter"]

    def test_plain_text_is_left_alone(self) -> None:
        texts, redacted = redact(["Stop — use the v2 pricing endpoint instead."])
        assert texts == ["Stop — use the v2 pricing endpoint instead."] and not redacted


class TestTruncation:
    def test_a_long_text_is_cut_with_a_marker(self) -> None:
        text, cut = truncate("x" * 5000, 100)
        assert cut and len(text) == 100 and text.endswith(TRUNCATED)

    def test_a_short_text_is_kept(self) -> None:
        assert truncate("short", 100) == ("short", False)
