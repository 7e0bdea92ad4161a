"""A close during a maintenance batch ends that batch at once (R-M2, ADR 038): the batch's
statement is interrupted on the maintenance's own connection, its transaction rolls back,
and the next start runs the work again. Each batch here is held in a statement that would
not finish for a minute: on SQLite a write lock another connection holds, on PostgreSQL
the events table locked by another session."""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.pq import TransactionStatus
from psycopg.sql import SQL, Identifier
from structlog.testing import capture_logs

from session_awareness.application import SessionAwareness
from session_awareness.application import retention as retention_module
from session_awareness.application.audit import Audit
from session_awareness.application.errors import StoreUnavailableError
from session_awareness.infrastructure import sqlite_store
from session_awareness.testing import wait_until
from session_awareness.testing.pgcluster import PostgresCluster
from tests.conftest import BACKENDS, FakeClock, ServiceFactory
from tests.contract.helpers import sequences

#: A held statement's lock wait (seconds): far longer than any close may take.
HELD_FOR = 60
#: How long a close may take while the batch's statement is held (a deadline, not a pause).
CLOSED_WITHIN = 3.0
#: How long the test waits for what another thread does.
DEADLINE = 30.0
MAINTENANCE = "session-awareness-maintenance"
KEYS = [f"agent:main:subagent:c{n}" for n in range(3)]


