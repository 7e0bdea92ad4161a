"""Ambient group watches: which main session a human turn on a group session makes aware of
it (SPEC R-W7, "group activity makes watched same-agent group sessions readable from the main
session")."""

from __future__ import annotations

from session_awareness.domain.keys import (
    AGENT_PREFIX,
    InvalidKeyError,
    SessionRef,
    check_key,
    may_hold_cursor,
)
from session_awareness.domain.signals import SignalKind

#: The default last segment of an agent's main session key (`agent:<agentId>:main`).
DEFAULT_MAIN_KEY = "main"
#: The session kind whose human turns give the agent's main session an ambient cursor.
GROUP_KIND = "group"


def main_session_key(agent_id: str, main_key: str) -> str:
    """The agent's main session: `agent:<agentId>:<main_key>`."""
    return f"{AGENT_PREFIX}{agent_id}:{main_key}"


def check_main_key(main_key: object) -> str:
    """A main key every agent's main session key can be built from; `InvalidKeyError` else."""
    if (
        not isinstance(main_key, str)
        or not main_key
        or ":" in main_key
        or any(c.isspace() for c in main_key)
    ):
        raise InvalidKeyError(
            f"main_key must be one key segment, without ':' or spaces, got {main_key!r}"
        )
    try:
        check_key(main_session_key("agent", main_key))
    except InvalidKeyError:
        raise InvalidKeyError(f"main_key cannot end a session key: {main_key[:60]!r}") from None
    return main_key


def ambient_watcher(target: SessionRef, kind: str, signal: SignalKind, main_key: str) -> str | None:
    """The main session that gets an ambient cursor on `target` before `signal` is recorded
    on it, or None: only a human turn on a `group` session, never the main session itself,
    and only a watcher that may hold a cursor on the target (R-W3)."""
    if signal is not SignalKind.HUMAN_DIRECT_MESSAGE or kind != GROUP_KIND:
        return None
    main = main_session_key(target.agent_id, main_key)
    if main == target.key or not may_hold_cursor(main, target):
        return None
    return main
