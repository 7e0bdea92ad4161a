"""The embedding API: `SessionAwareness`, an eventsourcing `Application`, and `open_service`."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qsl, unquote, urlsplit

from session_awareness.application.audit import Audit
from session_awareness.application.core import Retention, log
from session_awareness.application.errors import ConfigurationError, StoreUnavailableError
from session_awareness.application.ports import (
    Clock,
    Dispatcher,
    Spawner,
    WakeFeed,
    WakeListener,
    Waker,
    system_clock,
)
from session_awareness.application.producers import Producers
from session_awareness.application.queries import Queries
from session_awareness.application.transcript_port import TranscriptSource
from session_awareness.application.transcripts import Transcripts
from session_awareness.application.upstream import Upstream
from session_awareness.application.upstream.ports import (
    OwnUserTexts,
    RunActivity,
    Scheduler,
    UpstreamProvider,
)
from session_awareness.application.watching import Watching

if TYPE_CHECKING:
    from session_awareness.application.tools import SessionTools

DATABASE_URL_ENV = "SESSION_AWARENESS_DATABASE_URL"
DEFAULT_DATABASE_URL = "sqlite:///session-awareness.db"
_PREFIX = "SESSIONAWARENESS_"
# Named by topic, not imported: the application layer never imports infrastructure.
SQLITE_RECORDER_TOPIC = "session_awareness.infrastructure.sqlite:SQLiteReadModelRecorder"
POSTGRES_RECORDER_TOPIC = "session_awareness.infrastructure.postgres:PostgresReadModelRecorder"


VISIBILITIES = ("self", "tree", "agent", "all")
#: The modules of the `postgres` extra, which only the PostgreSQL backend imports.
_POSTGRES_EXTRA = frozenset({"psycopg", "psycopg_pool"})
_POSTGRES_EXTRA_HINT = " (install the postgres extra: pip install 'session-awareness[postgres]')"


class SessionAwareness(Producers, Upstream, Watching, Queries, Transcripts, Audit):
    """Signal log, watches, notices and reconciliation for a host's sessions (DESIGN D3)."""

    #: What a tool caller may see (R-T2): self, tree (default), agent or all.
    visibility: str = "tree"
    #: The host's `sessions_send` delivery: (sender, target, message) -> receiving key.
    dispatcher: Dispatcher | None = None
    #: The host's `sessions_spawn`: (caller, request) -> (childSessionKey, runId).
    spawner: Spawner | None = None

    @cached_property
    def tools(self) -> SessionTools:
        """The agent-facing session tools over this service (SPEC §9)."""
        from session_awareness.application.tools import SessionTools  # noqa: PLC0415 -- built on first use

        return SessionTools(self)

    _listener: WakeListener | None = None

    def start(self, *, listener_timeout: float = 5.0) -> None:
        """Startup duties: prune (R-R1), re-deliver wakes for pending notices (R-N6), and on
        a store that publishes wakes, listen for other processes' notices (R-N7)."""
        self._maybe_prune(self.clock())
        self.sweep()
        feed = getattr(self.recorder, "wake_listener", None)
        if feed is not None:
            self._listener = cast(WakeFeed, self.recorder).wake_listener(
                on_wake=self._remote_wake, on_reconnect=self._reconnected
            )
            self._listener.start()
            if not self._listener.wait_connected(listener_timeout):
                log.warning("wake_listener_not_connected", waited=listener_timeout)

    def _remote_wake(self, watcher: str) -> None:
        """Another process opened a notice for `watcher`: wake it here too (R-N7)."""
        self._wake([watcher])

    def _reconnected(self) -> None:
        """The store is back: record what was kept, then re-deliver every pending wake,
        since wakes published meanwhile were lost (R-N6, R-N7)."""
        self.flush_signals()
        self.sweep()

    def health(self) -> dict[str, Any]:
        """What an operator checks: the backend, the signal backlog (R-L8) and the wake feed."""
        try:
            self.read_model.watchers_with_pending()
            store = "ok"
        except StoreUnavailableError as error:
            store = str(error)
        return {
            "backend": "postgresql" if self._listener is not None else "sqlite",
            "store": store,
            "signals": self.backlog.stats(),
            "wakeListener": self._listener.state if self._listener is not None else "off",
        }

    def close(self) -> None:
        self.stop_upstream_monitor()
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
        super().close()


