"""Replay of the event store through the projection, page by page (R-R2, DESIGN D4).

The event store is the audit trail; streaming it in notification order through the same
projection that runs inline rebuilds every read model exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID

from eventsourcing.application import Application

from session_awareness.application.projection import RowChange, project

PAGE_SIZE = 500


def replayed_changes(
    app: Application[UUID], *, page_size: int = PAGE_SIZE
) -> Iterator[list[RowChange]]:
    """The row changes of every stored event, one list per page of notifications."""
    start = 1
    while True:
        page = app.recorder.select_notifications(start, page_size)
        if not page:
            return
        recorded: list[tuple[int, Any]] = [
            (notification.id, app.mapper.to_domain_event(notification)) for notification in page
        ]
        yield project(recorded)
        start = page[-1].id + 1
