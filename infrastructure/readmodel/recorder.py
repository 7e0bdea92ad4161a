"""The read models over a backend's connections: one object per backend (`SQLiteReadModels`,
`PostgresReadModels`) holding the queries, the writes and the bulk writes, held by that
backend's application recorder, which shares the library's `datastore` with it and asks it
for the projection's rows inside the transaction that stores the events."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from uuid import UUID

from session_awareness.infrastructure.readmodel.bulk import BulkWrites
from session_awareness.infrastructure.readmodel.reads import ReadModelQueries
from session_awareness.infrastructure.readmodel.tables import READ_MODEL_DDL


class ReadModelStore(BulkWrites, ReadModelQueries):
    """The read models of one store: `datastore` is the library's (its connections and
    transactions), `events_table_name` the events table the checks of a save join."""

    def __init__(self, datastore: Any, events_table_name: str) -> None:
        self.datastore = datastore
        self.events_table_name = events_table_name

    def read_model_ddl(self) -> list[str]:
        """This backend's statements creating the read-model tables and indexes."""
        return [self.sql(template) for template in READ_MODEL_DDL]

    def fetch(self, template: str, params: Sequence[Any] = ()) -> list[Any]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(self.sql(template), params)
            return list(c.fetchall())

    def long_running(self) -> AbstractContextManager[None]:
        """Statements that may run for long (an audit, a rebuild): PostgreSQL lifts its call
        deadline for them; SQLite has none."""
        return nullcontext()


def neutral(value: Any) -> Any:
    """A value as both backends give it: an id as hex."""
    return value.hex if isinstance(value, UUID) else value
