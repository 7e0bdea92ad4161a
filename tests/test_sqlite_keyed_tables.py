"""SQLite's layout and statements for the reads every `changesSince` and every drain makes
(issue 39): the tables read by their one-column key are stored in that key's order, a store
written before keeps its rowid tables and answers the same, and the row source of the saves'
held-version checks gives what the checks ask of it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from uuid import UUID, uuid4

from session_awareness.application import open_service
from session_awareness.infrastructure.readmodel.sqlite_recorder import SQLITE
from session_awareness.infrastructure.readmodel.tables import HEADS, MATERIAL, REGISTRY, TABLES
from session_awareness.testing.doubles import FakeClock

CLUSTERED = {REGISTRY.name, HEADS.name, MATERIAL.name}


def _ddl(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as c:
        return dict(c.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))


def test_the_tables_a_status_and_a_drain_read_by_key_are_stored_in_key_order(
    tmp_path: Path,
) -> None:
    """R-S1: the head a `changesSince` answer reads, with the registry row that says the
    session is live, and the material every drained cursor's M is derived from, are each
    one search of a table stored in its key's order (`WITHOUT ROWID`); the other one-column
    keys stay rowid tables."""
    path = tmp_path / "s.db"
    open_service(f"sqlite:///{path}", clock=FakeClock()).close()
    ddl = _ddl(path)
    for table in TABLES:
        if len(table.key) == 1:
            assert ddl[table.name].endswith("WITHOUT ROWID") == (table.name in CLUSTERED)


def test_a_store_with_rowid_tables_answers_as_before(tmp_path: Path) -> None:
    """R-S1, R-S3: a store an earlier version created (the registry, head and material as
    rowid tables) is read and written as it is: `CREATE TABLE IF NOT EXISTS` leaves it, and
    the statements do not depend on the layout."""
    path = tmp_path / "s.db"
    clock = FakeClock()
    svc = open_service(f"sqlite:///{path}", clock=clock)
    svc.open_session("agent:main:main")
    svc.open_session("agent:main:subagent:a", parent="agent:main:main")
    svc.close()
    with sqlite3.connect(path) as c:  # the earlier layout, rows kept
        for table in (REGISTRY, HEADS, MATERIAL):
            c.execute(f"ALTER TABLE {table.name} RENAME TO old_{table.name}")
            c.execute(table.ddl()[0].replace("{s}", "").format(
                id="TEXT", int="INTEGER", text="TEXT", keyed=""
            ))  # fmt: skip
            c.execute(f"INSERT INTO {table.name} SELECT * FROM old_{table.name}")  # noqa: S608 -- fixed names
            c.execute(f"DROP TABLE old_{table.name}")
    assert not any(_ddl(path)[t].endswith("WITHOUT ROWID") for t in CLUSTERED)
    svc = open_service(f"sqlite:///{path}", clock=clock)
    try:
        child = "agent:main:subagent:a"
        before = svc.session_status(child)["stateVersion"]
        svc.record_human_direct_message(child, channel="telegram")
        status = svc.session_status(child, changes_since=before)
        assert status["stateVersion"] == before + 1
        assert [e["sequence"] for e in status["stateChanges"]["events"]] == [before + 1]
        assert svc.drain_notices("agent:main:main")
        assert svc.audit().clean
    finally:
        svc.close()


def _held(rows: list[tuple[UUID, int, int]], events: list[tuple[UUID, int, int]]) -> set[str]:
    """The ids the saves' check finds moved: an event of the id past the version given,
    stored before the position given; run on SQLite's row source of `rows`."""
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE e (originator_id TEXT, originator_version INTEGER, position INTEGER)")
    c.executemany("INSERT INTO e VALUES (?, ?, ?)", [(i.hex, v, p) for i, v, p in events])
    source, params = SQLITE.ids_with_versions(rows)
    found = c.execute(
        f"SELECT DISTINCT d.id FROM {source} JOIN e ON e.originator_id = d.id "  # noqa: S608 -- the dialect's row source; values are bound
        "AND e.originator_version > d.version AND e.position < d.position",
        params,
    ).fetchall()
    return {row[0] for row in found}


def test_the_held_versions_row_source_finds_exactly_the_moved_ids() -> None:
    """R-N3, R-T3: the check a drain (its cursors) and a spawn (the ancestry it read) make
    before they commit finds an id whose newer event was stored before the save, whatever
    the number of ids and positions, and an id given twice at one position is held at its
    lower version."""
    a, b, c, d = uuid4(), uuid4(), uuid4(), uuid4()
    events = [(a, 3, 10), (b, 2, 10), (c, 5, 30), (d, 4, 50)]
    assert _held([(a, 2, 20), (b, 2, 20)], events) == {a.hex}
    assert _held([(a, 3, 20), (b, 1, 5)], events) == set()  # b's event is after position 5
    assert _held([(c, 4, 40), (d, 3, 40), (a, 2, 20)], events) == {c.hex, a.hex}
    assert _held([(d, 4, 60), (d, 3, 60)], events) == {d.hex}  # held at 3: 4 is newer
    assert _held([(d, 3, 60), (d, 4, 60)], events) == {d.hex}
    assert _held([(d, 3, 40), (d, 3, 60)], events) == {d.hex}  # one position of two sees it
