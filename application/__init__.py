"""Application layer: the embedding API, its ports and the read-model projection.

from session_awareness.application import open_service
with open_service("sqlite:///sessions.db") as svc:
    ...
"""

from typing import TYPE_CHECKING, Any

from session_awareness.application.errors import (
    AmbiguousSessionError,
    ConfigurationError,
    ContentionError,
    InvalidArgumentError,
    InvalidChangesSinceError,
    ServiceClosedError,
    SessionAwarenessError,
    StoreUnavailableError,
    StoreVersionError,
    UnknownSessionError,
)
from session_awareness.application.service import SessionAwareness, open_service

if TYPE_CHECKING:
    from session_awareness.application.async_service import (
        AsyncSessionAwareness,
        AsyncSessionTools,
        open_async_service,
    )

#: The asyncio API, imported when first used: `asyncio` is slow to import, and a synchronous
#: host (or a hook run, which is a process start) never needs it.
_ASYNC = frozenset({"AsyncSessionAwareness", "AsyncSessionTools", "open_async_service"})


def __getattr__(name: str) -> Any:
    if name not in _ASYNC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from session_awareness.application import async_service  # noqa: PLC0415

    return getattr(async_service, name)


__all__ = [
    "AmbiguousSessionError",
    "AsyncSessionAwareness",
    "AsyncSessionTools",
    "ConfigurationError",
    "ContentionError",
    "InvalidArgumentError",
    "InvalidChangesSinceError",
    "ServiceClosedError",
    "SessionAwareness",
    "SessionAwarenessError",
    "StoreUnavailableError",
    "StoreVersionError",
    "UnknownSessionError",
    "open_async_service",
    "open_service",
]
