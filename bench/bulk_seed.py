"""Seeding a PostgreSQL store of a million sessions in minutes: the service's own rows,
replicated.

`seed.Batch` runs the producers' logic at about 1,460 events/s here, 2.5 hours for the ten
million events of `bench.scale`'s default. This path runs that logic only for a few template
families (`bench.scale.seed_family`, each saved on its own so its events are contiguous in
the notification order), in a scratch database of the same cluster; it reads back every row
they wrote, the stored events and every read-model table, and writes family after family of
copies with COPY, each copy's values substituted:

- the agent id and the keys (`a9000003` → `a1234`, in every text column and inside each
  event's JSON);
- every aggregate id, the sessions', their cursors' and the parent's drains' (the ids derive
  from the keys: `SessionRef.of`, `watch_id`, `drains_id`), in their columns and inside the
  JSON (hex there);
- the notification ids: the events' own, and the read models' columns that hold one
  (`session_state_events.position`, `session_watch_cursors.notice_order`), shifted by the
  family's place in the store.

Timestamps are the template's: every copy of a family was recorded at the same instants, as
a fleet of identical agents started together would be. Family `n` copies template `n % 7`,
and template 0 drains a pair, as `scale.seed` drains every seventh family.

The store's tables lose their indexes and keys while they are loaded and get them back
after (`ANALYZE` then). What it wrote is checked by `audit` on a small store seeded the same
way (`tests/test_bulk_seed.py`) and by the service's reads in `bench.scale`.
"""

from __future__ import annotations

import random
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg

from session_awareness.application import open_service
from session_awareness.infrastructure.readmodel.tables import TABLES

#: Template families (family `n` copies template `n % TEMPLATES`); template 0 drains a pair.
TEMPLATES = 7
#: The template families' numbers: `a9000000`… no seeded family reaches.
TEMPLATE_BASE = 9_000_000
#: The read-model columns that hold a notification id (the event's place in the store).
POSITIONS = {"session_state_events": "position", "session_watch_cursors": "notice_order"}
#: Families rendered and written per COPY chunk.
CHUNK = 500
EVENT_COLUMNS = ("originator_id", "originator_version", "topic", "state", "notification_id")


def _copy_text(value: Any) -> str:
    """A value in COPY's text format."""
    if value is None:
        return "\\N"
    if isinstance(value, bytes):
        text = value.decode("ascii")  # the events' JSON: checked printable ASCII below
        if "\\" in text or not text.isprintable():
            raise ValueError(f"an event's state needs escaping: {text[:80]!r}")
        return text  # bytea's escape input: every printable octet but the backslash as is
    text = str(value)
    if any(c in text for c in "\\\t\n\r"):
        raise ValueError(f"a value needs escaping: {text!r}")
    return text


@dataclass
class Stencil:
    """A family's rows of one table as COPY text, cut at every substituted value: even
    pieces are literal text, odd ones the names of the values a copy fills in."""

    table: str
    columns: tuple[str, ...]
    pieces: list[str]
    rows: int

    def render(self, values: dict[str, str]) -> str:
        pieces = self.pieces
        out = pieces[:]
        for index in range(1, len(pieces), 2):
            out[index] = values[pieces[index]]
        return "".join(out)


def _family_ids(number: int) -> list[UUID]:
    from bench.scale import family_ids  # noqa: PLC0415 -- bench.scale imports this module

    return family_ids(number)


def _tokens(number: int) -> dict[str, str]:
    """Every substituted value of family `number`, by a name shared by all families."""
    ids = _family_ids(number)
    values = {f"<id{i}>": str(uid) for i, uid in enumerate(ids)}
    values |= {f"<hex{i}>": uid.hex for i, uid in enumerate(ids)}
    values["<agent>"] = f"a{number}"
    return values


