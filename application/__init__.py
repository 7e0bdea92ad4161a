"""Application layer: the embedding API, its ports and the read-model projection.

from session_awareness.application import open_service
with open_service("sqlite:///sessions.db") as svc:
    ...
"""

from session_awareness.application.async_service import (
    AsyncSessionAwareness,
    AsyncSessionTools,
    open_async_service,
)
from session_awareness.application.errors import (
    AmbiguousSessionError,
    ConfigurationError,
    InvalidArgumentError,
    InvalidChangesSinceError,
    SessionAwarenessError,
    StoreUnavailableError,
    UnknownSessionError,
)
from session_awareness.application.service import SessionAwareness, open_service

__all__ = [
    "AmbiguousSessionError",
    "AsyncSessionAwareness",
    "AsyncSessionTools",
    "ConfigurationError",
    "InvalidArgumentError",
    "InvalidChangesSinceError",
    "SessionAwareness",
    "SessionAwarenessError",
    "StoreUnavailableError",
    "UnknownSessionError",
    "open_async_service",
    "open_service",
]
