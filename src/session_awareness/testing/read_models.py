"""What tests use to look at a store's read models, beside the service: every row in
backend-neutral values, a rebuild from the event store, and a stored payload read back.

The service never needs them (its audit compares a rebuild with the live tables in SQL), so
they live here rather than in the product.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.application import Application

from session_awareness.application import projection as p
from session_awareness.application.projection import RowChange, project
from session_awareness.application.replay import EventDecoder
from session_awareness.domain.signals import InvalidSignalError, Payload, RunOutcome, one_line
from session_awareness.infrastructure.readmodel.recorder import neutral
from session_awareness.infrastructure.readmodel.tables import TABLES

#: Notifications per page of a replay.
PAGE_SIZE = 500


def replayed_changes(
    app: Application[UUID], *, page_size: int = PAGE_SIZE
) -> Iterator[list[RowChange]]:
    """The row changes of every stored event, one list per page of notifications."""
    decode = EventDecoder(app.mapper)
    start = 1
    while True:
        page = app.recorder.select_notifications(start, page_size)
        if not page:
            return
        yield project([(notification.id, decode(notification)) for notification in page])
        start = page[-1].id + 1


def replace_read_models(recorder: Any, pages: Iterable[Sequence[p.RowChange]]) -> None:
    """Empty the read models of a store's recorder and rebuild them from replayed pages, in
    one transaction."""
    models = recorder.read_models
    with models.long_running(), models.datastore.transaction(commit=True) as c:
        for table in TABLES:
            c.execute(models.sql(f"DELETE FROM {{s}}{table.name}"))  # noqa: S608 -- a read-model table's name
        for changes in pages:
            models.apply_changes_in_bulk(c, changes)


def read_model_rows(recorder: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Every read-model row of a store's recorder, table by table, in key order and in
    backend-neutral values (ids as hex, JSON as text): what an audit compares."""
    models = recorder.read_models
    with models.long_running(), models.datastore.transaction(commit=False) as c:
        out = {}
        for table in TABLES:
            order = ", ".join(table.key)
            c.execute(models.sql(f"SELECT * FROM {{s}}{table.name} ORDER BY {order}"))  # noqa: S608 -- a read-model table and its key columns
            out[table.name] = [tuple(map(neutral, dict(r).values())) for r in c.fetchall()]
        return out


def payload_from_dict(data: dict[str, Any] | None) -> Payload:
    """Read a stored payload back, refusing unknown keys (R-L2)."""
    data = dict(data or {})
    unknown = set(data) - {"outcome", "channel", "turns"}
    if unknown:
        raise InvalidSignalError(f"unknown payload keys: {', '.join(sorted(unknown))}")
    outcome, channel = data.get("outcome"), data.get("channel")
    if outcome is not None and outcome not in {o.value for o in RunOutcome}:
        raise InvalidSignalError(f"unknown payload outcome: {outcome!r}")
    if channel is not None and (not isinstance(channel, str) or one_line(channel) != channel):
        raise InvalidSignalError("payload channel must be one line of text")
    return Payload(
        outcome=RunOutcome(outcome) if outcome is not None else None,
        channel=channel,
        turns=data.get("turns"),
    )
