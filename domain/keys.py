"""Session keys and the deterministic identities derived from them (R-K1, R-K2)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import import_module
from typing import Any
from uuid import UUID

from session_awareness.domain.signals import CONTROL_CHARACTERS

#: Namespace of every aggregate id; changing it would orphan every stored stream.
ID_NAMESPACE = UUID("6f1f7a3e-2b0c-5d55-9a1e-5e5510a3a2e1")

AGENT_PREFIX = "agent:"
SUBAGENT_SEGMENT = ":subagent:"
THREAD_SEGMENT = ":thread:"
DEFAULT_AGENT_ID = "main"


def agent_of(key: str) -> str | None:
    """The agent id of an agent-qualified key (`agent:<agentId>:<rest>`), else None."""
    if not key.startswith(AGENT_PREFIX):
        return None
    parts = key.split(":", 2)
    if len(parts) < 3 or not parts[1] or not parts[2]:
        return None
    return parts[1]


def is_agent_qualified(key: str) -> bool:
    """Whether the key names its agent, which a watcher's key must (R-W3)."""
    return agent_of(key) is not None


def may_hold_cursor(watcher: str, target: SessionRef) -> bool:
    """Whether `watcher` may hold a cursor on `target` (R-W3): the watcher names its agent,
    and a bare-key target belongs to that same agent, so a notice's text (which quotes the
    target's key) always names one session."""
    agent = agent_of(watcher)
    if agent is None:
        return False
    return is_agent_qualified(target.key) or target.agent_id == agent


def is_subagent(key: str) -> bool:
    """Whether the key is a sub-agent session's: it has a `:subagent:` segment (R-K2)."""
    return SUBAGENT_SEGMENT in key


def is_thread_scoped(key: str) -> bool:
    """Whether the key ends in `:thread:<id>`, which is never a send target (R-K2)."""
    head, sep, tail = key.rpartition(THREAD_SEGMENT)
    return bool(sep) and bool(head) and bool(tail) and ":" not in tail


@dataclass(frozen=True, slots=True)
class SessionRef:
    """A session's natural identity: its agent and its key (R-K1)."""

    agent_id: str
    key: str

    def __post_init__(self) -> None:
        check_key(self.key)
        if (
            not isinstance(self.agent_id, str)
            or not self.agent_id
            or len(self.agent_id) > MAX_KEY_LENGTH
            or _BAD_AGENT_CHARACTER.search(self.agent_id) is not None
        ):
            shown = self.agent_id[:60] if isinstance(self.agent_id, str) else self.agent_id
            raise InvalidKeyError(f"invalid agent id: {shown!r}")
        qualified = agent_of(self.key)
        if qualified is not None and qualified != self.agent_id:
            raise InvalidKeyError(
                f"key {self.key!r} belongs to agent {qualified!r}, not {self.agent_id!r}"
            )

    @classmethod
    def of(cls, key: str, agent_id: str | None = None) -> SessionRef:
        """The ref of a key: its own agent when qualified, else the given or default agent;
        a qualified key with a different agent id is refused."""
        return cls(agent_id or agent_of(key) or DEFAULT_AGENT_ID, key)

    @property
    def session_id(self) -> UUID:
        """The Session aggregate's id: the same ref always names the same stream."""
        return _session_id(self.agent_id, self.key)


#: Ids derived and kept per process: a SHA-1 per lookup is most of a fan-out's key work.
_DERIVED_IDS = 65_536


def _sha1() -> Any:
    """The interpreter's own SHA-1 (CPython's `_sha1`, which `hashlib` falls back to), else
    `hashlib`'s. `uuid.uuid5` imports `hashlib`, whose OpenSSL binding costs about 4 ms of
    CPU at the start of every process that derives an id, a hook run among them (issue 39)."""
    try:
        return import_module("_sha1").sha1
    except ImportError:  # an interpreter without it
        return import_module("hashlib").sha1


_SHA1 = _sha1()


def _uuid5(name: str) -> UUID:
    """`uuid.uuid5(ID_NAMESPACE, name)`, computed as the standard library computes it."""
    return UUID(bytes=_SHA1(ID_NAMESPACE.bytes + bytes(name, "utf-8")).digest()[:16], version=5)


@lru_cache(maxsize=_DERIVED_IDS)
def _session_id(agent_id: str, key: str) -> UUID:
    return _uuid5(f"session\x00{agent_id}\x00{key}")


@lru_cache(maxsize=_DERIVED_IDS)
def watch_id(watcher_key: str, target_id: UUID) -> UUID:
    """The Watch aggregate's id for one (watcher, target) pair."""
    return _uuid5(f"watch\x00{watcher_key}\x00{target_id}")


@lru_cache(maxsize=_DERIVED_IDS)
def drains_id(watcher_key: str) -> UUID:
    """The Drains aggregate's id for one watcher (ADR 024)."""
    return _uuid5(f"drains\x00{watcher_key}")


MAX_KEY_LENGTH = 512
#: A double quote, or any control, format or line-separator character (C0, C1, U+2028,
#: bidi controls, zero-width characters): never in a key, which notices quote as is (R-N1).
_BAD_KEY_CHARACTER = re.compile(f'["{CONTROL_CHARACTERS}]')
#: A colon, whitespace, or any character a key may not hold: never in an agent id.
_BAD_AGENT_CHARACTER = re.compile(f"[:\\s{CONTROL_CHARACTERS}]")


def check_key(key: str) -> None:
    """Refuse keys that are empty, padded, too long, or hold a double quote, a line break or a
    control or format character (the notice text quotes the key, byte-stable, R-N1)."""
    if not isinstance(key, str) or not key or key != key.strip():
        raise InvalidKeyError(f"invalid session key: {key!r}")
    if len(key) > MAX_KEY_LENGTH or _BAD_KEY_CHARACTER.search(key) is not None:
        raise InvalidKeyError(f"invalid session key: {key[:60]!r}")


class InvalidKeyError(ValueError):
    """A session key or agent id that cannot name a session."""
