"""Many aggregates' streams in one statement (the start-up sweep's batch, ADR 038).

`UnitOfWork.prefetch` asks the recorder for the streams of a batch of aggregates: for each,
its latest snapshot newer than the version the caller holds (ADR 022), and its events after
that snapshot, else after that version. One statement on either backend whatever the
batch's size, its ids and versions bound as arrays (PostgreSQL) or one JSON object (SQLite).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent


def streams_statement(events: str, snapshots: str, *, postgres: bool) -> str:
    """`select_streams`' statement template (`{s}`, `?`) on either backend: rows
    `(is_snapshot, id, version, topic, state)` ordered by id and version (a stream's
    snapshot comes before its events, all newer). The ids and versions are bound as two
    arrays (PostgreSQL) or one JSON object of hex id to version (SQLite)."""
    if postgres:
        wanted = "w(id, known) AS (SELECT * FROM unnest(CAST(? AS uuid[]), CAST(? AS bigint[])))"
        newest, join = "GREATEST", "JOIN"
    else:
        wanted = "w(id, known) AS (SELECT key, value FROM json_each(?))"
        # SQLite's CROSS JOIN keeps the wanted ids the outer loop: a plain join let it scan
        # the whole event table in key order to spare the final sort.
        newest, join = "MAX", "CROSS JOIN"
    events_of = (
        "SELECT 0, e.originator_id, e.originator_version, e.topic, e.state FROM w "  # noqa: S608 -- the library's table names
        f"{join} {{s}}{events} e ON e.originator_id = w.id"
    )
    # The newest snapshot of each id if newer than its known version, read through the
    # table's key: PostgreSQL's LATERAL reads one index entry per id; SQLite looks up the
    # MAX per id (its plan stays per id when the snapshots' table grows).
    if postgres:
        latest = (
            "SELECT x.* FROM w CROSS JOIN LATERAL (SELECT originator_id, originator_version, "  # noqa: S608 -- the library's table names
            f"topic, state FROM {{s}}{snapshots} WHERE originator_id = w.id AND "
            "originator_version > w.known ORDER BY originator_version DESC LIMIT 1) x"
        )
    else:
        latest = (
            f"SELECT x.originator_id, x.originator_version, x.topic, x.state FROM w {join} "  # noqa: S608 -- the library's table names
            f"{{s}}{snapshots} x ON x.originator_id = w.id AND x.originator_version > w.known "
            f"AND x.originator_version = (SELECT MAX(y.originator_version) FROM "
            f"{{s}}{snapshots} y WHERE y.originator_id = w.id)"
        )
    return (
        f"WITH {wanted}, s AS ({latest}) "  # noqa: S608 -- the library's table names
        "SELECT 1, originator_id, originator_version, topic, state FROM s UNION ALL "
        f"{events_of} LEFT JOIN s ON s.originator_id = w.id WHERE e.originator_version > "
        f"{newest}(w.known, COALESCE(s.originator_version, 0)) ORDER BY 2, 3"
    )


def split_streams(
    rows: Sequence[tuple[Any, ...]],
    state: Callable[[Any], bytes],
    ids: Callable[[Any], UUID] = lambda i: i,
) -> tuple[list[StoredEvent], list[StoredEvent]]:
    """`streams_statement`'s rows as (snapshots, events), stored events either."""
    snapshots: list[StoredEvent] = []
    events: list[StoredEvent] = []
    for is_snapshot, originator_id, version, topic, data in rows:
        stored = StoredEvent(
            originator_id=ids(originator_id), originator_version=version, topic=topic,
            state=state(data),
        )  # fmt: skip
        (snapshots if is_snapshot else events).append(stored)
    return snapshots, events


__all__ = ["split_streams", "streams_statement"]
