"""The console's cursor pages read one page of cursors from the store, in the order and with
the counts the whole list gave, through an index every store gets (R-O1; issue 39, item 6)."""

from __future__ import annotations

import itertools
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from session_awareness.application import SessionAwareness, open_service
from session_awareness.application.ports import CursorRow
from session_awareness.infrastructure.readmodel.reads import cursor_page_statements
from session_awareness.infrastructure.readmodel.tables import CURSORS
from tests.conftest import FakeClock, ServiceFactory
from tests.contract.helpers import MANAGER, has_index
from tests.ops.helpers import copied_store, tamper

INDEX = "session_watch_cursors_pairs"
#: A store the version before drains wrote (tests/ops/fixtures/make_store_before_drains.py):
#: its DDL had no pairs index.
EARLIER_STORE = Path(__file__).parents[1] / "ops" / "fixtures" / "store-before-drains.db"
#: Watchers whose keys sort differently by code point than by a locale: capitals first,
#: an accented letter after every ASCII one.
WATCHERS = (MANAGER, "agent:main:Zeta", "agent:main:alpha", "agent:main:\u00e9mile")
CHILDREN = ("agent:main:subagent:b", "agent:main:subagent:A", "agent:main:subagent:c")
BARE = "global"
PEER_MAIN = "agent:ops:main"
TARGETS = (*CHILDREN, BARE, PEER_MAIN)
NOBODY = "agent:main:nobody"


def build(svc: SessionAwareness) -> UUID:
    """Several watchers on several targets, one target key on two agents' sessions, pending
    and synced cursors, and ties: every watcher holds several cursors, every target several
    watchers. Returns the id of the other agent's session with the bare key."""
    for watcher in WATCHERS:
        svc.open_session(watcher)
    for number, child in enumerate(CHILDREN):  # the manager watches each child it spawns
        svc.record_child_spawned(child, parent=MANAGER, run_id=f"run-{number}")
    svc.open_session(BARE)
    svc.open_session(BARE, agent_id="ops")
    svc.open_session(PEER_MAIN)
    for watcher in WATCHERS[1:]:
        for target in TARGETS:
            agent = "main" if target == BARE else None
            assert svc.watch(watcher, target, target_agent_id=agent)
    for target in (CHILDREN[0], BARE, PEER_MAIN):  # a notice for every watcher of these
        agent = "main" if target == BARE else None
        svc.record_human_direct_message(target, channel="slack", agent_id=agent)
    svc.drain_notices(WATCHERS[1])  # that watcher's are synced again
    return svc.resolve_id(BARE, "ops")[1]


def with_tie(svc: SessionAwareness, other_bare: UUID) -> None:
    """A cursor of a watcher on the other agent's session of the bare key, written into the
    read model directly (the domain refuses another agent's bare key, R-W3): the watcher
    and the target key tie, the target ids differ."""
    columns = ", ".join(CURSORS.column_names)
    tamper(
        svc,
        f"INSERT INTO {{s}}session_watch_cursors ({columns}) VALUES (?, ?, ?, ?, 1, 2, 2, 9, 1)",  # noqa: S608 -- fixed names
        UUID(int=7),
        WATCHERS[2],
        other_bare,
        BARE,
    )


def whole_list(
    svc: SessionAwareness, watcher: str | None, target: str | None, pending_only: bool
) -> list[CursorRow]:
    """What the console computed before: every cursor read, filtered and sorted here."""
    cursors = [
        c
        for c in svc.read_model.cursors_updated_before(2**62)
        if (watcher is None or c.watcher_key == watcher)
        and (target is None or c.target_key == target)
        and (c.pending or not pending_only)
    ]
    cursors.sort(key=lambda c: (c.watcher_key, c.target_key, c.target_id))
    return cursors