def long_waits_url(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """The suite's database of the backend `request.param`, its lock waits a minute long:
    on SQLite the connections' busy timeout, on PostgreSQL every call's deadline."""
    if request.param == "sqlite":
        monkeypatch.setattr(sqlite_store, "SQLITE3_DEFAULT_LOCK_TIMEOUT", HELD_FOR)
        return "sqlite:///" + str(tmp_path / "sessions.db")
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    return f"{cluster.url}?schema=t_{uuid.uuid4().hex[:12]}&connect_timeout={HELD_FOR}"


@pytest.fixture(params=BACKENDS)
def database_url(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """The suite's database per backend, its lock waits a minute long (`long_waits_url`)."""
    return long_waits_url(request, tmp_path, monkeypatch)


class Blocker:
    """Another connection of the test's own that holds the store's write lock: on SQLite
    `BEGIN IMMEDIATE`, on PostgreSQL the events table in EXCLUSIVE mode (which the library
    takes for each save); `waiting()` counts the store's statements queued behind it."""

    def __init__(self, svc: SessionAwareness, database_url: str) -> None:
        recorder: Any = svc.store.recorder
        self.sqlite = database_url.startswith("sqlite")
        self.released = False
        if self.sqlite:
            path = database_url.removeprefix("sqlite:///")
            self._lite = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._lite.execute("BEGIN IMMEDIATE")
            return
        base = database_url.partition("?")[0]
        table = Identifier(recorder.datastore.schema, recorder.events_table_name)
        self._pg = psycopg.connect(base)
        self._pg.execute(SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(table))
        self._probe = psycopg.connect(base, autocommit=True)
        self._table = table.as_string(self._probe)

    def holding(self) -> bool:
        if self.sqlite:
            return self._lite.in_transaction
        return self._pg.info.transaction_status == TransactionStatus.INTRANS

    def waiting(self) -> int:
        """PostgreSQL: the sessions waiting for the table's lock."""
        row = self._probe.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = %s::regclass",
            (self._table,),
        ).fetchone()
        assert row is not None
        return int(row[0])

    def release(self) -> None:
        self.released = True
        if self.sqlite:
            self._lite.rollback()
            self._lite.close()
        else:
            self._pg.rollback()
            self._pg.close()
            self._probe.close()


@pytest.fixture
def writes_begun(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """SQLite: the write statements the maintenance thread has begun on the store's
    connections opened from now on (each traced as it starts, before any lock wait)."""
    begun: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)

        def trace(statement: str) -> None:
            words = statement.split()
            if (
                threading.current_thread().name == MAINTENANCE
                and words
                and (
                    words[0].upper() in ("INSERT", "UPDATE", "DELETE")
                    or [w.upper() for w in words[:2]] == ["BEGIN", "IMMEDIATE"]
                )
            ):
                begun.append(statement)

        conn.set_trace_callback(trace)
        return conn

    monkeypatch.setattr(sqlite_store.sqlite3, "connect", traced)
    return begun


def gate_prune(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Hold the first prune batch until the event is set, so the test takes its lock first."""
    gate = threading.Event()
    step = retention_module.PrunePass.step

    def gated(self: Any) -> bool:
        assert gate.wait(DEADLINE)
        return step(self)

    monkeypatch.setattr(retention_module.PrunePass, "step", gated)
    return gate


def open_held(
    open_svc: ServiceFactory,
    database_url: str,
    gate: threading.Event,
    begun: list[str],
    blockers: list[Blocker],
) -> tuple[SessionAwareness, Blocker]:
    """A service opened with its background maintenance, whose first batch (held by `gate`
    until the test's blocker holds the write lock) is then held behind the blocker: on
    SQLite once it began a write (`begun`), on PostgreSQL once it waits for the lock."""
    svc = open_svc(maintenance="background")
    blocker = Blocker(svc, database_url)
    blockers.append(blocker)
    gate.set()
    if blocker.sqlite:
        assert wait_until(lambda: bool(begun), DEADLINE), "the batch never wrote"
    else:
        assert wait_until(lambda: blocker.waiting() == 1, DEADLINE), "never held"
    return svc, blocker


@pytest.fixture
def held_batch(
    open_svc: ServiceFactory,
    database_url: str,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    writes_begun: list[str],
) -> Iterator[Callable[[], tuple[SessionAwareness, Blocker]]]:
    """A service whose background prune batch is under way, held in its write behind the
    blocker: three sessions' rows a month old to prune."""
    blockers: list[Blocker] = []

    def start() -> tuple[SessionAwareness, Blocker]:
        svc = open_svc()
        for key in KEYS:
            svc.open_session(key)
            svc.record_goal_changed(key, summary="goal created")
        svc.close()
        clock.advance(days=31)
        gate = gate_prune(monkeypatch)
        return open_held(open_svc, database_url, gate, writes_begun, blockers)

    yield start
    for blocker in blockers:
        if not blocker.released:
            blocker.release()


def closed_in_time(close: Callable[[], object]) -> bool:
    """Run `close` on a thread; whether it returned within `CLOSED_WITHIN` seconds."""
    closing = threading.Thread(target=close, daemon=True)
    closing.start()
    return wait_until(lambda: not closing.is_alive(), CLOSED_WITHIN)


class TestCloseDuringABatch:
    def test_a_close_ends_the_batch_held_in_its_statement_and_the_next_start_redoes_it(
        self,
        held_batch: Callable[[], tuple[SessionAwareness, Blocker]],
        open_svc: ServiceFactory,
    ) -> None:
        """R-M2, R-R1 (ADR 038): `close()` returns while the prune batch is still held in
        its write (the lock is still taken): the batch's statement is interrupted and
        rolled back, logged `maintenance_interrupted`, never as an error nor as
        `maintenance_not_stopped`. Nothing of it was written; the next start prunes."""
        with capture_logs() as logs:
            svc, blocker = held_batch()
            assert closed_in_time(svc.close), "close() waited for the held batch"
            assert blocker.holding()
        blocker.release()
        events = {(e["event"], e["log_level"]) for e in logs}
        assert ("maintenance_interrupted", "info") in events
        assert [e["task"] for e in logs if e["event"] == "maintenance_interrupted"] == ["prune"]
        assert "maintenance_not_stopped" not in {event for event, _ in events}
        assert not any(level == "error" for _, level in events), events
        again = open_svc()
        assert all(sequences(again, key) == [1] for key in KEYS)  # nothing half-written
        assert again.audit().clean
        again.maintain()  # the work resumes, and finishes
        assert all(sequences(again, key) == [] for key in KEYS)
        report = again.audit()
        assert report.clean, report.as_dict()

    def test_a_callers_save_queued_behind_the_same_lock_is_not_interrupted(
        self, held_batch: Callable[[], tuple[SessionAwareness, Blocker]]
    ) -> None:
        """R-M2, R-L8: only the maintenance's own statement is ended. A caller's save that
        waits behind the same lock while the maintenance stops is stored once the lock is
        released, neither failed nor kept for later."""
        svc, blocker = held_batch()
        recorded: list[int | None] = []
        caller = threading.Thread(
            target=lambda: recorded.append(
                svc.record_goal_changed(KEYS[0], summary="goal updated")
            ),
            daemon=True,
        )
        caller.start()
        recorder: Any = svc.store.recorder  # queued behind the maintenance's batch
        assert wait_until(lambda: recorder.group.queued() == 1, DEADLINE)
        assert closed_in_time(svc._task.close), "the maintenance waited for its batch"
        assert caller.is_alive()  # still held behind the lock, not failed
        blocker.release()
        caller.join(DEADLINE)
        assert recorded == [2]
        assert svc.kept_signals == 0
        assert sequences(svc, KEYS[0]) == [1, 2]


class TestABatchThatOutlastsTheClose:
    def test_its_connection_is_released_only_once_it_ends(
        self, open_svc: ServiceFactory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-M2: a batch that does not end within the close's wait (here the start's check,
        held in Python by the test while it holds a connection of the store's pool) is left
        to end by itself (`maintenance_not_stopped`). `close()` returns and the service
        refuses every call at once, but the connection the batch holds is closed only as the
        batch returns it, never under it: the library's pool closed the connections in use,
        and closing one while another thread runs a statement on it crashes the process on
        SQLite (tests/reliability/test_close_under_calls.py). So the batch's next statement
        on the connection it holds still runs."""
        svc = open_svc()
        svc.open_session(KEYS[0])
        svc.close()
        holding, release = threading.Event(), threading.Event()
        outcome: list[object] = []

        def held(audit: Any) -> bool:
            with audit.store.recorder.datastore.transaction(commit=False) as c:
                holding.set()
                assert release.wait(DEADLINE)
                try:
                    c.execute("SELECT 1 AS one")
                    outcome.append(len(c.fetchall()))
                except Exception as error:  # noqa: BLE001 -- what the test reports
                    outcome.append(error)
            return False

        monkeypatch.setattr(Audit, "verify_read_models", held)
        with capture_logs() as logs:
            svc = open_svc(maintenance="background")
            assert holding.wait(DEADLINE), "the check never started"
            assert closed_in_time(svc.close), "close() waited for the batch"
            assert "maintenance_not_stopped" in {e["event"] for e in logs}
            assert svc.closed
            with pytest.raises(StoreUnavailableError):
                svc.session_status(KEYS[0])
            release.set()
            thread = svc._task._thread
            assert thread is not None
            assert wait_until(lambda: not thread.is_alive(), DEADLINE)
        assert outcome == [1]  # its statement ran on the connection it held
