"""The PostgreSQL save's checks (ADR 023's derived M, ADR 024's held cursors) refuse a save
by calling the schema's refusal function from a plain statement in the save's batch. The
function is created beside the tables when a store is opened, so a store written by an
earlier version (which checked in a `DO` block) gets it too. R-N3: the refusal is a conflict the
service runs again, so a notice recorded concurrently is never lost."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from eventsourcing.persistence import IntegrityError

from session_awareness.application import open_service
from session_awareness.infrastructure.readmodel.pg_recorder import REFUSE
from session_awareness.testing.pgcluster import PostgresCluster


def _schema_url(postgres: PostgresCluster) -> tuple[str, str]:
    schema = f"r_{uuid.uuid4().hex[:12]}"
    return schema, f"{postgres.url}?schema={schema}"


def _function_exists(conn: psycopg.Connection, schema: str) -> bool:
    row = conn.execute("SELECT to_regprocedure(%s)", (f"{schema}.{REFUSE}(text)",)).fetchone()
    return row is not None and row[0] is not None


def _fail_if_any(url: str, query: str) -> None:
    """Run the service's refusal check of `query` in a transaction of its own."""
    svc = open_service(url)
    try:
        recorder = svc.store.recorder.read_models
        with recorder.datastore.get_connection() as conn, conn.transaction(), conn.cursor() as c:
            recorder.fail_if_any(c, query, [], "refused for the test's sake; read again")
    finally:
        svc.close()


def test_a_store_without_the_function_gets_it_when_opened(postgres: PostgresCluster) -> None:
    schema, url = _schema_url(postgres)
    open_service(url).close()
    with psycopg.connect(postgres.url, autocommit=True) as conn:
        conn.execute(f'DROP FUNCTION "{schema}".{REFUSE}(text)')  # as an earlier version left it
        assert not _function_exists(conn, schema)
        _fail_if_any(url, "SELECT 1 WHERE false")
        assert _function_exists(conn, schema)


def test_a_check_whose_query_has_a_row_refuses_as_an_integrity_violation(
    postgres: PostgresCluster,
) -> None:
    _schema, url = _schema_url(postgres)
    with pytest.raises(IntegrityError, match="test's sake"):
        _fail_if_any(url, "SELECT 1")
    _fail_if_any(url, "SELECT 1 WHERE false")  # no row: nothing refused
