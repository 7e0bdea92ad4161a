"""A store opened by a role that may not create its tables: an application role to which the
store's owner granted only reads and writes, the usual least-privilege deployment. Every DDL
statement needs a privilege that role lacks, `IF NOT EXISTS` included (`CREATE SCHEMA IF
NOT EXISTS` the database's CREATE, `CREATE TABLE IF NOT EXISTS` the schema's, `CREATE INDEX
IF NOT EXISTS` and `CREATE OR REPLACE FUNCTION` ownership), so `open_service` used to fail
with the server's bare "permission denied for database …"."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import psycopg
import pytest
import structlog
from psycopg.sql import SQL, Identifier

from session_awareness.application import open_service
from session_awareness.application.errors import ConfigurationError
from session_awareness.infrastructure.pg_store import in_place
from session_awareness.infrastructure.readmodel.tables import TABLES
from session_awareness.testing.pgcluster import PostgresCluster

PARENT, CHILD = "agent:main:main", "agent:main:subagent:worker"

#: What the owner grants an application role: reads and writes, nothing that creates.
GRANTS = (
    "GRANT USAGE ON SCHEMA {schema} TO {role}",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}",
    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
)

RoleUrl = Callable[..., str]


@pytest.fixture
def schema() -> str:
    return f"r_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def owner_url(postgres: PostgresCluster, schema: str) -> str:
    return f"{postgres.url}?schema={schema}"


@pytest.fixture
def role_url(postgres: PostgresCluster, schema: str) -> Iterator[RoleUrl]:
    """`role_url(grant=True)`: a new login role's URL of the schema; with `grant`, the
    schema's tables as they are now granted to it for reads and writes."""
    made: list[str] = []

    def make(*, grant: bool = True) -> str:
        role, password = f"app_{uuid.uuid4().hex[:8]}", secrets.token_hex(8)
        with psycopg.connect(postgres.url, autocommit=True) as c:
            c.execute(SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(Identifier(role), password))
            made.append(role)
            for grant_sql in GRANTS if grant else ():
                c.execute(SQL(grant_sql).format(schema=Identifier(schema), role=Identifier(role)))
        parts = urlsplit(postgres.url)
        netloc = f"{role}:{password}@{parts.hostname}:{parts.port}"
        return parts._replace(netloc=netloc).geturl() + f"?schema={schema}"

    yield make
    with psycopg.connect(postgres.url, autocommit=True) as c:
        for role in made:
            c.execute(SQL("DROP OWNED BY {}").format(Identifier(role)))
            c.execute(SQL("DROP ROLE {}").format(Identifier(role)))


def _created_by_owner(owner_url: str) -> None:
    svc = open_service(owner_url)
    try:
        svc.open_session(PARENT)
        svc.record_child_spawned(CHILD, parent=PARENT, run_id="r1")
    finally:
        svc.close()


def _objects_and_owners(postgres: PostgresCluster, schema: str) -> list[tuple[str, str]]:
    with psycopg.connect(postgres.url) as c:
        return c.execute(
            "SELECT c.relname, pg_get_userbyid(c.relowner) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
            "UNION ALL SELECT p.proname, pg_get_userbyid(p.proowner) FROM pg_proc p "
            "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %s ORDER BY 1",
            (schema, schema),
        ).fetchall()


def test_a_role_granted_only_reads_and_writes_uses_the_store_its_owner_created(
    postgres: PostgresCluster, schema: str, owner_url: str, role_url: RoleUrl
) -> None:
    """R-W4, R-N3 and R-S1 work the same for the application role, beside the owner's own
    process on the same database (R-N7); the role creates and replaces nothing, and says
    once per recorder that it used the schema in place."""
    _created_by_owner(owner_url)
    before = _objects_and_owners(postgres, schema)
    url = role_url()
    with structlog.testing.capture_logs() as logs:
        app = open_service(url)
    try:
        said = [entry for entry in logs if entry["event"] == "store_schema_in_place"]
        assert len(said) == 2  # the event store's recorder and the snapshot store's
        assert {(e["role"], e["schema"], e["log_level"]) for e in said} == {
            (urlsplit(url).username, schema, "info")
        }
        assert app.record_human_direct_message(CHILD, channel="telegram") == 2
        assert app.drain_notices(PARENT) == [
            f'Session "{CHILD}" changed (other actor). Reconcile before acting: '
            f'session_status sessionKey "{CHILD}" changesSince 1.'
        ]
        status = app.session_status(CHILD, changes_since=1)
        assert [e["kind"] for e in status["stateChanges"]["events"]] == ["human_direct_message"]
        owner = open_service(owner_url)
        try:
            assert owner.record_human_direct_message(CHILD, channel="slack") == 3
            assert owner.pending_notices(PARENT) == app.pending_notices(PARENT) != []
            assert app.session_status(CHILD)["stateVersion"] == 3
        finally:
            owner.close()
    finally:
        app.close()
    assert _objects_and_owners(postgres, schema) == before


