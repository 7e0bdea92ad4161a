"""The small PostgreSQL save (ADR 013, "Amended"): its rows are made before it waits for the
events table's lock and go in one query with its `INSERT`, so no Python of ours runs while
the lock is held, and the `COMMIT` goes only once that query has answered. R-N7: the lock is
what several processes take turns on."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.sql import SQL, Identifier

from session_awareness.application import SessionAwareness, open_service
from session_awareness.infrastructure.readmodel.pg_round_trips import Inserted
from session_awareness.testing.pgcluster import PostgresCluster
from tests.conftest import wait_until
from tests.contract.helpers import spawn
from tests.contract.test_group_commit import write_lock_held

PARENT, CHILD = "agent:q:main", "agent:q:subagent:worker"


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresCluster]:
    """A server of this module's own that shows a waiting query whole (a record's query,
    with its events' state, is longer than the default 1 kB `pg_stat_activity` keeps)."""
    with PostgresCluster(settings={"track_activity_query_size": "16384"}) as cluster:
        yield cluster


@pytest.fixture
def svc(postgres: PostgresCluster) -> Iterator[SessionAwareness]:
    service = open_service(f"{postgres.url}?schema=q_{uuid.uuid4().hex[:12]}")
    try:
        yield service
    finally:
        service.close()


def _waiting_query(conn: psycopg.Connection[Any]) -> str | None:
    """The query of a backend of this database waiting for a relation lock, if any."""
    row = conn.execute(
        "SELECT query FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND wait_event = 'relation'"
    ).fetchone()
    return None if row is None else str(row[0])


def test_a_record_waits_for_the_lock_with_its_rows_already_sent(
    svc: SessionAwareness, postgres: PostgresCluster
) -> None:
    spawn(svc, CHILD, PARENT)
    results: list[int | None] = []
    with (
        psycopg.connect(postgres.url, autocommit=True) as watcher,
        write_lock_held(svc) as release,
    ):
        recording = threading.Thread(
            target=lambda: results.append(
                svc.record_human_direct_message(CHILD, channel="telegram")
            )
        )
        recording.start()
        assert wait_until(lambda: _waiting_query(watcher) is not None)
        query = _waiting_query(watcher) or ""
        assert "INSERT INTO" in query and "session_state_events" in query
        assert "session_awareness_refuse" in query  # the derived-M check (ADR 023)
        assert "COMMIT" not in query
        release()
        recording.join(timeout=30)
    assert results == [2]
    assert svc.pending_notices(PARENT) != []


def test_a_row_reads_its_notification_id_from_the_row_inserted(svc: SessionAwareness) -> None:
    """`changesSince` rows carry the notification id their signal's event was stored at."""
    spawn(svc, CHILD, PARENT)
    assert svc.record_human_direct_message(CHILD, channel="telegram") == 2
    recorder: Any = svc.store.recorder
    schema = recorder.datastore.schema
    with recorder.datastore.get_connection() as conn:
        rows = conn.execute(
            SQL(
                "SELECT r.sequence, r.session_id = e.originator_id AS same, e.topic FROM {rows} r "
                "JOIN {events} e ON e.notification_id = r.position ORDER BY r.sequence"
            ).format(
                rows=Identifier(schema, "session_state_events"),
                events=Identifier(schema, recorder.events_table_name),
            )
        ).fetchall()
    assert [(row["sequence"], row["same"], row["topic"].rpartition(".")[2]) for row in rows] == [
        (1, True, "ChildSpawned"),
        (2, True, "HumanDirectMessage"),
    ]


def test_a_notification_id_to_come_is_never_bound_as_a_value(
    postgres: PostgresCluster,
) -> None:
    with psycopg.connect(postgres.url) as conn, pytest.raises(psycopg.ProgrammingError):
        conn.execute("SELECT %s", (Inserted(uuid.uuid4(), 1),))
