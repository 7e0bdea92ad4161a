"""Audit and history over the event store (issue 6): placeholder, filled in by its issue."""

from __future__ import annotations

from session_awareness.application.core import ServiceCore


class Audit(ServiceCore):
    """Replay, rebuild and verify the read models; a session's full history."""