class Template:
    """The template families' rows, read back from the scratch store, as stencils."""

    def __init__(self, raw_url: str) -> None:
        self.stencils: list[dict[str, Stencil]] = []
        #: Each template's first notification id and its events' count.
        self.spans: list[tuple[int, int]] = []
        with psycopg.connect(raw_url) as conn:
            self.events_table = _events_table(conn)
            for t in range(TEMPLATES):
                self._read(conn, t)

    def _read(self, conn: psycopg.Connection[Any], t: int) -> None:
        number = TEMPLATE_BASE + t
        ids = _family_ids(number)
        named = _tokens(number)
        # The template's own values, longest first, each with the name of its slot.
        literal = {value: name for name, value in named.items() if name != "<agent>"}
        literal |= {f":a{number}:": ":<agent>:", f'"a{number}"': '"<agent>"'}
        events = conn.execute(
            f"SELECT {', '.join(EVENT_COLUMNS)} FROM {self.events_table} "  # noqa: S608
            "WHERE originator_id = ANY(%s) ORDER BY notification_id",
            (ids,),
        ).fetchall()
        first = events[0][4]
        if [row[4] for row in events] != list(range(first, first + len(events))):
            raise RuntimeError(f"template {t}'s events are not contiguous")
        self.spans.append((first, len(events)))
        stencils = {self.events_table: self._stencil(
            self.events_table, EVENT_COLUMNS, events, literal, positions={4}, first=first,
            agent=f"a{number}",
        )}  # fmt: skip
        for table in TABLES:
            columns = table.column_names
            id_column = columns[0]
            rows = conn.execute(
                f"SELECT {', '.join(columns)} FROM {table.name} "  # noqa: S608
                f"WHERE {id_column} = ANY(%s) ORDER BY {', '.join(table.key)}",
                (ids,),
            ).fetchall()
            position = POSITIONS.get(table.name)
            at = {columns.index(position)} if position else set()
            stencils[table.name] = self._stencil(
                table.name, columns, rows, literal, positions=at, first=first,
                agent=f"a{number}",
            )  # fmt: skip
        self.stencils.append(stencils)

    @staticmethod
    def _stencil(
        table: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        literal: dict[str, str],
        *,
        positions: set[int],
        first: int,
        agent: str,
    ) -> Stencil:
        """Cut the rows' COPY text at each value a copy substitutes."""
        lines = []
        for row in rows:
            cells = []
            for index, value in enumerate(row):
                if index in positions and value is not None:
                    cells.append(f"<pos{int(value) - first}>")
                elif value == agent:
                    cells.append("<agent>")
                else:
                    cells.append(_copy_text(value))
            lines.append("\t".join(cells) + "\n")
        text = "".join(lines)
        for value in sorted(literal, key=len, reverse=True):
            text = text.replace(value, literal[value])
        for leftover in (agent,):  # every occurrence must have become a slot
            if re.search(rf"\b{leftover}\b", text):
                raise RuntimeError(f"{table}: the template's {leftover} was left in a row")
        pieces = re.split(r"(<(?:id\d+|hex\d+|agent|pos\d+)>)", text)
        return Stencil(table, tuple(columns), pieces, len(rows))


def _events_table(conn: psycopg.Connection[Any]) -> str:
    rows = conn.execute(
        "SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' "
        "AND column_name = 'notification_id' AND table_name LIKE '%%\\_events'"
    ).fetchall()
    if len(rows) != 1:
        raise RuntimeError(f"cannot tell the stored events' table: {rows!r}")
    return str(rows[0][0])


def seed_templates(url: str) -> None:
    """The template families through the producers' logic, each saved on its own."""
    from bench.scale import FreshBatch, seed_family  # noqa: PLC0415 -- see _family_ids

    svc = open_service(url, maintenance="manual")
    try:
        batch = FreshBatch(svc, size=1 << 30)
        for t in range(TEMPLATES):
            rng = random.Random(t)  # noqa: S311 -- a seeded mix, not crypto
            seed_family(batch, TEMPLATE_BASE + t, rng, drained=t == 0)
            batch.flush()  # one family's events together in the notification order
    finally:
        svc.close()


@dataclass
class _Index:
    drop: str
    create: str


