"""The safety filter of `sessions_history`: what a transcript's text may show another session.

Pure functions over text, no I/O. `clean(text)` applies the normalisation rules in order:

1. thinking blocks (`<think>`, `<thinking>`, `<thought>`, `<antthinking>`, `<reasoning>`) are
   stripped, with what they hold;
2. `<relevant-memories>` / `<relevant_memories>` scaffolding is stripped;
3. plain-text tool-call XML (`<tool_call>`, `<function_call>`, `<tool_calls>`,
   `<function_calls>`) is stripped, a block that never closes up to the end of the text;
4. malformed MiniMax tool-call XML (`<minimax:tool_call>`, `<invoke …>`, `<parameter …>`, and
   their stray closing tags) is stripped;
5. downgraded scaffolding — a line starting `[Tool Call: …]`, `[Tool Result …]` or
   `[Historical context …]` — is stripped with the paragraph it opens;
6. leaked model control tokens (`<|assistant|>`, any ASCII `<|…|>` and the full-width
   `<｜…｜>`, mixed forms included) are stripped.

Tags match whatever their case and whether their angle brackets are ASCII or full-width
(`＜think＞`). Blocks are matched outermost first with nesting counted, so a nested block
cannot close its parent early; an opening tag without its closing tag strips to the end of the
text, and a stray closing tag is removed. `truncate` cuts a long text. Credential-like text is
redacted afterwards, by `redaction`.
"""

from __future__ import annotations

import re

TRUNCATED = "… [truncated]"
_LT, _GT = "[<\uff1c]", "[>\uff1e]"  # ASCII or full-width angle brackets
#: Block tags per rule, stripped with their content.
THINKING = ("think", "thinking", "thought", "antthinking", "reasoning")
MEMORIES = ("relevant-memories", "relevant_memories")
TOOL_XML = ("tool_call", "function_call", "tool_calls", "function_calls")
MINIMAX = ("minimax:tool_call", "invoke", "parameter")
BLOCK_TAGS = (*THINKING, *MEMORIES, *TOOL_XML, *MINIMAX)

_NAMES = "|".join(re.escape(name) for name in sorted(BLOCK_TAGS, key=len, reverse=True))
#: An opening or closing block tag: `<name>`, `<name attr="…">`, `</name>`; `>` may be missing
#: at the very end of a truncated text.
_TAG = re.compile(
    rf"{_LT}\s*(?P<close>/)?\s*(?P<name>{_NAMES})(?![\w:-])[^<>\uff1c\uff1e]*(?:{_GT}|$)",
    re.IGNORECASE,
)
_CONTROL_TOKEN = re.compile(rf"{_LT}[|\uff5c][^\n<>\uff1c\uff1e]{{0,128}}?[|\uff5c]{_GT}")
_SCAFFOLD = re.compile(
    r"^[ \t]*\[(?:Tool Call:|Tool Result\b|Historical context\b)[^\n]*(?:\n(?![ \t]*\n)[^\n]*)*",
    re.IGNORECASE | re.MULTILINE,
)
_BLANK_RUNS = re.compile(r"\n{3,}")


def clean(text: str) -> str:
    """`text` with every normalisation rule applied (see the module's docstring)."""
    text = strip_blocks(text)
    text = _SCAFFOLD.sub("", text)
    text = _CONTROL_TOKEN.sub("", text)
    return _BLANK_RUNS.sub("\n\n", text).strip()


def strip_blocks(text: str) -> str:
    """Remove every block tag and what it holds. Nesting is counted per outermost block, so
    `<think><think>a</think>b</think>c` leaves `c`; an unclosed block runs to the end."""
    out: list[str] = []
    depth, outer, kept_from = 0, "", 0
    for match in _TAG.finditer(text):
        name, closing = _canonical(match["name"]), match["close"] is not None
        if depth == 0:
            out.append(text[kept_from : match.start()])
            kept_from = match.end()
            if not closing:  # a stray closing tag is simply dropped
                depth, outer = 1, name
            continue
        if _family(name) == _family(outer):
            depth += -1 if closing else 1
        if depth == 0:
            kept_from = match.end()
    if depth == 0:
        out.append(text[kept_from:])
    return "".join(out)


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-")


def _family(name: str) -> str:
    """Tags that count as one for nesting: each name is its own (the two spellings of the
    memories tag are one name), except the MiniMax set, whose malformed output closes an
    `<invoke>` with `</minimax:tool_call>`."""
    return "minimax" if name in {_canonical(n) for n in MINIMAX} else name


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to `limit` characters (the marker included), and whether it was."""
    if len(text) <= limit:
        return text, False
    return text[: max(0, limit - len(TRUNCATED))].rstrip() + TRUNCATED, True
