"""The projection's rows of a cursor's and a watcher's drains' events (`Watch`, `Drains`).

Registered on the projection's `_rows` when this module is imported, which the projection
does with the first event of either aggregate it projects (`projection._row_function`): their
classes are then imported already, and a process that builds or decodes none of their events
imports neither aggregate's module (issue 39, ADR 039).
"""

from __future__ import annotations

from typing import Any

from session_awareness.application.projection import (
    CursorMoved,
    CursorRemoved,
    CursorsAcknowledged,
    CursorStarted,
    RowChange,
    _rows,
)
from session_awareness.domain.cursors import notice_open
from session_awareness.domain.drains import Drains
from session_awareness.domain.signals import to_ms
from session_awareness.domain.watch import Watch


@_rows.register(Watch.Started)
def _(event: Watch.Started, position: int) -> list[RowChange]:
    return _cursor_started(event)


@_rows.register(Watch.Restarted)
def _(event: Watch.Restarted, position: int) -> list[RowChange]:
    return _cursor_started(event)


def _cursor_started(event: Watch.Started | Watch.Restarted) -> list[RowChange]:
    return [
        CursorStarted(
            event.originator_id,
            event.watcher,
            event.target_id,
            event.target_key,
            event.at_sequence,
            to_ms(event.timestamp),
        )
    ]


@_rows.register(Watch.Moved)
def _(event: Watch.Moved, position: int) -> list[RowChange]:
    opens = isinstance(event, Watch.NoticeOpened) or (
        isinstance(event, Watch.Acknowledged) and notice_open(event.acknowledged, event.notified)
    )
    return [
        CursorMoved(
            event.originator_id,
            event.acknowledged,
            event.notified,
            event.material,
            position if opens else None,
            to_ms(event.timestamp),
        )
    ]


@_rows.register(Watch.Removed)
def _(event: Watch.Removed, position: int) -> list[RowChange]:
    return [CursorRemoved(event.originator_id)]


@_rows.register(Drains.Started)
def _(event: Drains.Started, position: int) -> list[RowChange]:
    return _drained(event, position)


@_rows.register(Drains.Drained)
def _(event: Drains.Drained, position: int) -> list[RowChange]:
    return _drained(event, position)


@_rows.register(Drains.Redelivered)
def _(event: Drains.Redelivered, position: int) -> list[RowChange]:
    """Each re-delivered notice keeps its place and its L; N moves to M (R-N6, ADR 034). No
    wake is published: the sweep wakes its watchers itself."""
    return [CursorsAcknowledged(_entries(event), to_ms(event.timestamp), position, False)]


def _drained(event: Drains.Started | Drains.Drained, position: int) -> list[RowChange]:
    """Each drained cursor moves as a stored `Acknowledged` moved it (ADR 024)."""
    return [CursorsAcknowledged(_entries(event), to_ms(event.timestamp), position)]


def _entries(event: Drains.Started | Drains.Drained | Drains.Redelivered) -> Any:
    """The event's entries as stored, made immutable (a row change is hashable)."""
    return tuple(map(tuple, event.entries))
