"""The read models over a backend's connections: mixed into each backend's application
recorder (`sqlite`, `postgres`), whose `datastore` is the library's."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from uuid import UUID

from session_awareness.application import projection as p
from session_awareness.infrastructure.readmodel.bulk import BulkWrites
from session_awareness.infrastructure.readmodel.reads import ReadModelQueries
from session_awareness.infrastructure.readmodel.tables import READ_MODEL_DDL, TABLES


class ReadModelStore(BulkWrites, ReadModelQueries):
    datastore: Any

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

    def replace_read_models(self, pages: Iterable[Sequence[p.RowChange]]) -> None:
        """Empty the read models and rebuild them from replayed pages, in one transaction."""
        with self.long_running(), self.datastore.transaction(commit=True) as c:
            for table in TABLES:
                c.execute(self.sql(f"DELETE FROM {{s}}{table.name}"))
            for changes in pages:
                self.apply_changes_in_bulk(c, changes)

    def read_model_rows(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every read-model row, table by table, in key order and in backend-neutral values
        (ids as hex, JSON as text): what an audit compares."""
        with self.long_running(), self.datastore.transaction(commit=False) as c:
            out = {}
            for table in TABLES:
                c.execute(
                    self.sql(f"SELECT * FROM {{s}}{table.name} ORDER BY {', '.join(table.key)}")
                )
                out[table.name] = [tuple(map(neutral, dict(r).values())) for r in c.fetchall()]
            return out

    def audit_store(self) -> Any:
        """The application's `AuditStore` port over this store (the backend's audit)."""
        raise NotImplementedError


def neutral(value: Any) -> Any:
    """A value as both backends give it: an id as hex."""
    return value.hex if isinstance(value, UUID) else value