def open_service(
    database_url: str | None = None,
    *,
    clock: Clock | None = None,
    waker: Waker | None = None,
    retention_days: int = 30,
    retention_rows: int = 50_000,
    visibility: str = "tree",
    dispatcher: Dispatcher | None = None,
    spawner: Spawner | None = None,
    signal_backlog: int = 1000,
    upstream_providers: Mapping[str, UpstreamProvider] | None = None,
    is_run_active: RunActivity | None = None,
    own_user_texts: OwnUserTexts | None = None,
    upstream_scheduler: Scheduler | None = None,
    upstream_timeout: float = 45.0,
    transcripts: Sequence[TranscriptSource] | None = None,
) -> SessionAwareness:
    """Open the service on a database URL (default: `$SESSION_AWARENESS_DATABASE_URL`, else
    `sqlite:///session-awareness.db`), run the startup prune and sweep, and return it.
    `dispatcher` and `spawner` are the host's delivery for `sessions_send` and its child
    start for `sessions_spawn` (the tools answer `not_configured` without them).
    Upstream monitoring (SPEC §8) is set up with providers by catalog id and the host's
    ports; the host starts it with `start_upstream_monitor()`. `transcripts` are the sources
    `sessions_history` reads, in order (default: local Claude Code transcripts; `[]`: none)."""
    if visibility not in VISIBILITIES:
        raise ConfigurationError(f"visibility must be one of {', '.join(VISIBILITIES)}")
    for name, value in (("retention_days", retention_days), ("retention_rows", retention_rows)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
    url = database_url or os.environ.get(DATABASE_URL_ENV) or DEFAULT_DATABASE_URL
    # No library cache: the service keeps its own (application/aggregate_cache.py).
    settings = environment_for(url)
    env = {_PREFIX + k: v for k, v in settings.items()}
    try:
        service = SessionAwareness(
            env,
            clock=clock or system_clock,
            waker=waker,
            retention=Retention(retention_days, retention_rows),
            signal_backlog=signal_backlog,
        )
    except Exception as error:
        hint = _POSTGRES_EXTRA_HINT if _lacks_postgres(error) else ""
        raise ConfigurationError(f"cannot open {redact(url)}: {error}{hint}") from error
    service.visibility, service.dispatcher, service.spawner = visibility, dispatcher, spawner
    if transcripts is not None:
        try:
            service.transcript_sources = _transcript_sources(transcripts)
        except Exception:
            service.close()
            raise
    try:
        service.configure_upstream(
            providers=upstream_providers,
            is_run_active=is_run_active,
            own_user_texts=own_user_texts,
            scheduler=upstream_scheduler,
            timeout=upstream_timeout,
        )
    except Exception:
        service.close()
        raise
    try:
        service.start()
    except Exception:
        service.close()
        raise
    return service


def _transcript_sources(given: object) -> tuple[TranscriptSource, ...]:
    if isinstance(given, str | bytes) or not isinstance(given, Sequence):
        raise ConfigurationError("transcripts must be a sequence of transcript sources")
    for source in given:
        if not isinstance(source, TranscriptSource):
            raise ConfigurationError(
                f"transcripts: {type(source).__name__} has no newest_first(session) method"
            )
    return tuple(given)


def _lacks_postgres(error: BaseException | None) -> bool:
    """Whether the error comes from a module of the `postgres` extra not being installed."""
    while error is not None:
        if isinstance(error, ModuleNotFoundError) and error.name in _POSTGRES_EXTRA:
            return True
        error = error.__cause__ or error.__context__
    return False


def environment_for(url: str) -> dict[str, str]:
    """The eventsourcing environment for a database URL."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        if parts.netloc:
            raise ConfigurationError(
                "SQLite URLs have no host: use sqlite:///relative.db or sqlite:////abs.db, "
                f"got {redact(url)}"
            )
        path = unquote(parts.path)[1:] if parts.path.startswith("/") else ""
        if not path:
            raise ConfigurationError(f"SQLite URL names no file: {url}")
        if path == ":memory:":
            path = f"file:session-awareness-{uuid.uuid4().hex}?mode=memory&cache=shared"
        return {
            "PERSISTENCE_MODULE": "eventsourcing.sqlite",
            "SQLITE_DBNAME": path,
            "APPLICATION_RECORDER_TOPIC": SQLITE_RECORDER_TOPIC,
        }
    if parts.scheme in ("postgresql", "postgres"):
        return postgres_environment(url)
    raise ConfigurationError(
        f"unsupported database URL {redact(url)!r}: expected sqlite:///… or postgresql://…"
    )


#: URL query options for PostgreSQL, with their defaults (the library's environment keys).
POSTGRES_OPTIONS = {
    "schema": ("POSTGRES_SCHEMA", "public"),
    "pool_size": ("POSTGRES_POOL_SIZE", "2"),
    "max_overflow": ("POSTGRES_MAX_OVERFLOW", "8"),
    "connect_timeout": ("POSTGRES_CONNECT_TIMEOUT", "3"),
    "lock_timeout": ("POSTGRES_LOCK_TIMEOUT", "0"),
}


def postgres_environment(url: str) -> dict[str, str]:
    """`postgresql://user:password@host:port/db?schema=…&pool_size=…&max_overflow=…
    &connect_timeout=…` (a unix socket: `?host=/path/to/dir`)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = set(query) - set(POSTGRES_OPTIONS) - {"host", "port"}
    if unknown:
        raise ConfigurationError(f"unknown PostgreSQL URL options: {', '.join(sorted(unknown))}")
    host = query.get("host") or parts.hostname
    database = unquote(parts.path.lstrip("/"))
    if not host or not database or parts.username is None:
        raise ConfigurationError(
            f"PostgreSQL URLs need a user, a host and a database: {redact(url)}"
        )
    try:
        port = query.get("port") or str(parts.port or 5432)
    except ValueError as error:
        raise ConfigurationError(f"bad port in {redact(url)}: {error}") from None
    env = {
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "APPLICATION_RECORDER_TOPIC": POSTGRES_RECORDER_TOPIC,
        "POSTGRES_DBNAME": database,
        "POSTGRES_HOST": unquote(host),
        "POSTGRES_PORT": port,
        "POSTGRES_USER": unquote(parts.username),
        "POSTGRES_PASSWORD": unquote(parts.password or ""),
        "POSTGRES_ENABLE_DB_FUNCTIONS": "n",  # keep the table lock (DESIGN D4)
    }
    for option, (key, default) in POSTGRES_OPTIONS.items():
        env[key] = query.get(option) or default
    return env


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return parts._replace(netloc=netloc).geturl()
