"""The read-model tables, each from ONE column list: its DDL, its key, and the column lists
of its inserts, upserts and reads all come from here.

Column types are holes a backend's `Dialect` fills in: `{id}` (an aggregate id), `{int}`
and `{text}`; `{s}` is the backend's schema prefix and `{keyed}` what follows a table with
a composite key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # "id", "int" or "text": the backend's column type
    constraint: str = ""  # "NOT NULL", "NOT NULL DEFAULT 0", …


@dataclass(frozen=True)
class Table:
    """A read-model table: its columns in order, its key, its secondary indexes."""

    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    #: (index name, its columns as the DDL writes them): secondary indexes.
    indexes: tuple[tuple[str, str], ...] = ()
    #: Stored in its key's order (`{keyed}`) though the key is one column: a table read by
    #: its key on every `changesSince` or drain, where SQLite's rowid table costs a second
    #: search per read (the key's index, then the row).
    clustered: bool = False

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.columns)

    def ddl(self) -> list[str]:
        """The statements creating the table and its indexes (templates)."""
        single = len(self.key) == 1
        parts = []
        for column in self.columns:
            spec = f"{column.name} {{{column.type}}}"
            if column.constraint:
                spec += " " + column.constraint
            if single and column.name == self.key[0]:
                spec += " PRIMARY KEY"
            parts.append(spec)
        table = f"CREATE TABLE IF NOT EXISTS {{s}}{self.name} ({', '.join(parts)}"
        if single:
            table += "){keyed}" if self.clustered else ")"
        else:
            table += f", PRIMARY KEY ({', '.join(self.key)})){{keyed}}"
        indexes = [
            f"CREATE INDEX IF NOT EXISTS {index} ON {{s}}{self.name} ({column})"
            for index, column in self.indexes
        ]
        return [table, *indexes]

    def insert(self, columns: Sequence[str] | None = None) -> str:
        """`INSERT INTO table (columns) VALUES (one ? per column)`: every column by default."""
        names = self.column_names if columns is None else tuple(columns)
        marks = ", ".join("?" for _ in names)
        return f"INSERT INTO {{s}}{self.name} ({', '.join(names)}) VALUES ({marks})"

    def upsert(self, updating: Sequence[str] | None = None) -> str:
        """An insert of every column that, on a key already present, sets `updating` (every
        other column by default) to the inserted values."""
        names = (
            [c for c in self.column_names if c not in self.key] if updating is None else updating
        )
        sets = ", ".join(f"{name} = excluded.{name}" for name in names)
        return f"{self.insert()} ON CONFLICT ({', '.join(self.key)}) DO UPDATE SET {sets}"

    def select(self) -> str:
        """`SELECT every column FROM table` (template)."""
        return f"SELECT {', '.join(self.column_names)} FROM {{s}}{self.name}"


def _id(name: str, constraint: str = "") -> Column:
    return Column(name, "id", constraint)


def _int(name: str, constraint: str = "") -> Column:
    return Column(name, "int", constraint)


def _text(name: str, constraint: str = "") -> Column:
    return Column(name, "text", constraint)


NOT_NULL, ZERO = "NOT NULL", "NOT NULL DEFAULT 0"

REGISTRY = Table(
    "session_registry",
    (
        _id("session_id"), _text("agent_id", NOT_NULL), _text("session_key", NOT_NULL),
        _text("kind", NOT_NULL), _text("label"), _text("parent_key"),
        _int("opened_at", NOT_NULL), _int("updated_at", NOT_NULL), _int("deleted", ZERO),
    ),
    key=("session_id",),
    indexes=(
        ("session_registry_key", "session_key"), ("session_registry_parent", "parent_key"),
        # The overview's and `sessions_list`'s order, read in index order (ADR 040): a
        # store an earlier version wrote gets it on its next open, as every index does.
        ("session_registry_updated", "updated_at DESC, session_key"),
    ),
    clustered=True,
)  # fmt: skip
HEADS = Table(
    "session_state_heads",
    (_id("session_id"), _int("state_version", NOT_NULL), _int("pruned_watermark", NOT_NULL)),
    key=("session_id",),
    clustered=True,
)
#: The retained `changesSince` rows, with their recording position (a notification id).
EVENTS = Table(
    "session_state_events",
    (
        _id("session_id", NOT_NULL), _int("sequence", NOT_NULL), _int("position", NOT_NULL),
        _text("kind", NOT_NULL), _text("actor_type", NOT_NULL), _text("actor_id"),
        _text("run_id"), _int("occurred_at", NOT_NULL), _text("summary", NOT_NULL),
        _text("payload"), _int("recorded_at", NOT_NULL),
    ),
    key=("session_id", "sequence"),
    indexes=(
        ("session_state_events_position", "position"),
        ("session_state_events_recorded", "recorded_at"),
    ),
)  # fmt: skip
CURSORS = Table(
    "session_watch_cursors",
    (
        _id("watch_id"), _text("watcher_key", NOT_NULL), _id("target_id", NOT_NULL),
        _text("target_key", NOT_NULL), _int("acknowledged", NOT_NULL),
        _int("notified", NOT_NULL), _int("material", NOT_NULL), _int("notice_order"),
        _int("updated_at", NOT_NULL),
    ),
    key=("watch_id",),
    indexes=(
        ("session_watch_cursors_watcher", "watcher_key"),
        ("session_watch_cursors_target", "target_id"),
        ("session_watch_cursors_updated", "updated_at"),
        # The console's cursor pages, in their order (watcher, target, target id), a page
        # read in index order, not every cursor sorted; a store an earlier version wrote
        # gets it on its next open, as every index does.
        (
            "session_watch_cursors_pairs",
            "watcher_key{bytewise}, target_key{bytewise}, target_id",
        ),
    ),
)  # fmt: skip
LINKS = Table(
    "session_upstream_links",
    (
        _id("session_id"), _text("catalog_id", NOT_NULL), _text("host_id", NOT_NULL),
        _text("thread_id", NOT_NULL), _text("upstream_kind", NOT_NULL),
        _text("upstream_ref", NOT_NULL), _text("marker"), _text("last_position"),
        _int("generation", NOT_NULL), _int("linked_at", NOT_NULL), _int("updated_at", NOT_NULL),
    ),
    key=("session_id",),
)  # fmt: skip
#: What the log knows of a session beyond its head, and the host's marks: one row per
#: session ever opened, so a registry row without one was written by an earlier version
#: (`read_models_outdated`).
ACTIVITY = Table(
    "session_activity",
    (
        _id("session_id"), _text("channel"), _text("run_id"), _text("run_status"),
        _int("run_started_at"), _int("run_ended_at"), _int("pinned", ZERO),
        _int("archived", ZERO),
    ),
    key=("session_id",),
)  # fmt: skip
#: Every idempotency key each session recorded (R-L5), written from its signals and never
#: removed (not by retention nor by deletion: a reopened session keeps its keys). Each
#: session opened has the empty key `INDEXED` too, so a registry row without it was written
#: by an earlier version (`read_models_outdated`).
KEYS = Table(
    "session_dedupe_keys",
    (_id("session_id", NOT_NULL), _text("dedupe_key", NOT_NULL)),
    key=("session_id", "dedupe_key"),
)
#: The key every opened session has in `KEYS` (no producer's key is empty).
INDEXED = ""

#: What every cursor's M is derived from (ADR 023): the session's newest notify-eligible
#: event (sequence, actor, recording time) and the newest one by another actor than that.
#: One row per session ever opened, like `session_activity`.
MATERIAL = Table(
    "session_material",
    (
        _id("session_id"), _int("material", ZERO), _text("material_actor"),
        _int("material_at", ZERO), _int("material_other", ZERO),
        _int("material_other_at", ZERO),
    ),
    key=("session_id",),
    clustered=True,
)  # fmt: skip

# -- the cursor rules SQL filters on, each spelled once ---------------------------------------

#: A cursor `c` with a pending notice: N > L (`Watch.pending`).
PENDING = "c.notified > c.acknowledged"
#: A cursor `c` without one: N = L.
SYNCED = "c.notified = c.acknowledged"


def reached(watcher: str, mark: str = "", *, row: str = "m.") -> str:
    """`domain/material.py`'s `reached` in SQL: the newest material (`mark` "" its sequence,
    "_at" its time) of the `session_material` row `row` not caused by `watcher`, an SQL
    expression (R-W5). A NULL actor equals nothing, as `caused_by` has it: nobody's event."""
    return (
        f"CASE WHEN {row}material_actor = {watcher} "
        f"THEN {row}material_other{mark} ELSE {row}material{mark} END"
    )


