"""R-N7 (several processes share one database): processes opening one fresh store at once
take turns creating its tables, the event store's and the snapshot store's alike. The
snapshot store's recorder is the library's aggregate recorder. Left to itself, it runs
`CREATE TABLE IF NOT EXISTS` while another process runs the same statement, and the loser
fails on the catalogue's unique index (`pg_type_typname_nsp_index`): `open_service` raised a
`ConfigurationError` in 2 of 30 starts of four processes."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import psycopg
from psycopg.sql import SQL, Identifier

from session_awareness.application import open_service
from session_awareness.infrastructure.pg_config import parse_postgres_url
from session_awareness.infrastructure.pg_store import (
    SCHEMA_LOCK,
    ServiceAggregateRecorder,
    ServiceDatastore,
    ServicePostgresFactory,
)
from session_awareness.testing.pgcluster import PostgresCluster
from tests.conftest import wait_until


def _waiting_on_the_schema_lock(conn: psycopg.Connection) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = %s",
        (SCHEMA_LOCK & 0xFFFFFFFF,),
    ).fetchone()
    return row is not None and row[0] > 0


def _table_exists(conn: psycopg.Connection, schema: str, table: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s)", (f"{schema}.{table}",)).fetchone()
    return row is not None and row[0] is not None


def test_the_snapshot_store_is_created_in_turn(postgres: PostgresCluster) -> None:
    """While another process holds the schema lock, the snapshot store's recorder waits for
    it before creating its table, and creates it once the lock is released."""
    schema = f"p_{uuid.uuid4().hex[:12]}"
    datastore = ServiceDatastore(parse_postgres_url(f"{postgres.url}?schema={schema}"))
    recorder = ServiceAggregateRecorder(datastore=datastore, events_table_name="x_snapshots")
    failures: list[BaseException] = []

    def create() -> None:
        try:
            recorder.create_table()
        except BaseException as error:  # noqa: BLE001 -- reported by the assertion below
            failures.append(error)

    with psycopg.connect(postgres.url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
        creating = threading.Thread(target=create)
        try:
            creating.start()
            assert wait_until(lambda: _waiting_on_the_schema_lock(other))
            assert not _table_exists(other, schema, "x_snapshots")
        finally:
            other.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK,))
            creating.join(timeout=60)
        try:
            assert not creating.is_alive()
            assert failures == []
            assert _table_exists(other, schema, "x_snapshots")
        finally:
            datastore.close()


def test_the_service_factory_builds_the_snapshot_store_with_that_recorder() -> None:
    assert ServicePostgresFactory.aggregate_recorder_class is ServiceAggregateRecorder


def test_a_one_connection_pool_opens_and_records(postgres: PostgresCluster) -> None:
    """`pool_size=1&max_overflow=0` is a valid pool: creating the store runs on the
    connection that holds the schema lock, so opening needs no second connection."""
    schema = f"p_{uuid.uuid4().hex[:12]}"
    url = f"{postgres.url}?schema={schema}&pool_size=1&max_overflow=0&connect_timeout=1"
    with open_service(url) as svc:
        svc.open_session("agent:main:main")
        assert svc.session_status("agent:main:main")["stateVersion"] == 0


def _creating_the_schema_waits(conn: psycopg.Connection) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND query LIKE 'CREATE SCHEMA%'"
    ).fetchone()
    return row is not None and row[0] > 0


def test_a_schema_another_creator_commits_meanwhile_is_used(postgres: PostgresCluster) -> None:
    """R-N7: a creator that does not take the service's schema lock (an earlier version's
    gateway, an operator's script) creates the new schema while an open is creating it: the
    open's `CREATE SCHEMA IF NOT EXISTS` waits on the uncommitted schema and then meets
    `pg_namespace`'s unique index. The open goes on in the schema the other created."""
    schema = f"p_{uuid.uuid4().hex[:12]}"
    opened: list[Any] = []
    failures: list[BaseException] = []

    def start() -> None:
        try:
            opened.append(open_service(f"{postgres.url}?schema={schema}"))
        except BaseException as error:  # noqa: BLE001 -- reported by the assertion below
            failures.append(error)

    with psycopg.connect(postgres.url) as other:
        other.execute(SQL("CREATE SCHEMA {}").format(Identifier(schema)))  # not committed yet
        opening = threading.Thread(target=start)
        opening.start()
        try:
            with psycopg.connect(postgres.url, autocommit=True) as watcher:
                assert wait_until(lambda: _creating_the_schema_waits(watcher))
        finally:
            other.commit()
            opening.join(timeout=60)
    try:
        assert failures == []
        assert len(opened) == 1
        opened[0].open_session("agent:main:main")
        assert opened[0].session_status("agent:main:main")["stateVersion"] == 0
    finally:
        for svc in opened:
            svc.close()


def test_a_start_on_a_store_in_place_waits_for_no_lock_on_its_tables(
    postgres: PostgresCluster,
) -> None:
    """R-N7, ADR 045 (issue 39, item 6): a start on a store whose tables, indexes and
    functions are all in place runs none of its DDL. `CREATE INDEX IF NOT EXISTS` takes its
    table's SHARE lock before it finds the index there, so each start queued behind a VACUUM
    (which PostgreSQL cancels only after `deadlock_timeout`: likely why one start after a
    million-session prune took 1.1 s) or another process's long transaction. Here a
    connection holds the event table as a VACUUM does; the start answers meanwhile."""
    schema = f"p_{uuid.uuid4().hex[:12]}"
    url = f"{postgres.url}?schema={schema}"
    with open_service(url, maintenance="manual") as svc:
        svc.open_session("agent:main:main")
        table = svc.store.recorder.events_table_name  # type: ignore[attr-defined]
    opened: list[Any] = []
    with psycopg.connect(postgres.url) as holder:
        holder.execute(
            SQL("LOCK TABLE {} IN SHARE UPDATE EXCLUSIVE MODE").format(Identifier(schema, table))
        )
        starting = threading.Thread(
            target=lambda: opened.append(open_service(url, maintenance="manual")), daemon=True
        )
        starting.start()
        try:
            assert wait_until(lambda: bool(opened), 20), "the start waited for the table lock"
            assert opened[0].session_status("agent:main:main")["sessionKey"] == "agent:main:main"
        finally:
            holder.rollback()
            starting.join(30)
    opened[0].close()
