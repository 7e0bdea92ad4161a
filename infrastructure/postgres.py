"""The production store: the library's PostgreSQL recorder plus the inline read models.

The read-model rows are written after the library has locked the events table and inserted
the events, in the same transaction (DESIGN D4), so they are written in commit order. When a
notice opens, the transaction also publishes a wake (`pg_notify`, payload: the watcher key)
that every process's `WakeListener` receives after commit (SPEC R-N7).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import InterfaceError, OperationalError, StoredEvent
from eventsourcing.postgres import (
    BasePostgresFactory,
    PostgresAggregateRecorder,
    PostgresApplicationRecorder,
    PostgresDatastore,
    PostgresFactory,
)
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row, tuple_row
from psycopg.sql import SQL, Identifier
from psycopg_pool import ConnectionPool, PoolTimeout
from psycopg_pool.base import AttemptWithBackoff

from session_awareness.application import projection as p
from session_awareness.application.errors import ConfigurationError
from session_awareness.infrastructure.pg_config import (
    PostgresConfig,
    connection_failure,
    parse_postgres_url,
    wake_channel_for,
)
from session_awareness.infrastructure.pg_listener import WakeListener
from session_awareness.infrastructure.readmodel import BULK_INLINE, Dialect, ReadModelStore, Write
from session_awareness.logs import get_logger

log = get_logger()

#: How long a backend pid that published a wake counts as ours (its notifications are skipped).
OWN_BACKEND_MEMORY = 60.0
_SCHEMA_LOCK = 0x5E5510A5  # advisory lock serialising concurrent first-use schema creation
#: The pool's reconnection attempts after a lost connection: soon, and never far apart, so
#: recording resumes within a second of the server answering again.
FIRST_RECONNECT_DELAY, MAX_RECONNECT_DELAY = 0.05, 0.5
#: How often the deadline watch looks at the calls in flight.
DEADLINE_TICK = 0.05
#: A large save may take longer than one round trip: this much more time per stored event.
SECONDS_PER_EVENT = 0.001
#: Opening waits for the schema lock (another process creating the tables) this many times
#: the connect timeout.
OPEN_BUDGET_FACTOR = 10


class PostgresReadModelRecorder(ReadModelStore, PostgresApplicationRecorder):
    """Stores events and applies the projection's row changes in the same transaction."""

    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name=events_table_name)
        schema = self.datastore.schema
        quoted = '"' + schema.replace('"', '""') + '".'
        self.dialect = Dialect(
            schema_prefix=quoted, placeholder="%s", greatest="GREATEST", strpos="strpos",
            id_type="uuid", int_type="bigint", text_type="text", stacked_state=True, arrays=True,
        )  # fmt: skip
        self.wake_channel = wake_channel_for(schema)
        self.sql_create_statements.extend(SQL(ddl) for ddl in self.read_model_ddl())  # type: ignore[arg-type]
        self._own_backends: dict[int, float] = {}
        self._events_table = Identifier(schema, self.events_table_name)

    def param_id(self, value: UUID) -> Any:
        return value

    def fetch_tuples(self, template: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        # The pool's connections are in autocommit mode: one statement, one round trip,
        # prepared on each connection at its first use.
        with self.datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row) as c:
            c.execute(self.sql(template), params, prepare=True)
            return c.fetchall()

    def create_table(self) -> None:
        """Create the schema and tables on first use; concurrent first uses take turns."""
        budget = OPEN_BUDGET_FACTOR * getattr(self.datastore, "connect_timeout", 3)
        with bounded(budget), self.datastore.get_connection() as conn:
            # The lock first: two processes creating one schema at once would otherwise
            # race on `CREATE SCHEMA IF NOT EXISTS` itself (a unique violation).
            conn.execute("SELECT pg_advisory_lock(%s)", (_SCHEMA_LOCK,))
            try:
                conn.execute(
                    SQL("CREATE SCHEMA IF NOT EXISTS {}").format(Identifier(self.datastore.schema))
                )
                super().create_table()
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (_SCHEMA_LOCK,))

    # The library retries connection errors ten times; we fail fast and let the service's
    # bounded retry and its signal backlog decide (SPEC R-L8).
    select_events = PostgresAggregateRecorder.select_events.__wrapped__  # type: ignore[attr-defined]
    select_notifications = PostgresApplicationRecorder.select_notifications.__wrapped__  # type: ignore[attr-defined]
    max_notification_id = PostgresApplicationRecorder.max_notification_id.__wrapped__  # type: ignore[attr-defined]

    def originators_after(self, position: int, limit: int) -> list[tuple[int, UUID, int]]:
        """The notification log after `position`, without the events' state (the aggregate
        cache's look); one prepared statement on an autocommit connection."""
        return self.fetch_tuples(
            "SELECT notification_id, originator_id, originator_version FROM {s}"  # noqa: S608 -- the library's table name
            + self.events_table_name
            + " WHERE notification_id > ? ORDER BY notification_id LIMIT ?",
            (position, limit),
        )

    def insert_events(
        self,
        stored_events: Sequence[StoredEvent],
        *,
        projected_events: Sequence[Any] = (),
        quiet_notices: Collection[UUID] = (),
        **kwargs: Any,
    ) -> Sequence[int] | None:
        """Lock the events table, insert the events, apply the projection's rows and commit,
        in two round trips: `BEGIN; LOCK; INSERT … RETURNING` and then `rows…; COMMIT`, each
        one simple-protocol query with client-side bound values (psycopg's `mogrify`).

        The library's own insert takes ~11 statements in a pipeline (plus a `NOTIFY` on its
        events channel for subscriptions, which nothing here uses: readers and audits page
        the log by notification id, DESIGN D4) and cost ~750 us of CPU per record. The table
        lock stays: it keeps notification ids in commit order, which audits and the aggregate
        cache rely on. Any failure rolls the whole transaction back."""
        if kwargs.get("tracking") is not None:  # the library's process applications
            raise NotImplementedError("this recorder does not record tracking positions")
        if not stored_events:
            return []
        if len(stored_events) >= BULK_INLINE:
            with bounded(self._budget_for(len(stored_events))):
                return self._insert_many(stored_events, projected_events, quiet_notices)
        with self.datastore.get_connection() as conn:
            bind = psycopg.ClientCursor(conn).mogrify
            try:
                with conn.cursor(row_factory=tuple_row) as curs:
                    curs.execute(self._begin_insert(bind, stored_events))
                    while curs.nextset():
                        pass  # to the INSERT's result, the last one
                    ids = [row[0] for row in curs.fetchall()]
                    if len(ids) != len(stored_events):
                        raise RuntimeError("the event store returned no notification ids")
                    rows = _Statements(conn, bind)
                    if projected_events:
                        self.apply_inline(
                            rows,
                            p.project(list(zip(ids, projected_events, strict=True))),
                            quiet_notices,
                        )
                    rows.sql.append("COMMIT")
                    curs.execute("; ".join(rows.sql))
            except BaseException:
                _roll_back(conn)
                raise
        return ids

    def _budget_for(self, events: int) -> float | None:
        """The deadline of a save of this many events: a round trip's, and a little more
        per event."""
        base = getattr(self.datastore, "connect_timeout", None)
        return None if base is None else base + SECONDS_PER_EVENT * events

    def long_running(self) -> contextlib.AbstractContextManager[None]:
        """Statements that may run for long (an audit, a rebuild) run without a deadline."""
        return bounded(None)  # type: ignore[return-value]

    def _insert_many(
        self,
        stored_events: Sequence[StoredEvent],
        projected_events: Sequence[Any],
        quiet_notices: Collection[UUID] = (),
    ) -> Sequence[int]:
        """A large save (a drain, a wide fan-out): the same transaction in two pipelined round
        trips of a few statements whose values go as arrays, bound server-side in binary
        (client-side binding costs ~20 us per row of a drain)."""
        table = self._events_table.as_string(None)
        timeout = int(self.datastore.lock_timeout)
        columns = list(zip(*((e.originator_id, e.originator_version, e.topic, e.state)
                             for e in stored_events), strict=True))  # fmt: skip
        with self.datastore.get_connection() as conn:
            try:
                with conn.pipeline() as pipeline, conn.cursor(row_factory=tuple_row) as curs:
                    curs.execute("BEGIN")
                    curs.execute(f"SET LOCAL lock_timeout = '{timeout}s'")
                    curs.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
                    curs.execute(
                        f"INSERT INTO {table} (originator_id, originator_version, topic, state) "  # noqa: S608 -- a quoted identifier
                        "SELECT * FROM unnest(%s::uuid[], %s::bigint[], %s::text[], %s::bytea[]) "
                        "RETURNING notification_id",
                        [list(column) for column in columns],
                    )
                    pipeline.sync()
                    ids = [row[0] for row in curs.fetchall()]
                    if len(ids) != len(stored_events):
                        raise RuntimeError("the event store returned no notification ids")
                    if projected_events:
                        changes = p.project(list(zip(ids, projected_events, strict=True)))
                        self.apply_inline(_Pipelined(curs), changes, quiet_notices)
                    curs.execute("COMMIT")
                    pipeline.sync()
            except BaseException:
                _roll_back(conn)
                raise
        return ids

    def _begin_insert(self, bind: Callable[..., str], stored_events: Sequence[StoredEvent]) -> str:
        table = self._events_table.as_string(None)
        values = ", ".join(
            bind("(%s, %s, %s, %s)", (e.originator_id, e.originator_version, e.topic, e.state))
            for e in stored_events
        )
        timeout = int(self.datastore.lock_timeout)
        begin = (
            f"BEGIN; SET LOCAL lock_timeout = '{timeout}s'; LOCK TABLE {table} IN EXCLUSIVE MODE"
        )
        insert = f"INSERT INTO {table} (originator_id, originator_version, topic, state) VALUES "  # noqa: S608 -- a quoted identifier
        return f"{begin}; {insert}{values} RETURNING notification_id"

    def write_batches(self, c: Any, batches: dict[Write, list[tuple[Any, ...]]]) -> None:
        """In a large save's pipeline, a write for many keys with an array form is one
        statement (a drain's cursors: one UPDATE instead of 1,000 for the server to plan);
        elsewhere, one statement per row."""
        if not isinstance(c, _Pipelined):
            super().write_batches(c, batches)
            return
        for write, rows in batches.items():
            if write.unnest is None or len(rows) < 2:
                c.executemany(self.sql(write.template), rows)
            else:
                c.execute(self.sql(write.unnest), [list(col) for col in zip(*rows, strict=True)])

    def notice_opened(self, c: Any, watch_id: UUID) -> None:
        """Publish a wake for the cursor's watcher; delivered to every listener on commit."""
        c.execute(
            self.sql(
                "SELECT pg_notify(?, watcher_key) FROM {s}session_watch_cursors WHERE watch_id = ?"
            ),
            (self.wake_channel, watch_id),
        )
        self._own_backends[c.connection.info.backend_pid] = time.monotonic()

    def published_here(self, backend_pid: int) -> bool:
        """Whether a wake came from this process (already delivered after its commit)."""
        seen = self._own_backends.get(backend_pid)
        return seen is not None and time.monotonic() - seen < OWN_BACKEND_MEMORY

    def wake_listener(
        self, on_wake: Callable[[str], None], on_reconnect: Callable[[], None]
    ) -> WakeListener:
        """A listener on this store's wake channel, on its own connection (not started)."""
        return WakeListener(
            conninfo=self.datastore.pool.conninfo,
            channel=self.wake_channel,
            on_wake=on_wake,
            on_reconnect=on_reconnect,
            skip=self.published_here,
        )


