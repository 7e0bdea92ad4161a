"""Row changes written in bulk: the end state of `apply_changes` in a few `executemany`s.

A rebuild's pages (`replace_read_models`, an audit's scratch) always go this way; a save
goes this way when it has `BULK_INLINE` row changes or more (a drain, a wide fan-out), and
one statement at a time otherwise.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any
from uuid import UUID

from session_awareness.application import projection as p
from session_awareness.infrastructure.readmodel.writes import (
    WRITES,
    ReadModelWrites,
    Row,
    Write,
    wakes,
)

#: Row changes from which a save's inline projection is written in bulk.
BULK_INLINE = 16


class BulkWrites(ReadModelWrites):
    def apply_inline(
        self, c: Any, changes: Sequence[p.RowChange], quiet: Collection[UUID] = ()
    ) -> None:
        """The inline path (in the transaction that stores the events): a save's few changes
        one statement at a time; a large one in bulk, then a wake for every notice it
        opened on a cursor not in `quiet` (R-W7)."""
        if len(changes) < BULK_INLINE:
            self.apply_changes(c, changes, quiet)
            return
        self.apply_changes_in_bulk(c, changes)
        for change in changes:
            if wakes(change, quiet):
                self.notice_opened(c, change.watch_id)  # type: ignore[union-attr]

    def apply_changes_in_bulk(self, c: Any, changes: Iterable[p.RowChange]) -> None:
        """Write row changes with the end state of `apply_changes`, in a few `executemany`s.
        Every statement touches the rows of one key of one table (a session's, a cursor's),
        so statements on different keys commute: each key's writes keep their order,
        consecutive writes of one foldable statement to one key become one (the head's
        `GREATEST` of several sequences, a cursor's last positions), and the n-th writes of
        every key go together, one `executemany` per statement. It publishes no wakes."""
        bind = self.dialect.bind_id
        keyed: dict[tuple[str, Any], list[tuple[Write, list[Row]]]] = {}
        for change in changes:
            for write, key, params in WRITES[type(change)](bind, change):
                ops = keyed.get((write.table, key))
                if ops is None:
                    keyed[write.table, key] = [(write, [params])]
                    continue
                last, rows = ops[-1]
                if last is not write:
                    ops.append((write, [params]))
                elif write.fold is None:
                    rows.append(params)
                else:
                    rows[-1] = write.fold(rows[-1], params)
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

    def write_batches(self, c: Any, batches: dict[Write, list[Row]]) -> None:
        """Run each statement once per row given; the statements commute (different keys)."""
        for write, rows in batches.items():
            c.executemany(self.sql(write.template), rows)
