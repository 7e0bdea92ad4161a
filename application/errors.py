"""Typed errors of the embedding API; their messages are the exact texts of the rules (R-S4)."""

from __future__ import annotations

from collections.abc import Callable

# Defined beneath every layer, where a database URL is read; given here with the others.
from session_awareness.configuration import ConfigurationError, SessionAwarenessError


class UnknownSessionError(SessionAwarenessError, LookupError):
    """The key names no live session (unknown, deleted, or outside the caller's view)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"Unknown sessionKey: {key}")
        self.key = key


class AmbiguousSessionError(SessionAwarenessError, LookupError):
    """A bare key shared by several agents, asked for without an agent id (R-W3)."""

    def __init__(self, key: str, agent_ids: list[str]) -> None:
        super().__init__(
            f"Ambiguous sessionKey: {key} (it exists under agents {', '.join(agent_ids)}; "
            "pass agentId)"
        )
        self.key = key
        self.agent_ids = agent_ids


class InvalidChangesSinceError(SessionAwarenessError, ValueError):
    def __init__(self) -> None:
        super().__init__("changesSince must be a non-negative integer")


class InvalidArgumentError(SessionAwarenessError, ValueError):
    """An argument that cannot be used, of a query, a lifecycle command or (on a strict
    service) a producer; `field` names it."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


class ServiceClosedError(SessionAwarenessError, RuntimeError):
    """A producer called after `close()` on a strict service (`open_service(strict=True)`);
    a service that is not strict logs it (`signal_rejected`, WARNING) and returns None."""

    def __init__(self) -> None:
        super().__init__("the service is closed")


class ContentionError(SessionAwarenessError):
    """A command lost its race against concurrent writers of the same sessions or cursors on
    every attempt (ADR 027, 036): nothing it decided was saved. Trying again later is safe."""

    def __init__(self, attempts: int, reason: str) -> None:
        super().__init__(f"gave up after {attempts} attempts lost to concurrent writers: {reason}")
        self.attempts = attempts


class StoreVersionError(ConfigurationError):
    """The store was migrated by a newer version of session-awareness than this one: this
    process would misread it (a drained cursor as pending, an event it has no class for), so
    it refuses to open it. Upgrade this process."""

    def __init__(self, found: int, known: int) -> None:
        super().__init__(
            f"this store was migrated by a newer session-awareness (store version {found}; "
            f"this version knows up to {known}): upgrade this process before opening it"
        )
        self.found, self.known = found, known


class StoreUnavailableError(SessionAwarenessError):
    """The session store cannot be reached (database down or restarting, connection refused,
    unknown host, pool exhausted, timed out): worth trying again later. Producers never raise
    it (R-L8)."""

    def __init__(self, reason: str, *, unconfirmed: object = None) -> None:
        super().__init__(f"session store unavailable: {reason}")
        self.reason = reason
        #: The first event of a save whose commit could not be confirmed either way.
        self.unconfirmed = unconfirmed


def raised_from(error: BaseException | None, test: Callable[[BaseException], bool]) -> bool:
    """Whether `error`, or an error it was raised from or while handling, passes `test` (the
    library re-raises psycopg's and the driver's errors as its own)."""
    while error is not None:
        if test(error):
            return True
        error = error.__cause__ or error.__context__
    return False


__all__ = [
    "AmbiguousSessionError",
    "ConfigurationError",
    "ContentionError",
    "InvalidArgumentError",
    "InvalidChangesSinceError",
    "ServiceClosedError",
    "SessionAwarenessError",
    "StoreUnavailableError",
    "StoreVersionError",
    "UnknownSessionError",
    "raised_from",
]
