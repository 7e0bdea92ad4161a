"""How a backend spells the read models' SQL; each backend module defines its own.

Statements are written once as templates with `?` placeholders and holes — `{s}` (the
schema prefix), `{greatest}`, `{bytewise}` (after a text column: compared by code point),
`{texts}` (the texts of one bound JSON array, as rows of one column), and the column types
`{id}`, `{int}`, `{text}` and `{keyed}` (`schema`) — that `render` fills in for the backend.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Self
from uuid import UUID


@dataclass(frozen=True)
class Dialect:
    schema_prefix: str = ""  # "" or '"schema".'
    placeholder: str = "?"
    greatest: str = "MAX"
    id_type: str = "TEXT"
    int_type: str = "INTEGER"
    text_type: str = "TEXT"
    keyed: str = ""  # what follows a table with a composite key
    #: What follows a text column compared or ordered by code point, as Python orders str
    #: (SQLite's default, BINARY, already does; PostgreSQL's follows the database's locale).
    bytewise: str = ""
    #: A query of the texts of one bound parameter, a JSON array of texts (or nulls).
    texts: str = "SELECT value FROM json_each(?)"

    def render(self, template: str) -> str:
        """A statement template (`{s}`, `{greatest}`, … and `?` placeholders) for this backend."""
        text = template.format(
            s=self.schema_prefix, greatest=self.greatest, id=self.id_type, int=self.int_type,
            text=self.text_type, keyed=self.keyed, bytewise=self.bytewise, texts=self.texts,
        )  # fmt: skip
        return text.replace("?", self.placeholder) if self.placeholder != "?" else text

    def with_prefix(self, schema_prefix: str) -> Self:
        """The same dialect aimed at tables under another schema prefix (an audit's scratch)."""
        return dataclasses.replace(self, schema_prefix=schema_prefix)

    def bind_id(self, value: UUID) -> Any:
        """How an aggregate id is bound as a parameter."""
        raise NotImplementedError

    def one_of(self, column: str, values: list[str]) -> tuple[str, Any]:
        """`column` is one of `values`, as ONE bound parameter however many values there are
        (PostgreSQL refuses more than 65,535 parameters, SQLite more than 32,766)."""
        raise NotImplementedError

    def one_of_ids(self, column: str, values: Collection[UUID | str]) -> tuple[str, Any]:
        """`column` (an id column) is one of `values` (ids, or their hex), as ONE bound
        parameter."""
        raise NotImplementedError

    def ids_with_versions(
        self, rows: Sequence[tuple[UUID | str, int, int]]
    ) -> tuple[str, tuple[Any, ...]]:
        """A row source `d(id, version, position)` of (aggregate id or its hex, version,
        notification id) rows, whatever their number, with ids as the event table keys
        them, and its bound parameters."""
        raise NotImplementedError


class Rendered:
    """Holds a backend's dialect and renders each of its statement templates once."""

    dialect: Dialect

    @cache  # noqa: B019 -- a handful of fixed templates per holder, kept for its lifetime
    def sql(self, template: str) -> str:
        return self.dialect.render(template)