def _indexes(conn: psycopg.Connection[Any], table: str) -> list[_Index]:
    """The table's keys and indexes: how to drop and recreate each."""
    found = []
    constraints = conn.execute(
        "SELECT conname, pg_get_constraintdef(oid), conindid FROM pg_constraint "
        "WHERE conrelid = %s::regclass AND contype IN ('p', 'u')",
        (table,),
    ).fetchall()
    backing = {row[2] for row in constraints}
    for name, definition, _ in constraints:
        found.append(_Index(
            f'ALTER TABLE {table} DROP CONSTRAINT "{name}"',
            f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}',
        ))  # fmt: skip
    rows = conn.execute(
        "SELECT i.indexrelid, c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i "
        "JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = %s::regclass",
        (table,),
    ).fetchall()
    for oid, name, definition in rows:
        if oid not in backing:
            found.append(_Index(f'DROP INDEX "{name}"', definition))
    return found


def bulk_seed(
    url: str, raw_url: str, template_url: str, families: int, *, progress: bool = False
) -> tuple[int, float]:
    """`families` families (five sessions each) into the store at `url` (created by opening
    the service on it), replicated from templates seeded at `template_url`; events stored,
    seconds (the templates included)."""
    started = time.perf_counter()
    open_service(url, maintenance="manual").close()  # the schema, and a new store's marks
    seed_templates(template_url)
    template = Template(template_url.split("?", 1)[0])
    events = 0
    with psycopg.connect(raw_url) as conn:
        conn.execute("SET synchronous_commit = off")
        if conn.execute(f"SELECT count(*) FROM {template.events_table}").fetchone() != (0,):  # noqa: S608
            raise RuntimeError("the store to seed is not empty")
        tables = [template.events_table, *(table.name for table in TABLES)]
        dropped = {table: _indexes(conn, table) for table in tables}
        for indexes in dropped.values():
            for index in indexes:
                conn.execute(index.drop)  # type: ignore[arg-type]
        for table in tables:
            stencils = [s[table] for s in template.stencils]
            if not any(stencil.rows for stencil in stencils):
                continue  # no family writes it (the upstream links)
            with conn.cursor().copy(
                f"COPY {table} ({', '.join(stencils[0].columns)}) FROM STDIN"  # type: ignore[arg-type]
            ) as copy:
                for chunk in _chunks(template, stencils, families):
                    copy.write(chunk)
            if table == template.events_table:
                events = sum(template.spans[n % TEMPLATES][1] for n in range(families))
            if progress:
                print(f"  copied {table} ({time.perf_counter() - started:,.0f} s)",
                      file=sys.stderr, flush=True)  # fmt: skip
        for table, indexes in dropped.items():
            for index in indexes:
                conn.execute(index.create)  # type: ignore[arg-type]
            if progress:
                print(f"  indexed {table} ({time.perf_counter() - started:,.0f} s)",
                      file=sys.stderr, flush=True)  # fmt: skip
        conn.execute(
            f"SELECT setval(pg_get_serial_sequence('{template.events_table}', "  # type: ignore[arg-type]
            "'notification_id'), %s)",
            (max(events, 1),),
        )
        conn.commit()
        conn.autocommit = True
        conn.execute("ANALYZE")
    return events, time.perf_counter() - started


def _chunks(template: Template, stencils: list[Stencil], families: int) -> Iterator[str]:
    """The COPY text of every family, `CHUNK` families at a time, notification ids shifted
    to each family's place."""
    base = 1  # the next family's first notification id
    out: list[str] = []
    positions: Callable[[int, int], dict[str, str]] = lambda start, count: {  # noqa: E731
        f"<pos{i}>": str(start + i) for i in range(count)
    }
    for number in range(families):
        t = number % TEMPLATES
        count = template.spans[t][1]
        values = _tokens(number)
        values |= positions(base, count)
        out.append(stencils[t].render(values))
        base += count
        if len(out) >= CHUNK:
            yield "".join(out)
            out = []
    if out:
        yield "".join(out)
