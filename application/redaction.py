"""Credential- and token-like text, found and replaced by `[REDACTED]` (R-T4).

`sessions_history` hands one session's transcript to another session's agent, so every string
it returns goes through `redact`. The families found:

- PEM private-key blocks, to their END line or, unclosed, to the end of the text;
- provider keys by their prefix: `sk-…` (OpenAI, Anthropic `sk-ant-…`), GitHub `ghp_…` and
  `github_pat_…`, Slack `xox?-…`, AWS `AKIA…`/`ASIA…`, Google `AIza…`, GitLab `glpat-…`,
  Stripe `sk_live_…`, Hugging Face `hf_…`, npm `npm_…`, PyPI `pypi-…`;
- JSON web tokens, and `Bearer`/`Basic` credentials;
- a password in a URL (`scheme://user:password@host`: the user is kept);
- a value assigned to a credential-named key, in any notation: `DB_PASSWORD=…`,
  `MYSQL_ROOT_PASSWORD: …`, `aws_secret_access_key = …`, `"password": "…"`, `--token …`.
  A name is credential-named when its last word (split at `_`, `-`, `.` and camelCase) ends
  with password, passwd, passphrase, secret or token, or is pwd, pass, apikey, credential(s);
  or when it ends in `key` after api, access, secret, private, signing, encryption, master or
  client (`SECRET_KEY`, `apiKey`). So `max_tokens`, `password_file` and `sessionKey` are not.

What is deliberately not a secret: ordinary prose (the word "password" without a value),
hexadecimal hashes (git commits), UUIDs. No entropy guess is made, since hashes and ids are
exactly what a transcript is full of.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

REDACTED = "[REDACTED]"

_TOKENS = re.compile(
    "|".join(
        (
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY-----|.*\Z)",
            r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}",
            r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}",
            r"\bgithub_pat_[A-Za-z0-9_]{20,}",
            r"\bxox[abposre]-[A-Za-z0-9-]{10,}",
            r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
            r"\bAIza[0-9A-Za-z_-]{30,}",
            r"\bglpat-[A-Za-z0-9_-]{16,}",
            r"\b(?:rk|pk|sk)_(?:live|test)_[A-Za-z0-9]{16,}",
            r"\bhf_[A-Za-z0-9]{20,}",
            r"\bnpm_[A-Za-z0-9]{30,}",
            r"\bpypi-[A-Za-z0-9_-]{40,}",
            # JSON web tokens: a JSON header and payload, base64url, and a signature.
            r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        )
    ),
    re.DOTALL,
)
#: `Bearer …`/`Basic …`: the credential only (it holds a digit, so prose is left alone).
_SCHEME = re.compile(r"(?i:\b(?:bearer|basic)\s+)(?P<v>(?=[A-Za-z._~+/=-]*\d)[\w.~+/=-]{12,})")
#: A password in a URL: `scheme://user:password@host` keeps the user, hides the password.
_URL_PASSWORD = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s:/@]*:(?P<v>[^\s@/]+)@", re.I)

# -- credential-named assignments ----------------------------------------------------------------

#: Where a credential-named key may be: found fast, then the name around it is examined.
_HINT = re.compile(r"(?i)pass|pwd|secret|token|key|cred")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_MAX_NAME = 64
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_SECRET_ENDINGS = ("password", "passwd", "passphrase", "secret", "token")
_SECRET_WORDS = frozenset({"pwd", "pass", "apikey", "credential", "credentials", "creds"})
_KEY_QUALIFIERS = frozenset(
    {"api", "access", "secret", "private", "signing", "encryption", "master", "client"}
)
_TRAILING = frozenset({"base", "value"})  # SECRET_KEY_BASE, token_value
#: After the name: its closing quote, then `=`, `:`, `:=` or `=>` (not `==`, `::`, `://`).
_SEPARATOR = re.compile(r"(?:\\?[\"'])?[ \t]*(?::=|=>|=(?!=)|:(?![:/]))[ \t]*")
_FLAG_SEPARATOR = re.compile(r"[ \t]+")
_QUOTES = ('\\"', "\\'", '"', "'")
_VALUE_END = re.compile(r"""[\s"',;&|()<>\[\]{}]|\\[nrt"']""")
_REFERENCE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|(?i:null|none|true|false|nil|undefined)")
_MAX_VALUE = 1024
_MIN_BARE_VALUE = 3


def credential_name(name: str) -> bool:
    """Whether a key's name says its value is a credential (see the module's docstring)."""
    words = [w.lower() for w in _WORDS.findall(name)]
    while len(words) > 1 and words[-1] in _TRAILING:
        words.pop()
    if not words:
        return False
    last = words[-1]
    if last.endswith(_SECRET_ENDINGS) or last in _SECRET_WORDS:
        return True
    return last in ("key", "keys") and any(w in _KEY_QUALIFIERS for w in words[:-1])


def _assigned_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    examined = 0
    for hint in _HINT.finditer(text):
        if hint.start() < examined:
            continue  # inside a name already examined
        start, end = hint.start(), hint.end()
        while start > 0 and text[start - 1] in _NAME_CHARS and hint.start() - start < _MAX_NAME:
            start -= 1
        while end < len(text) and text[end] in _NAME_CHARS and end - hint.end() < _MAX_NAME:
            end += 1
        examined = end
        name = text[start:end]
        if not credential_name(name.lstrip("-.")):
            continue
        separator = _SEPARATOR.match(text, end)
        if separator is None and name.startswith("--"):
            separator = _FLAG_SEPARATOR.match(text, end)
        if separator is not None:
            span = _value_span(text, separator.end())
            if span is not None:
                spans.append(span)
    return spans


def _value_span(text: str, at: int) -> tuple[int, int] | None:
    """The span of the value starting at `at`: inside its quotes, or a bare run."""
    quote = next((q for q in _QUOTES if text.startswith(q, at)), None)
    if quote is not None:
        start = at + len(quote)
        line_end = text.find("\n", start, start + _MAX_VALUE)
        limit = line_end if line_end >= 0 else min(len(text), start + _MAX_VALUE)
        close = text.find(quote, start, limit)
        end = close if close >= 0 else limit
        least = 1
    else:
        start = at
        found = _VALUE_END.search(text, start, min(len(text), start + _MAX_VALUE))
        end = found.start() if found else min(len(text), start + _MAX_VALUE)
        least = _MIN_BARE_VALUE
    if end - start < least or _REFERENCE.fullmatch(text, start, end):
        return None
    return start, end


# -- the filter ---------------------------------------------------------------------------------


def secret_spans(text: str) -> list[tuple[int, int]]:
    """The spans of `text` that look like credentials, in order, not overlapping."""
    spans = [(m.start(), m.end()) for m in _TOKENS.finditer(text)]
    spans += [(m.start("v"), m.end("v")) for m in _SCHEME.finditer(text)]
    spans += [(m.start("v"), m.end("v")) for m in _URL_PASSWORD.finditer(text)]
    spans += _assigned_spans(text)
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


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


def redact_text(text: str) -> tuple[str, bool]:
    """One text redacted, and whether anything was."""
    texts, redacted = redact([text])
    return texts[0], redacted


def _redacted(text: str, offset: int, spans: list[tuple[int, int]]) -> str:
    pieces, at = [], 0
    for a, b in spans:
        if a >= b:
            continue
        pieces += [text[at : a - offset], REDACTED]
        at = b - offset
    pieces.append(text[at:])
    return "".join(pieces)
