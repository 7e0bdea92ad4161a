"""What an audit rebuilds and compares, written once for both backends (R-R2, ADR 002).

The scratch tables are a copy of the live read-model tables' definitions (with their keys
but without their secondary indexes: the copy is only written and read by key), written by
the same statements (`ScratchStore`) with another schema prefix. The comparison and the
swap are SQL over both copies on one live connection (`View`), so nothing is held in memory
but the differing rows: a `FULL JOIN` on each table's key (written as two `LEFT JOIN`s,
which every SQLite has) with a null-safe column-by-column comparison.

Each backend's scratch (a file, a schema) is in `sqlite_audit` and `postgres_audit`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Notification

from session_awareness.application import projection as p
from session_awareness.infrastructure.readmodel.bulk import BulkWrites
from session_awareness.infrastructure.readmodel.dialect import Dialect
from session_awareness.infrastructure.readmodel.recorder import neutral
from session_awareness.infrastructure.readmodel.tables import TABLES


def q(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


class ScratchStore(BulkWrites):
    """The read-model statements aimed at scratch tables; it publishes no wakes."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect


def table_keys() -> dict[str, tuple[str, ...]]:
    """Each read-model table and its key columns (its primary key, in comparison order)."""
    return {table.name: table.key for table in TABLES}


#: Aggregate ids kept decoded by an event log reader (a replay meets each one many times).
KEEP_IDS = 100_000


class EventLog:
    """Reads of the library's events table: by position, and by stream for a history."""

    #: The events table's position column.
    id_column = "rowid"
    #: How the originator id is selected.
    originator = "originator_id"

    def __init__(self, live: Any, recorder: Any) -> None:
        self.live, self.recorder = live, recorder
        self.table = live.dialect.schema_prefix + q(live.events_table_name)
        self.ids: dict[Any, Any] = {}

    def convert(self, stored_id: Any) -> Any:
        """An originator id as the library's mapper wants it."""
        return self.recorder.convert_originator_id(stored_id)

    def rows(self, c: Any, sql: str, params: Sequence[Any]) -> list[Any]:
        """The rows of `sql` as tuples (SQLite's connections make `sqlite3.Row`s, which
        cost more to build and to take apart)."""
        cursor = getattr(c, "sqlite_cursor", c)  # the library's wrapper, or a bare cursor
        factory, cursor.row_factory = cursor.row_factory, None
        try:
            cursor.execute(sql, params)
            return list(cursor.fetchall())
        finally:
            cursor.row_factory = factory

    def select(self, c: Any, where: str, params: Sequence[Any], limit: int) -> list[Notification]:
        ident = self.id_column
        sql = self.live.sql(
            f"SELECT {ident} AS id, {self.originator} AS originator_id, originator_version, "
            f"topic, state FROM {self.table} WHERE {where.format(id=ident)} "
            f"ORDER BY {ident} LIMIT ?"
        )
        rows = self.rows(c, sql, (*params, limit))
        ids, convert = self.ids, self.convert
        out = []
        for position, stored_id, version, topic, state in rows:
            originator_id = ids.get(stored_id)
            if originator_id is None:
                if len(ids) >= KEEP_IDS:
                    ids.clear()
                originator_id = ids[stored_id] = convert(stored_id)
            out.append(_notification(position, originator_id, version, topic, bytes(state)))
        return out

    def of_topics(
        self, c: Any, topics: Collection[str], after: int, upto: int
    ) -> list[Notification]:
        """Stored events with one of `topics` and an id in (`after`, `upto`], in order: a
        range of the position's key, filtered on the topic (a replay's look-ahead)."""
        if not topics or upto <= after:
            return []
        marks = ", ".join("?" for _ in topics)
        return self.select(
            c, f"{{id}} > ? AND {{id}} <= ? AND topic IN ({marks})", (after, upto, *topics), 2**62
        )

    def last_id(self, c: Any) -> int:
        c.execute(f"SELECT COALESCE(MAX({self.id_column}), 0) AS last FROM {self.table}")
        return int(c.fetchone()["last"])


def _notification(
    position: int, originator_id: Any, version: int, topic: str, state: bytes
) -> Notification:
    """A `Notification` equal to the one its constructor makes, made the way the library's
    mapper makes events: the frozen dataclass's `__init__` costs a `__setattr__` per field,
    a third of reading a row."""
    notification = object.__new__(Notification)
    object.__setattr__(
        notification,
        "__dict__",
        {"originator_id": originator_id, "originator_version": version, "topic": topic,
         "state": state, "id": position},
    )  # fmt: skip
    return notification