class _Pipelined:
    """The cursor of a large save's pipeline, marked so that `write_batches` sends each
    statement's rows as arrays; it stands in for the cursor the projection writes through."""

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self.cursor = cursor
        self.connection = cursor.connection

    def execute(self, query: str, params: Sequence[Any] = ()) -> None:
        self.cursor.execute(query, params)

    def executemany(self, query: str, params_seq: Iterable[Sequence[Any]]) -> None:
        self.cursor.executemany(query, params_seq)


class _Statements:
    """Collects the projection's statements, bound client-side, to send in one query; it
    stands in for the cursor `apply_changes` and `notice_opened` write through."""

    def __init__(self, connection: psycopg.Connection[Any], bind: Callable[..., str]) -> None:
        self.connection = connection
        self._bind = bind
        self.sql: list[str] = []

    def execute(self, query: str, params: Sequence[Any] = ()) -> None:
        self.sql.append(self._bind(query, params))

    def executemany(self, query: str, params_seq: Iterable[Sequence[Any]]) -> None:
        for params in params_seq:
            self.execute(query, params)


def _roll_back(conn: psycopg.Connection[Any]) -> None:
    """End a failed write transaction; a dead connection is left to the pool to discard."""
    if conn.closed or conn.info.transaction_status == TransactionStatus.IDLE:
        return
    with contextlib.suppress(psycopg.Error):  # broken: the pool will not hand it out again
        conn.execute("ROLLBACK")