def test_a_store_not_in_place_is_refused_naming_what_is_missing(
    postgres: PostgresCluster, schema: str, owner_url: str, role_url: RoleUrl
) -> None:
    """A table gone and a function whose body is not this version's (an upgrade the owner
    has not opened yet): the role says what, and who can put it in place; it creates
    nothing, and once the owner has opened the store it opens too."""
    _created_by_owner(owner_url)
    url = role_url()
    with psycopg.connect(postgres.url, autocommit=True) as c:
        c.execute(SQL("DROP TABLE {}.session_material").format(Identifier(schema)))
        c.execute(
            SQL(
                "CREATE OR REPLACE FUNCTION {}.session_awareness_refuse(message text) "
                "RETURNS boolean LANGUAGE sql AS 'SELECT true'"
            ).format(Identifier(schema))
        )
    with pytest.raises(ConfigurationError) as raised:
        open_service(url)
    message = str(raised.value)
    assert f'"{schema}".session_material (table)' in message
    assert f'"{schema}"."session_awareness_refuse" (function)' in message
    assert "may not create the store's tables" in message
    assert "(its owner), then as" in message
    assert "session_registry" not in message  # only what is missing
    assert "session_material" not in {name for name, _ in _objects_and_owners(postgres, schema)}

    open_service(owner_url).close()  # the owner puts it back in place
    with psycopg.connect(postgres.url, autocommit=True) as c:
        for grant_sql in GRANTS:  # the new table's privileges
            role = urlsplit(url).username
            c.execute(SQL(grant_sql).format(schema=Identifier(schema), role=Identifier(role)))
    app = open_service(url)
    try:
        assert app.record_human_direct_message(CHILD, channel="telegram") == 2
        assert app.pending_notices(PARENT) != []
    finally:
        app.close()


def test_a_role_that_owns_its_schema_creates_the_store_without_the_databases_privilege(
    postgres: PostgresCluster, schema: str, role_url: RoleUrl
) -> None:
    """`CREATE SCHEMA IF NOT EXISTS` needs CREATE on the database even when the schema is
    there: a role given a schema of its own (`CREATE SCHEMA … AUTHORIZATION`) and nothing on
    the database opens a fresh store in it."""
    url = role_url(grant=False)
    role = urlsplit(url).username
    with psycopg.connect(postgres.url, autocommit=True) as c:
        c.execute(
            SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(Identifier(schema), Identifier(role))
        )
        database = urlsplit(postgres.url).path.lstrip("/")
        assert not c.execute(
            "SELECT has_database_privilege(%s, %s, 'CREATE')", (role, database)
        ).fetchone()[0]
    _created_by_owner(url)
    owners = {owner for _, owner in _objects_and_owners(postgres, schema)}
    assert owners == {role}


def test_the_audit_says_which_role_it_needs(owner_url: str, role_url: RoleUrl) -> None:
    """The audit replays into a scratch schema of its own, which needs CREATE on the
    database: the role is told so, not the server's bare refusal."""
    _created_by_owner(owner_url)
    app = open_service(role_url())
    try:
        with pytest.raises(ConfigurationError, match=r"an audit.*run it as a role that may"):
            app.audit()
        assert app.session_status(CHILD)["stateVersion"] == 1  # the service goes on
    finally:
        app.close()
    owner = open_service(owner_url)
    try:
        assert owner.audit().clean
    finally:
        owner.close()


def test_read_models_an_earlier_version_wrote_wait_for_the_owner_to_rebuild_them(
    postgres: PostgresCluster, schema: str, owner_url: str, role_url: RoleUrl
) -> None:
    """The first open after an upgrade rebuilds the read models an earlier version wrote,
    through the audit's scratch: the role is told the owner must open the store first, and
    once the owner has (and rebuilt them), the role opens it, with nothing lost (R-S1)."""
    _created_by_owner(owner_url)
    url = role_url()
    with psycopg.connect(postgres.url, autocommit=True) as c:  # as an earlier version left it
        c.execute(SQL("DELETE FROM {}.session_activity").format(Identifier(schema)))
        c.execute(  # which wrote no mark of read models found complete (ADR 044)
            SQL(
                "DELETE FROM {}.session_awareness_marks WHERE name = 'read_models_complete'"
            ).format(Identifier(schema))
        )
    with pytest.raises(ConfigurationError, match="first open after an upgrade"):
        open_service(url)
    open_service(owner_url).close()
    app = open_service(url)
    try:
        assert app.session_status(CHILD, changes_since=0)["stateChanges"]["events"][0]["kind"] == (
            "child_spawned"
        )
        assert app.record_human_direct_message(CHILD, channel="telegram") == 2
    finally:
        app.close()


def test_every_statement_the_recorders_create_with_is_checked_in_place(
    owner_url: str,
) -> None:
    """`in_place` recognises each of the recorders' DDL statements (a statement it could not
    read would refuse every open by an application role), and finds them all on a store
    just created: every read-model table among them."""
    svc = open_service(owner_url)
    try:
        recorders = [svc.store.recorder, svc.store.snapshots.recorder]  # type: ignore[attr-defined]
        datastore = recorders[0].datastore
        with datastore.get_connection() as conn:
            found = [
                item
                for recorder in recorders
                for item in in_place(conn, datastore.schema, recorder.sql_create_statements)
            ]
    finally:
        svc.close()
    assert found and all(present for _, present in found), found
    names = {name for name, _ in found}
    for table in TABLES:
        assert f'"{datastore.schema}".{table.name} (table)' in names
    assert any(name.endswith("(index)") for name in names)
    assert any(name.endswith("(type)") for name in names)
    assert sum(name.endswith("(function)") for name in names) == 2
