"""The audit's scratch on PostgreSQL: a temporary schema (`session_awareness_audit_<hex>`,
dropped afterwards) whose tables are `LIKE` the live ones (with their keys but not their
secondary indexes: the copy is only written and read by key). The comparison runs in a
REPEATABLE READ transaction, a rebuild under the library's own `LOCK TABLE … IN EXCLUSIVE
MODE` on the events table, which every writer takes first.

Run by the maintenance (its check's rebuild, ADR 044), every statement is on a pooled
connection its close can cancel (R-M2, `pg_store.ServiceDatastore.get_connection`); the
scratch schema is dropped afterwards outside that scope, so an interrupted rebuild leaves
none behind."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Notification
from psycopg.rows import tuple_row

from session_awareness.application import projection as p
from session_awareness.application.errors import ConfigurationError
from session_awareness.application.interruption import outside
from session_awareness.infrastructure.pg_store import insufficient_privilege
from session_awareness.infrastructure.readmodel.audit_tables import (
    Audit,
    EventLog,
    ScratchStore,
    View,
    q,
)
from session_awareness.infrastructure.readmodel.tables import READ_MODEL_TABLES
from session_awareness.infrastructure.readmodel.writes import Row, Write
from session_awareness.logs import get_logger

log = get_logger()
SCRATCH_SCHEMA_PREFIX = "session_awareness_audit_"
SCRATCH_REFUSED = (
    "replaying the events (an audit, or the rebuild of read models an earlier version wrote, "
    "which the first open after an upgrade runs) needs a scratch schema of its own, which "
    "this role may not create (it needs the CREATE privilege on the database): run it as a "
    "role that may, such as the store's owner"
)


class PostgresEventLog(EventLog):
    """Ids come as text and are decoded here, once each (psycopg would build a UUID for
    every row); rows as tuples, not a dict each."""

    id_column = "notification_id"
    originator = "originator_id::text"

    def convert(self, stored_id: Any) -> Any:
        return UUID(stored_id)

    def rows(self, c: Any, sql: str, params: Sequence[Any]) -> list[Any]:
        factory, c.row_factory = c.row_factory, tuple_row
        try:
            c.execute(sql, params)
            return list(c.fetchall())
        finally:
            c.row_factory = factory


class CopyingScratchStore(ScratchStore):
    def write_batches(self, c: Any, batches: dict[Write, list[Row]]) -> None:
        """Rows that are only appended are copied in (`COPY`, one stream per statement, far
        cheaper than an `INSERT` per row) and the other statements are sent pipelined;
        COPY cannot run inside a pipeline, and these batches commute."""
        rest = {}
        for write, rows in batches.items():
            if write.appends:
                with c.copy(self.sql(write.copy_statement())) as copy:
                    for row in rows:
                        copy.write_row(row)
            else:
                rest[write] = rows
        if rest:
            with c.connection.pipeline():
                self.write_as_arrays(c, rest)


class PostgresAudit(Audit):
    event_log = PostgresEventLog

    @contextmanager
    def scratch(self) -> Iterator[PostgresScratch]:
        schema = SCRATCH_SCHEMA_PREFIX + uuid.uuid4().hex[:12]
        prefix = q(schema) + "."
        live_prefix = self.live.dialect.schema_prefix
        try:
            with self.live.datastore.transaction(commit=True) as c:
                c.execute(f"CREATE SCHEMA {q(schema)}")
                for table, keys in READ_MODEL_TABLES.items():
                    # Columns, defaults and constraints; of the indexes only the key: the
                    # scratch copy is only written and read by key.
                    c.execute(
                        f"CREATE TABLE {prefix}{q(table)} (LIKE {live_prefix}{q(table)} "
                        f"INCLUDING DEFAULTS INCLUDING CONSTRAINTS, PRIMARY KEY ({keys}))"
                    )
        except Exception as error:
            if insufficient_privilege(error):
                raise ConfigurationError(SCRATCH_REFUSED) from error
            raise
        try:
            yield PostgresScratch(self, prefix)
        finally:
            try:  # outside the maintenance's scope: a close that ended the audit (R-M2)
                with outside(), self.live.datastore.transaction(commit=True) as c:
                    c.execute(f"DROP SCHEMA {q(schema)} CASCADE")
            except Exception as error:  # noqa: BLE001 -- never hide the audit's own outcome
                log.warning("audit_scratch_left", schema=schema, error=repr(error))


class PostgresScratch:
    """Replayed rows go to the scratch schema, a page per transaction, copied and pipelined."""

    def __init__(self, audit: PostgresAudit, prefix: str) -> None:
        self.audit = audit
        self.store = CopyingScratchStore(audit.live.dialect.with_prefix(prefix))

    def notifications(self, after: int, limit: int) -> Sequence[Notification]:
        return self.audit.notifications(after, limit)

    def notifications_of(
        self, topics: Collection[str], after: int, upto: int
    ) -> Sequence[Notification]:
        return self.audit.notifications_of(topics, after, upto)

    def apply(self, changes: Sequence[p.RowChange]) -> None:
        live = self.audit.live
        with live.long_running(), live.datastore.transaction(commit=True) as c:
            self.store.apply_changes_in_bulk(c, changes)

    @contextmanager
    def against_live(self, *, lock: bool) -> Iterator[View]:
        live = self.audit.live
        with (
            live.long_running(),
            live.datastore.get_connection() as conn,
            conn.transaction(force_rollback=not lock),
        ):
            c = conn.cursor()
            if lock:
                for statement in self.audit.recorder.lock_table_statements:
                    c.execute(statement)
            else:
                c.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield View(
                c, self.audit.log, self.store, live.dialect.schema_prefix, "IS DISTINCT FROM"
            )
