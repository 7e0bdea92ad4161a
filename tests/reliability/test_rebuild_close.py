"""A close during the start's read-model check ends its rebuild at once (R-M2, ADR 038, ADR
044): the check (`verify`, the maintenance's first batch on a store marked complete) may
rebuild the read models from the event store, through a scratch copy and the live store's
connections; every one of them the rebuild uses is the maintenance's, so the close ends its
statement, the rebuild rolls back, nothing of it is written, and the next start checks and
rebuilds again. Each rebuild here is held: in the swap's wait for the write lock another
connection of the test holds (on SQLite `BEGIN IMMEDIATE`, on PostgreSQL the events table
locked), or by the test's own hook on the scratch copy's first page."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from structlog.testing import capture_logs

from session_awareness.application import SessionAwareness
from session_awareness.application.audit import Audit
from session_awareness.infrastructure.readmodel.postgres_audit import (
    SCRATCH_SCHEMA_PREFIX,
    PostgresScratch,
)
from session_awareness.infrastructure.readmodel.sqlite_audit import SQLiteScratch
from session_awareness.testing import wait_until
from tests.conftest import BACKENDS, ServiceFactory, assert_rebuild_matches
from tests.contract.helpers import CHILD, MANAGER, spawn
from tests.reliability.test_maintenance_close import (
    DEADLINE,
    MAINTENANCE,
    Blocker,
    closed_in_time,
    long_waits_url,
    open_held,
)

#: Sessions recorded before the damage: a few pages of events on SQLite (200 a page).
SESSIONS = 40


@pytest.fixture(params=BACKENDS)
def database_url(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """The suite's database per backend, its lock waits a minute long (`long_waits_url`)."""
    return long_waits_url(request, tmp_path, monkeypatch)


@pytest.fixture
def immediate_begun(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """SQLite: each `BEGIN IMMEDIATE` the maintenance thread begins on a connection opened
    from now on (traced as it starts, before its wait for the lock)."""
    begun: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)

        def trace(statement: str) -> None:
            words = [word.upper() for word in statement.split()[:2]]
            if threading.current_thread().name == MAINTENANCE and words == ["BEGIN", "IMMEDIATE"]:
                begun.append(statement)

        conn.set_trace_callback(trace)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    return begun


def damaged_store(open_svc: ServiceFactory) -> None:
    """A store marked complete whose read models lost rows afterwards: the next start trusts
    the mark, and its maintenance's first batch (`verify`) rebuilds them (ADR 044)."""
    svc = open_svc()
    spawn(svc)
    for n in range(SESSIONS):
        svc.open_session(f"agent:main:subagent:s{n}")
        svc.record_goal_changed(f"agent:main:subagent:s{n}", summary="goal created")
    svc.record_human_direct_message(CHILD, channel="telegram")
    read_models: Any = svc.store.recorder.read_models
    with read_models.datastore.transaction(commit=True) as c:
        c.execute(read_models.sql("DELETE FROM {s}session_activity"))
    svc.close()


def gate_verify(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Hold the maintenance's check until the event is set, so the test takes its lock first."""
    gate = threading.Event()
    verify = Audit.verify_read_models

    def gated(self: Audit) -> bool:
        assert gate.wait(DEADLINE)
        return verify(self)

    monkeypatch.setattr(Audit, "verify_read_models", gated)
    return gate


def scratch_schemas(database_url: str) -> int:
    """PostgreSQL: the audits' scratch schemas in the database (0 on SQLite, whose scratch
    is a temporary file)."""
    if database_url.startswith("sqlite"):
        return 0
    with psycopg.connect(database_url.partition("?")[0]) as conn:
        row = conn.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name LIKE %s",
            (SCRATCH_SCHEMA_PREFIX + "%",),
        ).fetchone()
    assert row is not None
    return int(row[0])


def assert_ended_as_interrupted(svc: SessionAwareness, logs: list[dict[str, Any]]) -> None:
    """The close ended the check: `maintenance_interrupted task=verify`, neither an error nor
    `maintenance_not_stopped` nor a finished check, and the thread has ended."""
    events = {(entry["event"], entry["log_level"]) for entry in logs}
    interrupted = [e["task"] for e in logs if e["event"] == "maintenance_interrupted"]
    assert interrupted == ["verify"], events
    assert "maintenance_not_stopped" not in {event for event, _ in events}
    assert not any(level == "error" for _, level in events), events
    assert not [e for e in logs if e["event"] in ("read_models_migrated", "audit_finished")]
    assert not [e for e in logs if e["event"] == "maintenance_done"]
    assert "audit_scratch_left" not in {event for event, _ in events}
    thread = svc._task._thread
    assert thread is not None
    assert wait_until(lambda: not thread.is_alive(), DEADLINE)