# -- the store's connections: libpq configuration, deadlines, a pool that recovers at once --


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
        self.pool = ServicePool(
            config.conninfo,
            connection_class=psycopg.Connection,
            kwargs={"row_factory": dict_row},
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
    def get_connection(self) -> Iterator[Any]:
        budget, fired = self._budget(), False
        try:
            with super().get_connection() as conn:
                token = None if budget is None else self.deadlines.arm(conn, budget)
                try:
                    yield conn
                finally:
                    fired = token is not None and self.deadlines.disarm(token)
        except (OperationalError, InterfaceError) as error:
            if fired:
                raise OperationalError(f"no answer from the server within {budget:g} s") from error
            if isinstance(error.__cause__, PoolTimeout):
                cause = self.pool.last_error or "no connection was free"
                raise OperationalError(f"{error} ({cause})") from error
            raise

    def probe(self) -> None:
        """Connect once, now, so that a wrong password, a missing database or a closed port
        is reported as the server (or libpq) says it, not as a pool timeout."""
        try:
            with psycopg.connect(self.config.conninfo) as conn:  # bounded by connect_timeout
                conn.execute("SELECT 1")
        except psycopg.Error as error:
            raise ConfigurationError(
                f"cannot connect to {self.config.describe()}: "
                f"{connection_failure(error, self.config)}"
            ) from None

    def close(self) -> None:
        self.deadlines.close()
        super().close()


class ServicePostgresFactory(PostgresFactory):
    """The library's PostgreSQL factory on `POSTGRES_URL`, read by libpq's rules."""

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
