"""The registry's activity index, which the console's overview and `sessions_list` read in
order: new stores have it, and a store an earlier version wrote gets it on its next open
(R-O1, ADR 040)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from session_awareness.application import SessionAwareness, open_service
from session_awareness.infrastructure.readmodel.tables import REGISTRY
from tests.conftest import FakeClock, ServiceFactory
from tests.contract.helpers import CHILD, MANAGER, OTHER, has_index, spawn
from tests.ops.helpers import copied_store, tamper

INDEX = "session_registry_updated"
#: A store the version before drains wrote (tests/ops/fixtures/make_store_before_drains.py):
#: its DDL had no activity index.
EARLIER_STORE = Path(__file__).parent / "fixtures" / "store-before-drains.db"


def sqlite_plan(path: str, sql: str) -> list[str]:
    with closing(sqlite3.connect(path)) as db:
        return [row[3] for row in db.execute("EXPLAIN QUERY PLAN " + sql)]


class TestTheActivityIndex:
    def test_a_new_store_has_it(self, svc: SessionAwareness) -> None:
        """R-O1: the DDL creates the index with the registry."""
        assert INDEX in dict(REGISTRY.indexes)
        assert has_index(svc, INDEX)

    def test_a_store_without_it_gets_it_on_its_next_open(
        self, open_svc: ServiceFactory, clock: FakeClock
    ) -> None:
        """R-O1: on both backends, a store as the previous version left it (the same
        tables, no activity index) has the index once a new service opened it, and lists
        its sessions in the same order, most recently active first."""
        svc = open_svc()
        spawn(svc)
        clock.advance(minutes=1)
        spawn(svc, child=OTHER, run="run-2")
        clock.advance(minutes=1)
        svc.record_human_direct_message(CHILD, channel="slack")
        before = [row["sessionKey"] for row in svc.sessions_list()]
        tamper(svc, "DROP INDEX {s}" + INDEX)
        assert not has_index(svc, INDEX)
        svc.close()
        again = open_svc()
        assert has_index(again, INDEX)
        assert [row["sessionKey"] for row in again.sessions_list()] == before
        assert before == [CHILD, OTHER, MANAGER]
        assert again.audit().clean

    def test_a_store_an_earlier_version_wrote_gets_it(
        self, tmp_path: Path, clock: FakeClock
    ) -> None:
        """R-O1: a committed SQLite store of an earlier version lacks the index; opened by
        this version it has it, and the overview's order is read from it, unsorted."""
        url = copied_store(EARLIER_STORE, tmp_path)
        path = url.removeprefix("sqlite:///")
        with closing(sqlite3.connect(path)) as db:
            found = db.execute("SELECT name FROM sqlite_master WHERE name = ?", (INDEX,))
            assert found.fetchall() == []
        with open_service(url, clock=clock) as svc:
            assert has_index(svc, INDEX)
            assert svc.sessions_list(limit=3)
        plan = sqlite_plan(
            path,
            "SELECT session_key FROM session_registry r WHERE r.deleted = 0 "
            "ORDER BY r.updated_at DESC, r.session_key LIMIT 50",
        )
        assert plan == [f"SCAN r USING INDEX {INDEX}"]
