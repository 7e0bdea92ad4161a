"""Statements each PostgreSQL connection keeps prepared (ADR 029).

The save of ADR 013 binds its values client-side into one simple-protocol query, so the
server parsed and planned every statement of every save, inside the events table's lock. A
statement seen once on a connection is `PREPARE`d there before that connection's next save
or read (outside any transaction: a statement the server cannot prepare stays plain), and is
sent as `EXECUTE name(values)` from then on. A read sends it as the extended protocol's execution
of the named statement instead (`Prepared.rows`), its values bound server-side.

This is safe because psycopg holds no prepared statements of its own on the pool's
connections (`prepare_threshold=None`, `infrastructure/pg_store.py`): psycopg sends
`DEALLOCATE ALL` after a rollback or a `DROP` only when it holds some, which removed ours too.
A `PREPARE` is not transactional, so a save rolled back keeps them. Names are a digest of the
text: two stores on one connection name one statement alike.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
import psycopg.errors
from psycopg.adapt import PyFormat, Transformer
from psycopg.pq import DiagnosticField, ExecStatus, Format, TransactionStatus

from session_awareness.logs import get_logger

log = get_logger()

_PLACEHOLDER = re.compile(r"%%|%s")


def _numbered(query: str) -> str:
    """`query` with psycopg's `%s` placeholders as `$1`, `$2`, … (and `%%` as `%`)."""
    count = 0

    def number(match: re.Match[str]) -> str:
        nonlocal count
        if match.group() == "%%":
            return "%"
        count += 1
        return f"${count}"

    return _PLACEHOLDER.sub(number, query)


def _name(query: str) -> str:
    return "sa_" + hashlib.blake2b(query.encode(), digest_size=10).hexdigest()


class Prepared:
    """What one connection has prepared, and what it saw and will prepare."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.wanted: dict[str, None] = {}
        self.plain: set[str] = set()
        self._adapt: Transformer | None = None

    def _name_of(self, query: str) -> str | None:
        """The name `query` is prepared under here; None while it is not (it is then
        wanted, unless the server refused to prepare it)."""
        name = self.names.get(query)
        if name is None and query not in self.plain:
            self.wanted[query] = None
        return name

    def rows(
        self, conn: psycopg.Connection[Any], query: str, params: Sequence[Any] = ()
    ) -> list[tuple[Any, ...]] | None:
        """The rows of `query`, a read, run as the extended protocol's execution of its
        prepared statement on `conn` (idle, autocommit): the values go as text, bound and
        typed by the server as `PREPARE` inferred them, and the rows are loaded as a
        cursor's would be. None while `query` is not prepared here (it is then wanted).
        A failed statement raises the error class of its SQLSTATE."""
        name = self._name_of(query)
        if name is None:
            return None
        adapt = self._adapt
        if adapt is None:
            adapt = self._adapt = Transformer(conn)
        values = adapt.dump_sequence(params, [PyFormat.TEXT] * len(params))
        result = conn.pgconn.exec_prepared(name.encode(), values, result_format=Format.TEXT)
        if result.status != ExecStatus.TUPLES_OK:
            raise _error(conn, result)
        adapt.set_pgresult(result)
        rows = adapt.load_rows(0, result.ntuples, tuple)
        adapt.set_pgresult(None)  # the connection keeps no page between reads
        return rows

    def bound(self, bind: Callable[..., str], query: str, params: Sequence[Any] = ()) -> str:
        """`query` with `params`, bound client-side by `bind` (psycopg's `mogrify`): as an
        `EXECUTE` of the prepared statement, or plain while it is not prepared yet."""
        name = self._name_of(query)
        if name is None:
            return bind(query, params)
        if not params:
            return "EXECUTE " + name
        return f"EXECUTE {name}({bind(', '.join(['%s'] * len(params)), params)})"

    def prepare_wanted(self, conn: psycopg.Connection[Any], *, writes: bool) -> None:
        """Prepare the statements seen since the last call; `conn` is idle (autocommit,
        outside any transaction), so a statement that fails to prepare fails alone. A
        statement that writes is prepared only before a save (`writes`): preparing takes its
        tables' locks, and an insert's waits for the writer holding the events table's."""
        if not self.wanted or conn.info.transaction_status != TransactionStatus.IDLE:
            return
        wanted = [query for query in self.wanted if writes or query.startswith("SELECT")]
        for query in wanted:
            del self.wanted[query]
            name = _name(query)
            try:
                conn.execute(f"PREPARE {name} AS {_numbered(query)}")
            except psycopg.errors.DuplicatePreparedStatement:
                pass  # another store on this connection prepared the same text
            except psycopg.errors.Error as error:
                if conn.broken:
                    raise
                self.plain.add(query)
                log.debug("pg_statement_stays_plain", error=str(error), statement=query[:80])
                continue
            self.names[query] = name


def _error(conn: psycopg.Connection[Any], result: Any) -> psycopg.Error:
    """psycopg's error for a failed `result` (`error_from_result`: its SQLSTATE's class).
    A result without a SQLSTATE is libpq's own, the connection lost (the deadline of ADR 017
    shuts its socket): an `OperationalError`, as psycopg's cursors raise for it."""
    if not result.error_field(DiagnosticField.SQLSTATE):
        message = (result.error_message or conn.pgconn.error_message).decode(errors="replace")
        return psycopg.OperationalError(message.strip() or "the server sent no answer")
    return psycopg.errors.error_from_result(result, encoding=conn.info.encoding)


class PreparedStatements:
    """The `Prepared` of each connection, kept as long as the connection lives."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_connection: weakref.WeakKeyDictionary[Any, Prepared] = weakref.WeakKeyDictionary()

    def on(self, conn: psycopg.Connection[Any]) -> Prepared:
        """The statements of `conn` (a connection is used by one thread at a time)."""
        with self._lock:
            prepared = self._by_connection.get(conn)
            if prepared is None:
                prepared = self._by_connection[conn] = Prepared()
            return prepared

    def ready(self, conn: psycopg.Connection[Any], *, writes: bool) -> Prepared:
        """The statements of `conn`, once it has prepared those it has seen
        (`Prepared.prepare_wanted`; `writes`: before a save)."""
        prepared = self.on(conn)
        prepared.prepare_wanted(conn, writes=writes)
        return prepared

    def binder(self, conn: psycopg.Connection[Any], *, writes: bool) -> Callable[..., str]:
        """How `conn` binds a statement and its values client-side (`Prepared.bound`), once
        it has prepared the statements it has seen."""
        prepared = self.ready(conn, writes=writes)
        return functools.partial(prepared.bound, psycopg.ClientCursor(conn).mogrify)

    def texts(self) -> set[str]:
        """The statements prepared on the connections alive, by their text."""
        with self._lock:
            return {query for prepared in self._by_connection.values() for query in prepared.names}

    def forget(self, conn: psycopg.Connection[Any]) -> None:
        """`conn` lost its prepared statements (someone ran `DEALLOCATE`): start again."""
        with self._lock:
            self._by_connection.pop(conn, None)