class Audit:
    """The `AuditStore` port's reads of the live store: its read models (`live`) and its
    application recorder (`recorder`, the library's reads of the events); a backend adds its
    `scratch()`."""

    event_log = EventLog

    def __init__(self, live: Any, recorder: Any) -> None:
        self.live, self.recorder = live, recorder
        self.log = self.event_log(live, recorder)

    def last_notification_id(self) -> int:
        return int(self.recorder.max_notification_id() or 0)

    def notifications(self, after: int, limit: int) -> Sequence[Notification]:
        with self.live.datastore.transaction(commit=False) as c:
            return self.log.select(c, "{id} > ?", (after,), limit)

    def notifications_of(
        self, topics: Collection[str], after: int, upto: int
    ) -> Sequence[Notification]:
        with self.live.datastore.transaction(commit=False) as c:
            return self.log.of_topics(c, topics, after, upto)

    def streams(self, originator_ids: Collection[UUID]) -> Sequence[Notification]:
        ids = [self.live.dialect.bind_id(i) for i in originator_ids]
        marks = ", ".join("?" for _ in ids)
        with self.live.datastore.transaction(commit=False) as c:
            return self.log.select(c, f"originator_id IN ({marks})", ids, 2**62)


class View:
    """The `AuditView` port: live and scratch tables on one live transaction `c`."""

    def __init__(
        self, c: Any, log: EventLog, scratch: ScratchStore, live_prefix: str, distinct: str
    ) -> None:
        self.c, self.log, self.scratch = c, log, scratch
        self.live_prefix, self.scratch_prefix = live_prefix, scratch.dialect.schema_prefix
        self.distinct = distinct  # the null-safe "differs" operator
        self.last_id = log.last_id(c)

    def notifications(self, after: int, limit: int) -> Sequence[Notification]:
        return self.log.select(self.c, "{id} > ? AND {id} <= ?", (after, self.last_id), limit)

    def notifications_of(
        self, topics: Collection[str], after: int, upto: int
    ) -> Sequence[Notification]:
        return self.log.of_topics(self.c, topics, after, min(upto, self.last_id))

    def apply(self, changes: Sequence[p.RowChange]) -> None:
        self.scratch.apply_changes_in_bulk(self.c, changes)

    def tables(self) -> dict[str, tuple[str, ...]]:
        return table_keys()

    def columns(self, table: str) -> list[str]:
        self.c.execute(f"SELECT * FROM {self.scratch_prefix}{q(table)} LIMIT 0")
        return [column[0] for column in self.c.description]

    def row_counts(self, table: str) -> tuple[int, int]:
        self.c.execute(
            f"SELECT (SELECT COUNT(*) FROM {self.live_prefix}{q(table)}) AS live, "
            f"(SELECT COUNT(*) FROM {self.scratch_prefix}{q(table)}) AS rebuilt"
        )
        row = self.c.fetchone()
        return int(row["live"]), int(row["rebuilt"])

    def differences(
        self, table: str
    ) -> Iterator[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
        keys, columns = table_keys()[table], self.columns(table)
        self.c.execute(self._diff_sql(table, keys, columns))
        first = keys[0]
        for row in self.c:
            values = dict(row)
            live = {c: neutral(values[f"l_{c}"]) for c in columns}
            rebuilt = {c: neutral(values[f"r_{c}"]) for c in columns}
            yield (
                None if values[f"l_{first}"] is None else live,
                None if values[f"r_{first}"] is None else rebuilt,
            )

    def _diff_sql(self, table: str, keys: tuple[str, ...], columns: list[str]) -> str:
        live, scratch = self.live_prefix + q(table), self.scratch_prefix + q(table)
        select = ", ".join(
            [f"l.{q(c)} AS {q('l_' + c)}" for c in columns]
            + [f"r.{q(c)} AS {q('r_' + c)}" for c in columns]
        )
        on = " AND ".join(f"l.{q(k)} = r.{q(k)}" for k in keys)
        values = [c for c in columns if c not in keys]
        changed = " OR ".join(f"l.{q(c)} {self.distinct} r.{q(c)}" for c in values) or "1 = 0"
        order = ", ".join(f"COALESCE({q('l_' + k)}, {q('r_' + k)})" for k in keys)
        first = q(keys[0])
        return (
            f"SELECT * FROM (SELECT {select} FROM {live} l LEFT JOIN {scratch} r ON {on} "
            f"WHERE r.{first} IS NULL OR {changed} "
            f"UNION ALL SELECT {select} FROM {scratch} r LEFT JOIN {live} l ON {on} "
            f"WHERE l.{first} IS NULL) d ORDER BY {order}"
        )

    def replace_live(self) -> None:
        for table in table_keys():
            columns = ", ".join(q(c) for c in self.columns(table))
            self.c.execute(f"DELETE FROM {self.live_prefix}{q(table)}")
            self.c.execute(
                f"INSERT INTO {self.live_prefix}{q(table)} ({columns}) "
                f"SELECT {columns} FROM {self.scratch_prefix}{q(table)}"
            )
