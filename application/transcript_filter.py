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
text, and a stray closing tag is removed. `redact(texts)` then replaces credential-like text
(API keys, bearer tokens, private keys, passwords in URLs and `password=` assignments, JSON web
tokens) with `[REDACTED]`, looking across the given texts as if they were one, so a secret split
between two blocks of a message is still found. `truncate` cuts a long text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

REDACTED = "[REDACTED]"
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


# -- redaction ---------------------------------------------------------------------------------

_SECRETS = re.compile(
    "|".join(
        (
            # PEM private keys, to their END line or, unclosed, to the end of the text.
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY-----|.*\Z)",
            # Provider API keys: OpenAI/Anthropic sk-, GitHub, Slack, AWS, Google, GitLab, Stripe.
            r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}",
            r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}",
            r"\bgithub_pat_[A-Za-z0-9_]{20,}",
            r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
            r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
            r"\bAIza[0-9A-Za-z_-]{30,}",
            r"\bglpat-[A-Za-z0-9_-]{16,}",
            r"\b(?:rk|pk|sk)_(?:live|test)_[A-Za-z0-9]{16,}",
            # JSON web tokens.
            r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
            # Bearer / Basic credentials, in a header or in prose.
            r"(?i:\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{12,}",
            # password=…, api_key: …, token "…" and the like.
            r"(?i:\b(?:passw(?:or)?d|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token"
            r"|client[_-]?secret|token)\b[\"']?\s*[:=]\s*)[\"']?[^\s\"',;&]{6,}",
        )
    ),
    re.DOTALL,
)
#: A password in a URL: `scheme://user:password@host` keeps the user, hides the password.
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-z][a-z0-9+.-]*://[^\s:/@]+:)(?P<secret>[^\s@/]+)@", re.I)


def secret_spans(text: str) -> list[tuple[int, int]]:
    """The spans of `text` that look like credentials, in order, not overlapping."""
    spans = [_value_span(m) for m in _SECRETS.finditer(text)]
    spans += [(m.start("secret"), m.end("secret")) for m in _URL_PASSWORD.finditer(text)]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _value_span(match: re.Match[str]) -> tuple[int, int]:
    """A credential's span; for `name: value` and `Bearer value`, the value only."""
    found = match.group()
    lead = re.match(r"(?i)(?:bearer|basic)\s+|[\w-]+[\"']?\s*[:=]\s*[\"']?", found)
    if lead and not found.startswith(("-----", "sk-", "eyJ")) and lead.end() < len(found):
        return match.start() + lead.end(), match.end()
    return match.start(), match.end()


def redact(texts: Sequence[str]) -> tuple[list[str], bool]:
    """`texts` with credential-like spans replaced by `[REDACTED]`, and whether any was. The
    texts are searched as one (joined without a separator), so a secret split across two
    blocks is found; each text keeps its own part of it, redacted."""
    joined = "".join(texts)
    spans = secret_spans(joined)
    if not spans:
        return list(texts), False
    out, start = [], 0
    for text in texts:
        end = start + len(text)
        out.append(_redacted(text, start, [(max(a, start), min(b, end)) for a, b in spans]))
        start = end
    return out, True


def _redacted(text: str, offset: int, spans: list[tuple[int, int]]) -> str:
    pieces, at = [], 0
    for a, b in spans:
        if a >= b:
            continue
        pieces += [text[at : a - offset], REDACTED]
        at = b - offset
    pieces.append(text[at:])
    return "".join(pieces)


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to `limit` characters (the marker included), and whether it was."""
    if len(text) <= limit:
        return text, False
    return text[: max(0, limit - len(TRUNCATED))].rstrip() + TRUNCATED, True