def assert_checked_again(open_svc: ServiceFactory, database_url: str, schemas: int) -> None:
    """Nothing of the rebuild was written: the next start finds the rows still missing, its
    check rebuilds them, and the read models equal a full rebuild; no scratch is left."""
    assert scratch_schemas(database_url) == schemas
    again = open_svc()
    assert again.read_model.read_models_outdated()  # the damage, as the close found it
    with capture_logs() as logs:
        again.maintain()
    done = [e for e in logs if e["event"] == "maintenance_done" and e["task"] == "verify"]
    assert [e["rebuilt"] for e in done] == [True]
    assert not again.read_model.read_models_outdated()
    rows = {row["sessionKey"]: row for row in again.sessions_list()}
    assert rows[CHILD]["channel"] == "telegram"
    assert MANAGER in rows
    assert_rebuild_matches(again)
    report = again.audit()
    assert report.clean, report.as_dict()


@pytest.fixture
def blockers() -> Iterator[list[Blocker]]:
    """The test's blockers, released at its end if the test did not."""
    held: list[Blocker] = []
    yield held
    for blocker in held:
        if not blocker.released:
            blocker.release()


class TestCloseDuringTheStartsRebuild:
    def test_a_close_ends_the_rebuild_held_in_its_swap_and_the_next_start_redoes_it(
        self,
        open_svc: ServiceFactory,
        database_url: str,
        monkeypatch: pytest.MonkeyPatch,
        immediate_begun: list[str],
        blockers: list[Blocker],
    ) -> None:
        """R-M2, R-R2 (ADR 044): the check's rebuild has replayed the events into its scratch
        copy and waits for the write lock to swap the copy in (another connection holds it):
        `close()` returns while the lock is still held, the rebuild is logged
        `maintenance_interrupted` with task=verify, never `maintenance_not_stopped`, and the
        thread ends. Nothing of it was written: the next start's check rebuilds."""
        damaged_store(open_svc)
        schemas = scratch_schemas(database_url)
        gate = gate_verify(monkeypatch)
        with capture_logs() as logs:
            svc, blocker = open_held(open_svc, database_url, gate, immediate_begun, blockers)
            assert closed_in_time(svc.close), "close() waited for the rebuild"
            assert blocker.holding()
        blocker.release()
        assert_ended_as_interrupted(svc, logs)
        assert_checked_again(open_svc, database_url, schemas)

    def test_a_close_ends_the_rebuild_while_it_writes_its_scratch_copy(
        self, open_svc: ServiceFactory, database_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-M2, R-R2 (ADR 044): the close comes while the rebuild writes its first page of
        replayed rows to its scratch copy (the test's hook holds that write until the close
        has fired): the write, and every read of the store after it, fails at once, so the
        rebuild goes no further: no page is written after the close, and the next start's
        check rebuilds."""
        damaged_store(open_svc)
        schemas = scratch_schemas(database_url)
        scratch = SQLiteScratch if database_url.startswith("sqlite") else PostgresScratch
        apply = scratch.apply
        replaying = threading.Event()
        fired = threading.Event()
        after_close: list[int] = []

        def held(self: Any, changes: Any) -> None:
            replaying.set()
            assert fired.wait(DEADLINE)
            apply(self, changes)
            after_close.append(len(changes))  # a page the rebuild wrote after the close

        monkeypatch.setattr(scratch, "apply", held)
        with capture_logs() as logs:
            svc = open_svc(maintenance="background")
            assert replaying.wait(DEADLINE), "the rebuild never replayed"
            task = svc._task
            interruption = task._interruption
            fire = interruption.fire

            def firing() -> None:
                fire()
                fired.set()

            monkeypatch.setattr(interruption, "fire", firing)
            assert closed_in_time(svc.close), "close() waited for the rebuild"
        assert after_close == []
        assert_ended_as_interrupted(svc, logs)
        assert_checked_again(open_svc, database_url, schemas)
