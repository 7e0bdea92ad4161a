"""Row changes written in bulk: the end state of `apply_changes` in a few `executemany`s.

A rebuild's pages (an audit's scratch, a test's rebuild) always go this way; a save
goes this way when it has `BULK_INLINE` row changes or more (a drain, a wide fan-out), and
one statement at a time otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any
from uuid import UUID

from session_awareness.application import projection as p
from session_awareness.infrastructure.readmodel.dialect import Dialect
from session_awareness.infrastructure.readmodel.tables import DERIVED_MATERIAL, SYNCED
from session_awareness.infrastructure.readmodel.writes import (
    WRITES,
    ReadModelWrites,
    Row,
    Write,
    wakes,
)

#: Row changes from which a save's inline projection is written in bulk.
BULK_INLINE = 16

#: A cursor that is synced (L = N) below its derived M: a notice was lost (ADR 023).
_BEHIND = (
    "SELECT 1 FROM {s}session_watch_cursors c JOIN {s}session_material m "  # noqa: S608 -- fixed fragments; values are bound
    f"ON m.session_id = c.target_id WHERE ({{where}}) AND {SYNCED} "
    f"AND c.notified < {DERIVED_MATERIAL}"
)


class _Keep(dict[str, str]):
    """Fills `{where}` and keeps every other hole for the dialect."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def behind_query(
    dialect: Dialect, targets: Collection[UUID], cursors: Collection[UUID | str]
) -> tuple[str, list[Any]]:
    """The template and parameters of the query for a cursor on one of `targets`, or one of
    `cursors` (ids, or their hex), that is synced below its derived M (at least one of the
    two given)."""
    clauses, params = [], []
    for column, ids in (("c.target_id", targets), ("c.watch_id", cursors)):
        if ids:
            clause, param = dialect.one_of_ids(column, ids)
            clauses.append(clause)
            params.append(param)
    return _BEHIND.format_map(_Keep(where=" OR ".join(clauses))), params


def held_before(
    held: Collection[tuple[UUID, int]], ids: Sequence[int] | None
) -> list[tuple[UUID, int, int]]:
    """The sessions a save read without writing them (`held_sessions`: id, version), each
    to be unchanged before the save's first event (`ids[0]`)."""
    if not held or not ids:
        return []
    first = ids[0]
    return [(sid, version, first) for sid, version in held]


