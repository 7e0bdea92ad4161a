"""A held-open append: one transaction stays uncommitted while later appends arrive
(R-L4, R-N2, R-S1, ADR 002).

Later appends, on the same session or on others, wait for it: the store serialises writers
(PostgreSQL's table lock, SQLite's single writer), which is what keeps recording positions
in commit order. Meanwhile no reader sees past it; once it commits it appears and notifies;
once it rolls back nothing stalls and no sequence is skipped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import psycopg
import pytest

from session_awareness.application import SessionAwareness, open_service
from tests.conftest import RecordingWaker
from tests.contract.helpers import CHILD, MANAGER, OTHER, cursor, notice, spawn
from tests.reliability.helpers import DEADLINE, all_events, assert_audit_clean, wait_until

#: How long a waiting writer is given to (wrongly) overtake the held one.
OVERTAKE_WINDOW = 0.5


class HeldAppend:
    """Makes the next append of one service stop inside its transaction, holding the
    store's write lock, until released to commit or to roll back: on SQLite after its
    events and read-model rows are written; on PostgreSQL after its events are inserted,
    its rows bound (before the lock, ADR 013 "Amended") and not yet sent with the commit."""

    def __init__(self, svc: SessionAwareness, backend: str) -> None:
        self.backend = backend
        self.held, self.released = threading.Event(), threading.Event()
        self.roll_back = False
        if backend == "postgresql":
            self.recorder: Any = svc.store.recorder
            self.original = self.recorder._write_save
            self.recorder._write_save = self._write_save
        else:
            self.recorder = svc.store.recorder.read_models
            self.original = self.recorder.apply_changes
            self.recorder.apply_changes = self._apply

    def _apply(self, c: Any, changes: Any, *rest: Any) -> None:
        self.original(c, changes, *rest)
        if self._hold():
            raise RuntimeError("rolled back on purpose")

    def _write_save(self, curs: Any, bind: Any, begin: Any, save: Any, rows: Any,
                    **options: Any) -> None:  # fmt: skip
        if not self.held.is_set() and not isinstance(rows, Exception):
            resolved = rows.resolved

            def holding(ids: Any) -> list[str]:
                sql: list[str] = resolved(ids)
                if self._hold():
                    sql.append("SELECT 1 / 0")  # the server aborts the transaction
                return sql

            rows.resolved = holding
        self.original(curs, bind, begin, save, rows, **options)

    def _hold(self) -> bool:
        """Stop the first append until released; whether it is to roll back."""
        if self.held.is_set():
            return False
        self.held.set()
        assert self.released.wait(DEADLINE)
        return self.roll_back

    def release(self, *, roll_back: bool) -> None:
        self.roll_back = roll_back
        self.released.set()


@pytest.fixture
def services(database_url: str) -> Iterator[Callable[..., SessionAwareness]]:
    """Services on one database, as separate processes would open them."""
    opened: list[SessionAwareness] = []

    def open_one(**options: Any) -> SessionAwareness:
        opened.append(open_service(database_url, **options))
        return opened[-1]

    yield open_one
    for svc in opened:
        svc.close()


def waiting_on_locks(svc: SessionAwareness) -> int:
    """How many PostgreSQL backends wait for a lock right now."""
    conninfo = svc.store.recorder.datastore.pool.conninfo  # type: ignore[attr-defined]
    with psycopg.connect(conninfo) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        ).fetchone()
        return int(row[0]) if row else 0


class TestHeldOpenAppend:
    @pytest.mark.parametrize("outcome", ["commit", "roll back"])
    def test_nothing_passes_over_an_uncommitted_append(
        self, services: Callable[..., SessionAwareness], database_url: str, outcome: str
    ) -> None:
        """R-L4, R-N2, R-S1: while one append is uncommitted, appends on its session and on
        another wait, and no head, cursor, notice or changesSince moves past it; committed
        it appears and notifies, rolled back, it is kept and recorded once afterwards (R-L8)."""
        backend = "postgresql" if database_url.startswith("postgresql") else "sqlite"
        waker = RecordingWaker()
        holder_svc, other, reader = services(waker=waker), services(), services()
        spawn(reader)  # CHILD 1, the manager's cursor at 1
        spawn(reader, child=OTHER, run="run-2")  # OTHER 1
        holder = HeldAppend(holder_svc, backend)
        with ThreadPoolExecutor(3) as pool:
            held: Future[Any] = pool.submit(
                holder_svc.record_goal_changed, CHILD, summary="goal updated"
            )
            try:
                assert holder.held.wait(DEADLINE)
                same = pool.submit(other.record_goal_changed, CHILD, summary="goal cleared")
                elsewhere = pool.submit(reader.record_goal_changed, OTHER, summary="goal created")
                if backend == "postgresql":
                    assert wait_until(lambda: waiting_on_locks(reader) >= 2)
                threading.Event().wait(OVERTAKE_WINDOW)  # a chance to overtake: must not be taken
                assert not same.done() and not elsewhere.done()
                assert reader.session_status(CHILD, changes_since=1)["stateChanges"]["events"] == []
                assert reader.session_status(CHILD)["stateVersion"] == 1
                assert reader.pending_notices(MANAGER) == []
                assert cursor(reader, MANAGER, CHILD) == (1, 1, 1)
            finally:
                holder.release(roll_back=outcome == "roll back")
            results = [f.result(timeout=DEADLINE) for f in (held, same, elsewhere)]
        if outcome == "commit":
            assert results == [2, 3, 2]
            assert cursor(reader, MANAGER, CHILD) == (1, 2, 3)
            assert set(waker.woken) == {MANAGER}  # woken here; on PostgreSQL also via NOTIFY
        else:
            # A failure inside the record transaction is kept like an outage (R-L8) and
            # recorded once afterwards, before or after the waiting append.
            assert (results[0], results[2]) == (None, 2)
            assert wait_until(lambda: holder_svc.health()["signals"]["buffered"] == 0)
            assert holder_svc.health()["signals"]["flushed"] == 1
            summaries = [e["summary"] for e in all_events(reader, CHILD)[1:]]
            assert sorted(summaries) == ["goal cleared", "goal updated"]
            assert cursor(reader, MANAGER, CHILD) == (1, 2, 3)
        assert [e["sequence"] for e in all_events(reader, CHILD)] == [1, 2, 3]
        assert sorted(reader.pending_notices(MANAGER)) == [notice(CHILD, 1), notice(OTHER, 1)]
        assert_audit_clean(reader)
