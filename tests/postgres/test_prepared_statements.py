"""The PostgreSQL save's statements are prepared on each connection after their first use
there and sent as `EXECUTE` from then on; a read is executed by name, its values bound
server-side (ADR 029). They stay prepared through the library's
reads, which roll back; statements removed behind the store's back are prepared again and
no signal is lost (R-L8)."""

from __future__ import annotations

import contextlib
import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

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
    recorder = svc.store.recorder.read_models
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


_TYPED = (
    "SELECT %s::uuid AS u, %s::bigint + 1 AS n, %s::text || '!' AS t, %s::bytea AS b,"
    " %s::timestamptz AS at, %s::boolean AS yes, %s::text[] AS many, %s::text IS NULL AS gone,"
    " %s::jsonb AS doc, NULL::int AS nothing"
)


def _values() -> list[Any]:
    return [
        uuid.uuid4(),
        2**40,
        "quote ' and \\ and ünïcode",
        b"\x00\xffbytes",
        datetime.datetime(2026, 12, 2, 14, 0, 0, 123456, tzinfo=datetime.UTC),
        True,
        ["a", "b,c", 'd"e', ""],
        None,
        Jsonb({"k": [1, "two", None]}),
    ]


def test_a_read_by_name_returns_what_the_plain_read_returns(postgres: PostgresCluster) -> None:
    """Executed by name with its values bound server-side, a read gives the rows a cursor
    gives for the same statement and values, value for value and type for type: the exact
    delta of R-S1 reads through it."""
    with psycopg.connect(postgres.url, autocommit=True, prepare_threshold=None) as conn:
        prepared = Prepared()
        values = _values()
        assert prepared.rows(conn, _TYPED, values) is None  # seen once: not prepared yet
        prepared.prepare_wanted(conn, writes=False)
        by_name = prepared.rows(conn, _TYPED, values)
        plain = psycopg.ClientCursor(conn).execute(_TYPED, values).fetchall()
        assert by_name == plain
        assert [type(value) for value in by_name[0]] == [type(value) for value in plain[0]]
        assert by_name[0][1] == 2**40 + 1 and by_name[0][7] is True and by_name[0][9] is None


def test_a_read_by_name_that_fails_raises_the_error_of_its_sqlstate(
    postgres: PostgresCluster,
) -> None:
    query = "SELECT 1 / %s::int"
    with psycopg.connect(postgres.url, autocommit=True, prepare_threshold=None) as conn:
        prepared = Prepared()
        prepared.rows(conn, query, [1])
        prepared.prepare_wanted(conn, writes=False)
        assert prepared.rows(conn, query, [1]) == [(1,)]
        with pytest.raises(psycopg.errors.DivisionByZero, match="division by zero"):
            prepared.rows(conn, query, [0])
        conn.execute("DEALLOCATE ALL")
        with pytest.raises(psycopg.errors.InvalidSqlStatementName):
            prepared.rows(conn, query, [1])
        assert conn.execute("SELECT 2").fetchone() == (2,)  # the connection is still usable