#: A cursor `c`'s M, derived from its target's `session_material` row `m` (ADR 023,
#: `material.derived`): the newest material not caused by the watcher, never below what the
#: cursor stored (it started there).
DERIVED_MATERIAL = f"{{greatest}}(c.material, COALESCE({reached('c.watcher_key')}, 0))"
#: When the cursor last moved (R-W6's idle time, `notices.last_moved`): its own last update,
#: or the newest material that reached it, whichever is later.
DERIVED_UPDATED = f"{{greatest}}(c.updated_at, COALESCE({reached('c.watcher_key', '_at')}, 0))"
#: A notify-eligible event by the actor `?` moves the target's marks (`material.moved`): it
#: is the newest, and the newest by another actor is what the row's marks say the actor did
#: not cause; unless that is given (not NULL: two events folded into one write). `SET` reads
#: the row as it was. Parameters: `writes.material_params`.
MATERIAL_MOVED = (
    "UPDATE {s}session_material SET "
    "material_other = COALESCE(CAST(? AS {int}), "
    f"{reached('?', row='')}), "
    "material_other_at = CASE WHEN CAST(? AS {int}) IS NOT NULL THEN CAST(? AS {int}) "
    f"ELSE {reached('?', '_at', row='')} END, "
    "material = ?, material_at = ?, material_actor = ? WHERE session_id = ?"
)

#: The store's marks, by name: `store_version`, the store format the newest version that
#: opened the store migrated it to (ADR 035). Not a read model: no event writes it, and an
#: audit neither compares nor rebuilds it.
MARKS = Table("session_awareness_marks", (_text("name"), _int("value", NOT_NULL)), key=("name",))
STORE_VERSION_MARK = "store_version"
#: The read-model format (`READ_MODELS_FORMAT`) a start or the maintenance last found complete
#: in this store, or rebuilt it to (ADR 044): a start on a store marked with its own format
#: skips `read_models_outdated`.
READ_MODELS_MARK = "read_models_complete"

#: Every read-model table, in creation order.
TABLES = (REGISTRY, HEADS, EVENTS, CURSORS, LINKS, ACTIVITY, MATERIAL, KEYS)
#: Read-model tables and the order an audit compares their rows in (their keys).
READ_MODEL_TABLES = {table.name: ", ".join(table.key) for table in TABLES}
#: The statements creating every read-model table and index (templates).
READ_MODEL_DDL = [statement for table in (*TABLES, MARKS) for statement in table.ddl()]
