"""The PostgreSQL save's statements are prepared on each connection after their first use
there and sent as `EXECUTE` from then on (ADR 029). They stay prepared through the library's
reads, which roll back; statements removed behind the store's back are prepared again and
no signal is lost (R-L8)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from session_awareness.application import SessionAwareness, open_service
from session_awareness.infrastructure.readmodel.pg_prepared import Prepared
from session_awareness.testing.pgcluster import PostgresCluster
from tests.contract.test_group_commit import write_lock_held

PARENT, CHILD = "agent:p:main", "agent:p:subagent:worker"


@pytest.fixture
def svc(postgres: PostgresCluster) -> Iterator[SessionAwareness]:
    """A service on a pool of at most two connections (opening a store takes two)."""
    schema = f"p_{uuid.uuid4().hex[:12]}"
    service = open_service(f"{postgres.url}?schema={schema}&pool_size=1&max_overflow=1")
    service.open_session(PARENT)
    service.record_child_spawned(CHILD, parent=PARENT, run_id="run-1")
    try:
        yield service
    finally:
        service.close()


@contextlib.contextmanager
def _every_connection(svc: SessionAwareness) -> Iterator[list[Any]]:
    """Both connections of the service's pool, checked out at once."""
    datastore = svc.store.recorder.datastore
    with datastore.get_connection() as first, datastore.get_connection() as second:
        yield [first, second]


def _prepared(svc: SessionAwareness) -> set[str]:
    """The statements the service's connections have prepared, by their text."""
    with _every_connection(svc) as connections:
        return {
            row["statement"]
            for conn in connections
            for row in conn.execute("SELECT statement FROM pg_prepared_statements")
        }


def _record(svc: SessionAwareness, times: int) -> None:
    for _ in range(times):
        svc.record_human_direct_message(CHILD, channel="test")


def test_a_save_prepares_its_statements_for_the_next_saves(svc: SessionAwareness) -> None:
    _record(svc, 3)
    statements = " ".join(_prepared(svc))
    for part in ("INSERT INTO", "session_state_events", "session_state_heads", "session_material"):
        assert part in statements


def test_the_library_s_reads_that_roll_back_leave_them_prepared(svc: SessionAwareness) -> None:
    _record(svc, 3)
    before = _prepared(svc)
    assert before
    recorder = svc.store.recorder
    _ref, session = svc.store.resolve_id(CHILD)
    query = "SELECT session_id FROM {s}session_registry WHERE session_id = ?"
    for _ in range(6):  # more than psycopg's default threshold for preparing a statement
        assert recorder.fetch(query, [session])  # in a transaction that rolls back
    assert _prepared(svc) == before
    _record(svc, 1)
    assert svc.kept_signals == 0


def test_statements_removed_behind_its_back_are_prepared_again(svc: SessionAwareness) -> None:
    """R-L8: a save that finds its statements gone fails as a store error; its signal is kept
    and recorded later, and the reads and saves after it prepare them again."""
    _record(svc, 3)
    version = svc.session_status(CHILD)["stateVersion"]
    with _every_connection(svc) as connections:
        for conn in connections:
            conn.execute("DEALLOCATE ALL")
    _record(svc, 2)
    assert svc.flush_signals()  # a save the removal failed is kept and recorded later
    assert _prepared(svc)
    assert svc.session_status(CHILD)["stateVersion"] == version + 2


def test_a_read_prepares_no_write_so_it_never_waits_for_a_writer(svc: SessionAwareness) -> None:
    """Preparing an insert takes the events table's lock: only a save prepares it, before
    its own wait for that lock; a read on the same connection prepares its SELECTs alone."""
    recorder: Any = svc.store.recorder
    table = f'"{recorder.datastore.schema}"."{recorder.events_table_name}"'
    columns = "(originator_id, originator_version, topic, state)"
    insert = f"INSERT INTO {table} {columns} VALUES (%s, %s, %s, %s)"  # noqa: S608 -- a quoted name
    select = f"SELECT max(notification_id) FROM {table} WHERE originator_id = %s"  # noqa: S608
    with psycopg.connect(recorder.datastore.pool.conninfo, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '2s'")  # a wait for the lock fails instead of hanging
        bind = psycopg.ClientCursor(conn).mogrify
        prepared = Prepared()
        prepared.bound(bind, insert, [uuid.uuid4(), 1, "t", b""])
        prepared.bound(bind, select, [uuid.uuid4()])
        with write_lock_held(svc):
            prepared.prepare_wanted(conn, writes=False)
        assert prepared.bound(bind, select, [uuid.uuid4()]).startswith("EXECUTE ")
        assert prepared.bound(bind, insert, [uuid.uuid4(), 1, "t", b""]).startswith("INSERT")
        prepared.prepare_wanted(conn, writes=True)
        assert prepared.bound(bind, insert, [uuid.uuid4(), 1, "t", b""]).startswith("EXECUTE ")