class BulkWrites(ReadModelWrites):
    def apply_inline(
        self,
        c: Any,
        changes: Sequence[p.RowChange],
        quiet: Collection[UUID] = (),
        held: Sequence[tuple[UUID, int, int]] = (),
        read_at: int | None = None,
    ) -> None:
        """The inline path (in the transaction that stores the events): a save's few changes
        one statement at a time; a large one in bulk, then a wake for every notice it
        opened on a cursor not in `quiet` (R-W7). `held`: the sessions the save read without
        writing them (`held_before`), checked unchanged (`check_sessions_held`). `read_at`:
        the notification id the command's every read came after (`UnitOfWork.look_first`),
        if it says so."""
        self.write_inline(c, changes, quiet)
        self.check_inline(c, changes, held, read_at)

    def write_inline(
        self, c: Any, changes: Sequence[p.RowChange], quiet: Collection[UUID] = ()
    ) -> None:
        """`apply_inline`'s writes: the rows and the wakes, without the checks."""
        if len(changes) < BULK_INLINE:
            self.apply_changes(c, changes, quiet)
        else:
            self.apply_changes_in_bulk(c, changes)
            for change in changes:
                if wakes(change, quiet):
                    self.notice_opened(c, change.watch_id)  # type: ignore[union-attr]
                elif type(change) is p.CursorsAcknowledged:
                    for watch_id in change.reopened():
                        if watch_id not in quiet:
                            self.notice_opened(c, watch_id)

    def check_inline(
        self,
        c: Any,
        changes: Sequence[p.RowChange],
        held: Sequence[tuple[UUID, int, int]] = (),
        read_at: int | None = None,
        ids: Sequence[int] | None = None,
    ) -> None:
        """`apply_inline`'s checks, after its writes: a drain's two race checks unless it was
        `_unraced`, and the `held` sessions'. `ids`: the notification ids the insert gave,
        when the changes name their events by index (a save projected before its insert)."""
        if read_at is not None:  # a drain no other save came between its reads and it
            changes = [ch for ch in changes if not _unraced(ch, read_at, ids)]
        self.check_no_cursor_behind(c, changes)
        self.check_cursors_held(c, changes)
        if held:  # a spawn's or an open's: the others pay nothing, not even the call
            self.check_sessions_held(c, held)

    def check_no_cursor_behind(self, c: Any, changes: Sequence[p.RowChange]) -> None:
        """Refuse, as a conflict the service retries, a save that leaves a cursor it touched
        (one on a target whose material moved, or one it synced) synced below its derived M
        (ADR 023). A pending cursor stores nothing when M moves, so a record that read a
        cursor as pending and a drain that synced it meanwhile commit without a version
        conflict; this is where the one that commits second finds out. The save's writes are
        serialized (SQLite's write lock, PostgreSQL's table lock), so the check is exact."""
        targets = {ch.session_id for ch in changes if type(ch) is p.MaterialMoved}
        cursors: set[UUID | str] = set()  # a cursor left pending cannot be synced below anything
        for ch in changes:
            if type(ch) is p.CursorMoved:
                if ch.notified == ch.acknowledged:
                    cursors.add(ch.watch_id)
            elif type(ch) is p.CursorsAcknowledged:  # the ids as the drain stores them: hex
                cursors.update(e[0] for e in ch.entries if e[3] == e[2])
        if not targets and not cursors:
            return
        template, params = behind_query(self.dialect, targets, cursors)
        self.fail_if_any(
            c, template, params, "a cursor would be synced below its target's material; read again"
        )

    def check_cursors_held(self, c: Any, changes: Sequence[p.RowChange]) -> None:
        """Refuse, as a conflict the service retries, a drain one of whose cursors has an
        event newer than the version the drain read, stored before the drain (ADR 024): a
        drain stores nothing on the cursors, so no version conflict tells it that a restart,
        a removal or a promotion committed after its read. A later event of the same save
        supersedes the entry as any later event does. Exact for the same reason as
        `check_no_cursor_behind`."""
        held: list[tuple[UUID | str, int, int]] = [
            (e[0], e[1], ch.position)
            for ch in changes
            if type(ch) is p.CursorsAcknowledged
            for e in ch.entries
        ]
        if not held:
            return
        source, params = self.dialect.ids_with_versions(held)
        template = (
            f"SELECT 1 FROM {source} JOIN {{s}}{self.events_table_name} e "  # noqa: S608 -- fixed fragments and the library's table name; values are bound
            "ON e.originator_id = d.id AND e.originator_version > d.version "
            f"AND e.{self.notification_id_column} < d.position"
        )
        message = "a drained cursor moved after the drain read it; read again"
        self.fail_if_any(c, template, list(params), message)

    def check_sessions_held(self, c: Any, held: Sequence[tuple[UUID, int, int]]) -> None:
        """Refuse, as a conflict the service retries, a save one of whose sessions it read
        without writing (a new parent's ancestry, R-T3) has an event past the version it
        read, stored before the save's first event: two spawn edges checked against the
        ancestry each read would otherwise both land and close a cycle. Exact for the same
        reason as `check_no_cursor_behind`."""
        if not held:
            return
        source, params = self.dialect.ids_with_versions(held)
        template = (
            f"SELECT 1 FROM {source} JOIN {{s}}{self.events_table_name} e "  # noqa: S608 -- fixed fragments and the library's table name; values are bound
            "ON e.originator_id = d.id AND e.originator_version > d.version "
            f"AND e.{self.notification_id_column} < d.position"
        )
        message = "a session the save read moved after it read it; read again"
        self.fail_if_any(c, template, list(params), message)

    #: The library's event table (the recorder's) and its notification id column.
    events_table_name: str
    notification_id_column: str

    def fail_if_any(self, c: Any, template: str, params: Sequence[Any], message: str) -> None:
        """Raise an integrity error (a conflict) inside the transaction when the query of
        `template` has a row."""
        raise NotImplementedError

    def apply_changes_in_bulk(self, c: Any, changes: Iterable[p.RowChange]) -> None:
        """Write row changes with the end state of `apply_changes`, in a few `executemany`s.
        Every statement touches the rows of one key of one table (a session's, a cursor's),
        so statements on different keys commute: each key's writes keep their order,
        consecutive writes of one foldable statement to one key become one (the head's
        `GREATEST` of several sequences, a cursor's last positions), and the n-th writes of
        every key go together, one `executemany` per statement. It publishes no wakes."""
        bind, writes_of = _last_bound(self.dialect.bind_id), WRITES
        keyed: dict[tuple[str, Any], list[tuple[Write, list[Row]]]] = {}
        ops_of = keyed.get
        for change in changes:
            for write, key, params in writes_of[type(change)](bind, change):
                slot = write.table, key
                ops = ops_of(slot)
                if ops is None:
                    keyed[slot] = [(write, [params])]
                    continue
                last, rows = ops[-1]
                if last is not write:
                    joined = _joinable(ops, write) if write.lane is not None else None
                    if joined is None:
                        ops.append((write, [params]))
                        continue
                    rows = joined
                fold = write.fold
                if fold is None:
                    rows.append(params)
                else:
                    rows[-1] = fold(rows[-1], params)
        layer = 0
        while keyed:
            batches: dict[Write, list[Row]] = {}
            for ops in keyed.values():
                write, rows = ops[layer]
                batch = batches.get(write)
                if batch is None:
                    batches[write] = rows
                else:
                    batch.extend(rows)
            self.write_batches(c, batches)
            layer += 1
            keyed = {key: ops for key, ops in keyed.items() if len(ops) > layer}


def _unraced(change: p.RowChange, read_at: int, ids: Sequence[int] | None = None) -> bool:
    """Whether the change is a drain's stored right after the position every read of its
    command followed: ids are given in commit order (SQLite's write lock, PostgreSQL's
    table lock), so no other save came between, and neither check can find a race. With
    `ids`, the change's position is its event's index in them."""
    if type(change) is not p.CursorsAcknowledged:
        return False
    position = change.position if ids is None else ids[change.position]
    return position == read_at + 1


def _last_bound(bind: Callable[[UUID], Any]) -> Callable[[UUID], Any]:
    """`bind`, answering again without binding when given the same id object as last time:
    a page's consecutive changes are mostly one aggregate's (a replay's events share its
    id object), and binding an id is a conversion each time."""
    last_id: UUID | None = None
    last: Any = None

    def bound(value: UUID) -> Any:
        nonlocal last_id, last
        if value is not last_id:
            last_id, last = value, bind(value)
        return last

    return bound


def _joinable(ops: list[tuple[Write, list[Row]]], write: Write) -> list[Row] | None:
    """The rows of the latest op of a key that a write with a lane joins: one of the same
    write that only writes of other lanes follow (they commute with it: a session's channel
    between its run reports)."""
    for op, rows in reversed(ops):
        if op is write:
            return rows
        if op.lane is None or op.lane == write.lane:
            return None
    return None