class TestTheCursorPage:
    def test_each_page_and_its_counts_are_the_whole_lists(self, svc: SessionAwareness) -> None:
        """R-O1: for every filter (a watcher, a target key, the pending ones, any of them
        together, one that matches nothing), every page of two or three cursors, and the
        counts, are what filtering and sorting the whole list gave, ties and all."""
        with_tie(svc, build(svc))
        try:
            every = whole_list(svc, None, None, False)
            assert len(every) == 3 + 3 * len(TARGETS) + 1
            # By code point: capitals before small letters, an accent after every ASCII one.
            keys = [key for key, _ in itertools.groupby(c.watcher_key for c in every)]
            assert keys == [WATCHERS[1], WATCHERS[2], MANAGER, WATCHERS[3]]
            assert sum(c.pending for c in every) > 0 and not all(c.pending for c in every)
            ties = [c for c in every if (c.watcher_key, c.target_key) == (WATCHERS[2], BARE)]
            assert len(ties) == 2 and ties[0].target_id < ties[1].target_id
            for watcher, target, pending_only in itertools.product(
                (None, *WATCHERS, NOBODY), (None, *TARGETS, NOBODY), (False, True)
            ):
                expected = whole_list(svc, watcher, target, pending_only)
                for size in (2, 3):
                    for offset in range(0, len(expected) + size, size):
                        rows, total, pending = svc.read_model.cursor_page(
                            watcher_key=watcher, target_key=target, pending_only=pending_only,
                            offset=offset, limit=size,
                        )  # fmt: skip
                        shown = (watcher, target, pending_only, offset)
                        assert rows == expected[offset : offset + size], shown
                        assert total == len(expected), shown
                        assert pending == sum(c.pending for c in expected), shown
        finally:
            tamper(svc, "DELETE FROM {s}session_watch_cursors WHERE watch_id = ?", UUID(int=7))

    def test_a_page_never_reads_the_whole_list(
        self, svc: SessionAwareness, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-O1 (issue 39): a page is read without listing every cursor, which at a
        million sessions is 800,000 rows for one page."""
        build(svc)

        def every_row(before: int) -> Any:
            raise AssertionError(f"a page read every cursor updated before {before}")

        monkeypatch.setattr(svc.store.read_model, "cursors_updated_before", every_row)
        rows, total, _ = svc.read_model.cursor_page(watcher_key=WATCHERS[2], limit=2)
        assert [c.target_key for c in rows] == [CHILDREN[1], CHILDREN[0]]
        assert total == len(TARGETS)

    def test_a_negative_offset_or_limit_is_refused(self, svc: SessionAwareness) -> None:
        """R-O1: a page before the first is the caller's mistake, said so."""
        with pytest.raises(ValueError, match="never negative"):
            svc.read_model.cursor_page(offset=-1, limit=2)
        with pytest.raises(ValueError, match="never negative"):
            svc.read_model.cursor_page(limit=-1)


def page_plan(
    svc: SessionAwareness,
    watcher: str | None = None,
    target: str | None = None,
    *,
    sorts: bool = False,
) -> str:
    """The plan of the page's statement for these filters, as the backend explains it; on
    PostgreSQL with sequential scans priced out (a test's tables are too small for an index
    to pay), and sorts too unless `sorts`, so a Sort left in the plan is one no index can
    spare."""
    models: Any = svc.store.recorder.read_models
    page, _, params = cursor_page_statements(watcher, target, pending_only=False)
    sqlite = models.dialect.placeholder == "?"
    with models.datastore.transaction(commit=False) as c:
        if not sqlite:
            c.execute("SET LOCAL enable_seqscan = off")
            if not sorts:
                c.execute("SET LOCAL enable_sort = off")
        c.execute(models.sql(("EXPLAIN QUERY PLAN " if sqlite else "EXPLAIN ") + page),
                  (*params, 50, 0))  # fmt: skip
        rows = c.fetchall()
    if sqlite:
        return "\n".join(str(row[3]) for row in rows)
    return "\n".join(str(next(iter(row.values()))) for row in rows)


class TestThePairsIndex:
    def test_a_new_store_has_it_and_reads_a_page_in_its_order(self, svc: SessionAwareness) -> None:
        """R-O1: the DDL creates the index with the cursors, and a page of every cursor or
        of one watcher's is read in its order, not sorted; one target key's is its few
        cursors, found through the registry's key and the cursors' target index."""
        assert INDEX in dict(CURSORS.indexes)
        assert has_index(svc, INDEX)
        build(svc)
        for filters in ({}, {"watcher": WATCHERS[1]}):
            plan = page_plan(svc, **filters)
            assert INDEX in plan, plan
            assert "TEMP B-TREE" not in plan and "Sort" not in plan, plan
        plan = page_plan(svc, target=BARE, sorts=True)
        assert "session_watch_cursors_target" in plan and "session_registry_key" in plan, plan

    def test_a_store_without_it_gets_it_on_its_next_open(
        self, open_svc: ServiceFactory, svc: SessionAwareness
    ) -> None:
        """R-O1: on both backends, a store as the previous version left it (the same
        tables, no pairs index) has the index once a new service opened it, and its pages
        are the same as the whole list's."""
        build(svc)
        tamper(svc, "DROP INDEX {s}" + INDEX)
        assert not has_index(svc, INDEX)
        before = whole_list(svc, None, None, False)
        svc.close()
        again = open_svc()
        assert has_index(again, INDEX)
        assert again.read_model.cursor_page(limit=100)[0] == before
        assert again.audit().clean

    def test_a_store_an_earlier_version_wrote_gets_it(
        self, tmp_path: Path, clock: FakeClock
    ) -> None:
        """R-O1: a committed SQLite store of an earlier version lacks the index; opened by
        this version it has it, and its cursors' page is read from it."""
        url = copied_store(EARLIER_STORE, tmp_path)
        path = url.removeprefix("sqlite:///")
        with closing(sqlite3.connect(path)) as db:
            found = db.execute("SELECT name FROM sqlite_master WHERE name = ?", (INDEX,))
            assert found.fetchall() == []
        with open_service(url, clock=clock, maintenance="manual") as svc:
            assert has_index(svc, INDEX)
            every = whole_list(svc, None, None, False)
            assert every, "the earlier store has cursors"
            rows, total, _ = svc.read_model.cursor_page(limit=len(every))
            assert rows == every and total == len(every)
            assert INDEX in page_plan(svc)
