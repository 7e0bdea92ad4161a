"""The production store's connections: the library's PostgreSQL factory and datastore on
one libpq URL (`pg_config`), every call bounded by a deadline, and a pool that recovers at
once. The read models on top are `infrastructure/readmodel/pg_recorder.py`; the wake listener
is `pg_listener`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from functools import partial
from typing import Any

import psycopg
from eventsourcing.persistence import InterfaceError, OperationalError
from eventsourcing.postgres import (
    BasePostgresFactory,
    PostgresAggregateRecorder,
    PostgresDatastore,
    PostgresFactory,
)
from psycopg.rows import dict_row, tuple_row
from psycopg.sql import SQL, Composable, Identifier
from psycopg_pool import ConnectionPool, PoolTimeout
from psycopg_pool.base import AttemptWithBackoff

from session_awareness.application.errors import (
    ConfigurationError,
    StoreUnavailableError,
    raised_from,
)
from session_awareness.application.interruption import CURRENT, Held
from session_awareness.infrastructure.pg_config import (
    PostgresConfig,
    connection_failure,
    parse_postgres_url,
)
from session_awareness.logs import get_logger

log = get_logger()

#: The pool's reconnection attempts after a lost connection: soon, and never far apart, so
#: recording resumes within a second of the server answering again.
FIRST_RECONNECT_DELAY, MAX_RECONNECT_DELAY = 0.05, 0.5
#: How often the deadline watch looks at the calls in flight.
DEADLINE_TICK = 0.05


#: The deadline of the calls made in this context: unset → the store's connect timeout;
#: None → no deadline (long maintenance); seconds otherwise.
_BUDGET: ContextVar[float | bool | None] = ContextVar("session_awareness_budget", default=False)


@contextlib.contextmanager
def bounded(seconds: float | None) -> Iterator[None]:
    """Give the store calls made inside a deadline of `seconds` (None: none)."""
    token = _BUDGET.set(seconds)
    try:
        yield
    finally:
        _BUDGET.reset(token)


#: The advisory lock that serialises concurrent first-use schema creation (every recorder's).
SCHEMA_LOCK = 0x5E5510A5
#: Creating the schema may wait for another process's creation: this many connect timeouts.
OPEN_BUDGET_FACTOR = 10


def create_in_turn(
    datastore: PostgresDatastore,
    create: Callable[[], None],
    statements: Sequence[Composable],
) -> None:
    """Create the schema, then run a recorder's `create`, holding an advisory lock, so that
    concurrent first uses of one store (several processes starting at once) take turns.
    Without it they race on `CREATE SCHEMA IF NOT EXISTS` and `CREATE TABLE IF NOT EXISTS`
    themselves: the loser of a table's race fails on the catalogue's unique index.

    A role that may not create them (an application role to which the store's owner granted
    only reads and writes) goes on without creating anything when everything `statements`
    (the recorder's DDL) would create is already in place as they would create it; otherwise
    it fails, naming what is missing (`in_place`).

    The recorder's `create` runs on the connection that holds the lock (`ServiceDatastore.
    holding`): a one-connection pool (`pool_size=1&max_overflow=0`) opens too."""
    budget = OPEN_BUDGET_FACTOR * getattr(datastore, "connect_timeout", 3)
    with bounded(budget), datastore.get_connection() as conn, _holding(datastore, conn):
        conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
        try:
            try:
                # Even `IF NOT EXISTS` needs the database's CREATE privilege: ask first.
                if conn.execute(_SCHEMA_EXISTS, (datastore.schema,)).fetchone() is None:
                    _create_schema(conn, datastore.schema)
                    create()
                elif _all_in_place(conn, datastore.schema, statements):
                    _used_in_place(conn, datastore, may_create=_may_create(conn, datastore.schema))
                else:
                    create()
            except Exception as error:
                if not insufficient_privilege(error):
                    raise
                found = in_place(conn, datastore.schema, statements)
                missing = [name for name, present in found if not present]
                if missing:
                    raise ConfigurationError(
                        f"the role {conn.info.user!r} may not create the store's tables, and "
                        "the store lacks these, or holds an older version of them: "
                        f"{', '.join(missing)}. Open the store once as a role that may create "
                        f"them (its owner), then as {conn.info.user!r} again"
                    ) from error
                _used_in_place(conn, datastore, may_create=False)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK,))


def _create_schema(conn: Any, schema: str) -> None:
    """`CREATE SCHEMA IF NOT EXISTS`, which only the schema lock serializes: a creator that
    does not take it (an earlier version's gateway, an operator's script) may have created
    the schema uncommitted, and then `IF NOT EXISTS` waits for it and fails on
    `pg_namespace`'s unique index once it commits. The schema is there: go on in it."""
    try:
        conn.execute(SQL("CREATE SCHEMA IF NOT EXISTS {}").format(Identifier(schema)))
    except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateSchema):
        if conn.execute(_SCHEMA_EXISTS, (schema,)).fetchone() is None:
            raise
        log.info("store_schema_created_meanwhile", schema=schema)


def _holding(datastore: PostgresDatastore, conn: Any) -> contextlib.AbstractContextManager[Any]:
    if isinstance(datastore, ServiceDatastore):
        return datastore.holding(conn)
    return contextlib.nullcontext()


#: The SQLSTATE of a statement the role may not run (insufficient_privilege).
INSUFFICIENT_PRIVILEGE = "42501"
_SCHEMA_EXISTS = "SELECT 1 FROM pg_namespace WHERE nspname = %s"
_NAME = r'(?:"(?:[^"]|"")+"|\w+)'
#: The head of each statement a recorder's DDL holds, and what it creates.
_CREATES = re.compile(
    rf"CREATE (?:UNIQUE )?(?P<kind>TABLE|INDEX|TYPE|OR REPLACE FUNCTION) (?:IF NOT EXISTS )?"
    rf"(?P<name>{_NAME}(?:\.{_NAME})?)"
)
_BODY = re.compile(r"\bAS \$(?P<tag>\w*)\$(?P<body>.*)\$(?P=tag)\$", re.DOTALL)
_PRESENT = {
    "TABLE": "SELECT to_regclass(%s) IS NOT NULL",
    "INDEX": "SELECT to_regclass(%s) IS NOT NULL",
    "TYPE": "SELECT to_regtype(%s) IS NOT NULL",
    # A function is in place when its body is this version's: `OR REPLACE` would change it.
    "OR REPLACE FUNCTION": "SELECT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n "
    "ON n.oid = p.pronamespace WHERE n.nspname = %s AND p.proname = %s AND p.prosrc = %s)",
}


def in_place(
    conn: psycopg.Connection[Any], schema: str, statements: Sequence[Composable]
) -> list[tuple[str, bool]]:
    """What each of `statements` (`CREATE` statements) creates, and whether it is already
    there: a table, an index or a type by its name, a function by its name and its body."""
    found, cursor = [], conn.cursor(row_factory=tuple_row)
    for statement in statements:
        text = statement.as_string(conn)
        head = _CREATES.match(text.strip())
        if head is None:
            raise ValueError(f"cannot tell what this statement creates: {text[:80]}")
        kind, name = head["kind"], head["name"]
        parts = [_unquote(part) for part in re.findall(_NAME, name)]
        if kind == "INDEX":  # named without its schema, created in its table's
            name = f"{Identifier(schema).as_string(conn)}.{name}"
        if kind == "OR REPLACE FUNCTION":
            body = _BODY.search(text)
            if body is None:
                raise ValueError(f"cannot find the body of this function: {text[:80]}")
            namespace = parts[0] if len(parts) == 2 else schema
            params: tuple[str, ...] = (namespace, parts[-1], body["body"])
        else:
            params = (name,)
        row = cursor.execute(_PRESENT[kind], params).fetchone()
        found.append((f"{name} ({kind.rpartition(' ')[2].lower()})", bool(row and row[0])))
    return found


def _all_in_place(
    conn: psycopg.Connection[Any], schema: str, statements: Sequence[Composable]
) -> bool:
    """Whether everything `statements` would create is in place, asked of the catalogue: then
    a start runs none of them. `CREATE INDEX IF NOT EXISTS` takes its table's SHARE lock
    before it finds the index there, so every start would queue behind a writer of another
    process, and behind a VACUUM until PostgreSQL cancels it (after `deadlock_timeout`, 1 s):
    the second start after a large prune waited so (ADR 045)."""
    try:
        return all(present for _, present in in_place(conn, schema, statements))
    except ValueError:  # a statement this reading cannot tell: run them all, as before
        return False


def _used_in_place(conn: Any, datastore: PostgresDatastore, *, may_create: bool) -> None:
    """The store's tables are used as they are: what the library does after creating them,
    and, for a role that may not create them, `store_schema_in_place` said once."""
    datastore.register_type_adapters()
    if not may_create:
        log.info("store_schema_in_place", role=conn.info.user, schema=datastore.schema)


def _may_create(conn: psycopg.Connection[Any], schema: str) -> bool:
    """Whether the role may create in `schema`: one that may not says it used the schema in
    place (`store_schema_in_place`), as when its `CREATE` was refused."""
    cursor = conn.cursor(row_factory=tuple_row)
    row = cursor.execute("SELECT has_schema_privilege(%s, 'CREATE')", (schema,)).fetchone()
    return bool(row and row[0])


def _unquote(identifier: str) -> str:
    """An identifier as PostgreSQL stores it: a quoted one as written, a bare one folded."""
    if identifier.startswith('"'):
        return identifier[1:-1].replace('""', '"')
    return identifier.lower()


def insufficient_privilege(error: BaseException | None) -> bool:
    """Whether `error`, or an error it was raised from, is the server's refusal of a
    statement the role may not run (the library re-raises psycopg's errors as its own)."""
    return raised_from(error, lambda e: getattr(e, "sqlstate", None) == INSUFFICIENT_PRIVILEGE)


class ServiceAggregateRecorder(PostgresAggregateRecorder):
    """The library's aggregate recorder (the snapshot store's, ADR 022), its tables created
    in turn with the event store's (`create_in_turn`)."""

    def create_table(self) -> None:
        create_in_turn(self.datastore, super().create_table, self.sql_create_statements)


class Deadlines:
    """Ends a call the server does not answer in time. A stopped server (a frozen host, a
    partition that drops packets) never answers and its kernel may still acknowledge every
    packet, so neither TCP nor the server's own timeouts end the wait: at the deadline the
    call's socket is shut down, and libpq reports the connection lost at once."""

    def __init__(self) -> None:
        self._lock = threading.Condition(threading.Lock())
        self._armed: dict[int, tuple[float, psycopg.Connection[Any]]] = {}
        self._fired: set[int] = set()
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None
        self._closed = False

    def arm(self, conn: psycopg.Connection[Any], seconds: float) -> int:
        token = next(self._tokens)
        with self._lock:
            self._armed[token] = (time.monotonic() + seconds, conn)
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._watch, name="session-awareness-deadlines", daemon=True
                )
                self._thread.start()
        return token

    def disarm(self, token: int) -> bool:
        """Stop watching a call; True when its deadline had passed (its socket is shut)."""
        with self._lock:
            if self._armed.pop(token, None) is not None:
                return False
            if token in self._fired:
                self._fired.discard(token)
                return True
            return False

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify()

    def _watch(self) -> None:
        # It ticks rather than being woken by each call: a wake-up per call would cost the
        # call a thread switch; a tick costs a few microseconds, 20 times a second.
        with self._lock:
            while not self._closed:
                now = time.monotonic()
                for token, (deadline, conn) in list(self._armed.items()):
                    if deadline <= now:
                        del self._armed[token]
                        self._fired.add(token)
                        _shut_down(conn)
                self._lock.wait(DEADLINE_TICK)


#: How long the close waits for the server to take a cancel request (R-M2).
CANCEL_TIMEOUT = 0.5


def _cancel(conn: psycopg.Connection[Any]) -> None:
    """Cancel the statement running on `conn`, if any (from another thread)."""
    with contextlib.suppress(psycopg.Error):
        conn.cancel_safe(timeout=CANCEL_TIMEOUT)


def _shut_down(conn: psycopg.Connection[Any]) -> None:
    """Shut a connection's socket down (both ways): a read waiting on it returns at once."""
    try:
        fd = conn.pgconn.socket
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except (OSError, psycopg.Error):  # already closed
        return
    log.warning("store_call_timed_out", backend_pid=conn.info.backend_pid)


class _Reconnecting(AttemptWithBackoff):
    """The pool's reconnection schedule, from soon to at most half a second apart (the
    library's grows to minutes: recording would resume long after the server is back)."""

    INITIAL_DELAY = FIRST_RECONNECT_DELAY

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, MAX_RECONNECT_DELAY)


class ServicePool(ConnectionPool[Any]):
    """psycopg's pool, checking each connection it hands out without a round trip (a socket
    the server closed, as a restart does, is readable: it is discarded, and the next one is
    tried at once), reconnecting on `_Reconnecting`'s schedule, and keeping the last
    connection error so that a timeout can say why."""

    last_error: str | None = None

    def _getconn_with_check_loop(self, deadline: float) -> Any:
        while True:
            conn = self._getconn_unchecked(deadline - time.monotonic())
            try:
                self._check_connection(conn)
            except Exception:
                self._putconn(conn, from_getconn=True)
                if time.monotonic() >= deadline:
                    raise
                continue
            except BaseException:  # an interrupt: the connection goes back, the call ends
                self._putconn(conn, from_getconn=True)
                raise
            return conn

    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        super()._add_connection(attempt or _Reconnecting(timeout=self.reconnect_timeout), growing)

    def _connect(self, timeout: float | None = None) -> Any:
        try:
            conn = super()._connect(timeout)
        except psycopg.Error as error:
            self.last_error = " ".join(str(error).split())
            raise
        self.last_error = None
        return conn


def _still_open(conn: psycopg.Connection[Any]) -> None:
    """The pool's check: an idle connection has nothing to read; if it has, the server
    closed it (or sent its last words): close it, so the pool discards it."""
    if conn.closed:
        raise psycopg.OperationalError("the connection is closed")
    poll = select.poll()
    poll.register(conn.fileno(), select.POLLIN)
    if poll.poll(0):
        conn.close()
        raise psycopg.OperationalError("the server closed the connection")


class ServiceDatastore(PostgresDatastore):
    """The library's datastore on a libpq connection string, with every call bounded by a
    deadline (`connect_timeout` by default) and errors that say why."""

    def __init__(self, config: PostgresConfig) -> None:
        super().__init__(
            dbname="", host="", port="", user="", password="",
            connect_timeout=config.connect_timeout, idle_in_transaction_session_timeout=5,
            pool_size=config.pool_size, max_overflow=config.max_overflow,
            lock_timeout=config.lock_timeout, schema=config.schema,
        )  # fmt: skip
        self.config = config
        self.connect_timeout = float(config.connect_timeout)
        self.deadlines = Deadlines()
        self._held: ContextVar[Any] = ContextVar("held_connection", default=None)
        self.pool = ServicePool(
            config.conninfo,
            connection_class=psycopg.Connection,
            # psycopg prepares nothing: it would send `DEALLOCATE ALL` after each rollback,
            # removing the statements the saves keep prepared (ADR 029).
            kwargs={"row_factory": dict_row, "prepare_threshold": None},
            min_size=config.pool_size,
            max_size=config.pool_size + config.max_overflow,
            open=False,
            configure=self.after_connect_func(),
            check=_still_open,
            timeout=config.connect_timeout,
            max_lifetime=60 * 60.0,
            name="session-awareness",
        )

    def _budget(self) -> float | None:
        budget = _BUDGET.get()
        return self.connect_timeout if budget is False else budget  # type: ignore[return-value]

    @contextlib.contextmanager
    def holding(self, conn: Any) -> Iterator[None]:
        """While this thread holds `conn` (creating the schema under its lock), every checkout
        of this thread is handed `conn` itself rather than a second pooled connection."""
        token = self._held.set(conn)
        try:
            yield
        finally:
            self._held.reset(token)

    @contextlib.contextmanager
    def get_connection(self) -> Iterator[Any]:
        """A pooled connection, its calls bounded by the deadline in force. In the
        maintenance's interruption scope (`application/interruption.py`), the close may
        cancel its statement (`cancel_safe`); one it did is closed, never pooled again, so a
        cancel that arrives late can only reach the maintenance's own transaction."""
        held = self._held.get()
        if held is not None:
            yield held
            return
        interruption = CURRENT.get()
        if interruption is not None:
            interruption.check()
        budget, fired = self._budget(), False
        try:
            with super().get_connection() as conn:
                token = None if budget is None else self.deadlines.arm(conn, budget)
                cancelled: Held | None = None
                try:
                    if interruption is None:
                        yield conn
                    else:
                        with interruption.holding(partial(_cancel, conn)) as cancelled:
                            yield conn
                finally:
                    fired = token is not None and self.deadlines.disarm(token)
                    if cancelled is not None and cancelled.ended:
                        conn.close()  # the pool discards a closed connection
        except (OperationalError, InterfaceError) as error:
            if fired:
                raise OperationalError(f"no answer from the server within {budget:g} s") from error
            if isinstance(error.__cause__, PoolTimeout):
                cause = self.pool.last_error or "no connection was free"
                raise OperationalError(f"{error} ({cause})") from error
            raise

    def probe(self) -> None:
        """Connect once, now, so that a wrong password, a missing database or a closed port
        is reported as the server (or libpq) says it, not as a pool timeout: a server that
        cannot be reached or is restarting as `StoreUnavailableError` (worth trying again),
        any other refusal as `ConfigurationError`."""
        try:
            with psycopg.connect(self.config.conninfo) as conn:  # bounded by connect_timeout
                conn.execute("SELECT 1")
        except psycopg.Error as error:
            why = f"cannot connect to {self.config.describe()}: "
            why += connection_failure(error, self.config)
            if unreachable(error):
                raise StoreUnavailableError(why) from None
            raise ConfigurationError(why) from None

    def close(self) -> None:
        self.deadlines.close()
        super().close()


#: SQLSTATE classes and codes of a server that cannot take connections now: connection
#: exceptions, too many connections, shutting down, crashed, starting up.
_UNREACHABLE_STATES = ("08", "53300", "57P01", "57P02", "57P03")
#: What libpq says (it gives no SQLSTATE for most connection failures) when the server cannot
#: be reached or is not accepting connections yet: worth trying again, unlike a refusal.
_UNREACHABLE_WORDS = (
    "connection refused",
    "failed to resolve host",
    "could not translate host name",
    "name or service not known",
    "temporary failure in name resolution",
    "no route to host",
    "network is unreachable",
    "timeout expired",
    "timed out",
    "connection reset",
    "server closed the connection unexpectedly",
    "no such file or directory",  # a unix socket that is not there: no server
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
    "the database system is not accepting connections",
    "too many clients",
)


def unreachable(error: psycopg.Error) -> bool:
    """Whether a failed connection says the server cannot be reached or cannot take
    connections now (a refused connection, an unknown host, a restart), as opposed to
    refusing this one (a password, a database or a role it does not know)."""
    state = error.sqlstate or ""
    if state and state.startswith(_UNREACHABLE_STATES):
        return True
    text = str(error).lower()
    return any(words in text for words in _UNREACHABLE_WORDS)


class ServicePostgresFactory(PostgresFactory):
    """The library's PostgreSQL factory on `POSTGRES_URL`, read by libpq's rules."""

    aggregate_recorder_class = ServiceAggregateRecorder

    def __init__(self, env: Any) -> None:
        super(BasePostgresFactory, self).__init__(env)  # the library's env keys are not used
        url = self.env.get("POSTGRES_URL")
        if not url:
            raise ConfigurationError("no PostgreSQL URL given")
        config = parse_postgres_url(url)
        datastore = ServiceDatastore(config)
        try:
            datastore.probe()
        except BaseException:
            datastore.close()
            raise
        self.datastore = datastore
