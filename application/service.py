"""The embedding API: `SessionAwareness`, an eventsourcing `Application`, and `open_service`."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from session_awareness.application.audit import Audit
from session_awareness.application.core import Retention, log
from session_awareness.application.errors import ConfigurationError, StoreUnavailableError
from session_awareness.application.marks import Marks
from session_awareness.application.ports import (
    Canceller,
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
from session_awareness.application.wakes import DEFAULT_WAKE_COALESCE_SECONDS, WakeCoalescer
from session_awareness.application.watching import Watching
from session_awareness.domain.ambient import DEFAULT_MAIN_KEY, check_main_key
from session_awareness.domain.keys import InvalidKeyError

if TYPE_CHECKING:
    from session_awareness.application.tools import SessionTools

DATABASE_URL_ENV = "SESSION_AWARENESS_DATABASE_URL"
DEFAULT_DATABASE_URL = "sqlite:///session-awareness.db"
_PREFIX = "SESSIONAWARENESS_"
# Named by topic, not imported: the application layer never imports infrastructure.
SQLITE_FACTORY_TOPIC = "session_awareness.infrastructure.sqlite:ServiceSQLiteFactory"
SQLITE_RECORDER_TOPIC = "session_awareness.infrastructure.readmodel.sqlite:SQLiteReadModelRecorder"
POSTGRES_RECORDER_TOPIC = (
    "session_awareness.infrastructure.readmodel.pg_round_trips:PostgresRoundTripsRecorder"
)
POSTGRES_FACTORY_TOPIC = "session_awareness.infrastructure.postgres:ServicePostgresFactory"


VISIBILITIES = ("self", "tree", "agent", "all")
#: The modules of the `postgres` extra, which only the PostgreSQL backend imports.
_POSTGRES_EXTRA = frozenset({"psycopg", "psycopg_pool"})
_POSTGRES_EXTRA_HINT = " (install the postgres extra: pip install 'session-awareness[postgres]')"


class SessionAwareness(Producers, Upstream, Watching, Marks, Queries, Transcripts, Audit):
    """Signal log, watches, notices and reconciliation for a host's sessions (DESIGN D3)."""

    #: What a tool caller may see (R-T2): self, tree (default), agent or all.
    visibility: str = "tree"
    #: The host's `sessions_send` delivery: (sender, target, message) -> receiving key.
    dispatcher: Dispatcher | None = None
    #: The host's `sessions_spawn`: (caller, request) -> (childSessionKey, runId).
    spawner: Spawner | None = None
    #: The host's `subagents` cancel: (caller, child, runId) -> None.
    canceller: Canceller | None = None

    @cached_property
    def tools(self) -> SessionTools:
        """The agent-facing session tools over this service (SPEC §9)."""
        from session_awareness.application.tools import SessionTools  # noqa: PLC0415 -- built on first use

        return SessionTools(self)

    _listener: WakeListener | None = None

    def start(self, *, listener_timeout: float = 5.0) -> None:
        """Startup duties: prune (R-R1), re-deliver wakes for pending notices (R-N6), and on
        a store that publishes wakes, listen for other processes' notices (R-N7). Read
        models an earlier version wrote are rebuilt first (`migrate_read_models`)."""
        self.migrate_read_models()
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
    canceller: Canceller | None = None,
    signal_backlog: int = 1000,
    upstream_providers: Mapping[str, UpstreamProvider] | None = None,
    is_run_active: RunActivity | None = None,
    own_user_texts: OwnUserTexts | None = None,
    upstream_scheduler: Scheduler | None = None,
    upstream_timeout: float = 45.0,
    wake_coalesce_seconds: float = DEFAULT_WAKE_COALESCE_SECONDS,
    transcripts: Sequence[TranscriptSource] | None = None,
    main_key: str = DEFAULT_MAIN_KEY,
    ambient_groups: bool = True,
) -> SessionAwareness:
    """Open the service on a database URL (default: `$SESSION_AWARENESS_DATABASE_URL`, else
    `sqlite:///session-awareness.db`), run the startup prune and sweep, and return it.
    `dispatcher`, `spawner` and `canceller` are the host's delivery for `sessions_send`, its
    child start for `sessions_spawn` and its run cancel for `subagents` (the tools answer
    `not_configured` without them).
    Upstream monitoring (SPEC §8) is set up with providers by catalog id and the host's
    ports; the host starts it with `start_upstream_monitor()`. Wakes coalesce per watcher:
    at most one per `wake_coalesce_seconds` of the service clock (0: every wake, R-N5).
    `transcripts` are the sources `sessions_history` reads, in order (default: local Claude
    Code transcripts; `[]`: none). With `ambient_groups`, a human turn on an agent's `group`
    session first gives its main session `agent:<agentId>:<main_key>` an ambient cursor on
    it, whose notices queue up and never wake (R-W7)."""
    _check_arguments(
        database_url=database_url,
        visibility=visibility,
        retention={"retention_days": retention_days, "retention_rows": retention_rows},
        ports={"clock": clock, "waker": waker, "dispatcher": dispatcher, "spawner": spawner,
               "canceller": canceller},
        signal_backlog=signal_backlog,
        wake_coalesce_seconds=wake_coalesce_seconds,
        ambient={"main_key": main_key, "ambient_groups": ambient_groups},
    )  # fmt: skip
    sources = _transcript_sources(transcripts) if transcripts is not None else None
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
    except ConfigurationError as error:
        raise ConfigurationError(f"cannot open {redact(url)}: {error}") from None
    except Exception as error:
        hint = _POSTGRES_EXTRA_HINT if _lacks_postgres(error) else ""
        raise ConfigurationError(f"cannot open {redact(url)}: {error}{hint}") from error
    service.visibility, service.dispatcher, service.spawner = visibility, dispatcher, spawner
    service.canceller = canceller
    service.wakes = WakeCoalescer(wake_coalesce_seconds)
    service.main_key, service.ambient_groups = main_key, ambient_groups  # R-W7
    if sources is not None:
        service.transcript_sources = sources
    try:
        service.configure_upstream(
            providers=upstream_providers,
            is_run_active=is_run_active,
            own_user_texts=own_user_texts,
            scheduler=upstream_scheduler,
            timeout=upstream_timeout,
        )
        service.start()
    except Exception:
        service.close()
        raise
    return service


def _check_arguments(
    *,
    database_url: object,
    visibility: object,
    retention: dict[str, object],
    ports: dict[str, object],
    signal_backlog: object,
    wake_coalesce_seconds: object,
    ambient: dict[str, object],
) -> None:
    """`ConfigurationError` for an argument of `open_service` the service cannot use."""
    if not isinstance(ambient["ambient_groups"], bool):
        raise ConfigurationError(
            f"ambient_groups must be a boolean, got {ambient['ambient_groups']!r}"
        )
    try:
        check_main_key(ambient["main_key"])
    except InvalidKeyError as error:
        raise ConfigurationError(str(error)) from None
    if visibility not in VISIBILITIES:
        raise ConfigurationError(f"visibility must be one of {', '.join(VISIBILITIES)}")
    for name, value in retention.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
    for name, port in ports.items():
        if port is not None and not callable(port):
            raise ConfigurationError(f"{name} must be callable, got {type(port).__name__}")
    if (
        isinstance(signal_backlog, bool)
        or not isinstance(signal_backlog, int)
        or signal_backlog < 0
    ):
        raise ConfigurationError(
            f"signal_backlog must be a non-negative integer, got {signal_backlog!r}"
        )
    if database_url is not None and not isinstance(database_url, str):
        raise ConfigurationError(
            f"database_url must be a string, got {type(database_url).__name__}"
        )
    if (
        isinstance(wake_coalesce_seconds, bool)
        or not isinstance(wake_coalesce_seconds, int | float)
        or not 0 <= wake_coalesce_seconds < float("inf")
    ):
        raise ConfigurationError(
            f"wake_coalesce_seconds must be a non-negative number, got {wake_coalesce_seconds!r}"
        )


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
    """The eventsourcing environment for a database URL; `ConfigurationError` for a URL the
    service cannot use."""
    if not isinstance(url, str) or not url:
        raise ConfigurationError("the database URL must be a non-empty string")
    scheme, sep, _ = url.partition("://")
    if sep and scheme == "sqlite":
        return sqlite_environment(url)
    if sep and scheme in ("postgresql", "postgres"):
        # Read with libpq's own parser, in the store's factory (infrastructure/pg_config.py).
        return {
            "PERSISTENCE_MODULE": POSTGRES_FACTORY_TOPIC,
            "APPLICATION_RECORDER_TOPIC": POSTGRES_RECORDER_TOPIC,
            "POSTGRES_URL": url,
        }
    raise ConfigurationError(
        f"unsupported database URL {redact(url)!r}: expected sqlite:///… or postgresql://…"
    )


#: `sqlite:///path?mode=…`: how the file is opened (SQLite's own URI modes).
SQLITE_MODES = ("ro", "rw", "rwc")


def sqlite_environment(url: str) -> dict[str, str]:
    """`sqlite:///relative.db`, `sqlite:////abs.db`, `sqlite:///:memory:`; `?mode=ro` opens
    the file read-only (it must exist), `rw` read-write (it must exist), `rwc` (the default)
    creates it when missing."""
    try:
        parts = urlsplit(url)
    except ValueError as error:
        raise ConfigurationError(f"bad SQLite URL {redact(url)}: {error}") from None
    if parts.netloc:
        raise ConfigurationError(
            "SQLite URLs have no host: use sqlite:///relative.db or sqlite:////abs.db, "
            f"got {redact(url)}"
        )
    path = unquote(parts.path)[1:] if parts.path.startswith("/") else ""
    if not path:
        raise ConfigurationError(f"SQLite URL names no file: {redact(url)}")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    mode = query.pop("mode", "rwc")
    if query:
        raise ConfigurationError(f"unknown SQLite URL options: {', '.join(sorted(query))}")
    if mode not in SQLITE_MODES:
        raise ConfigurationError(f"mode must be one of {', '.join(SQLITE_MODES)}, got {mode!r}")
    env = {
        "PERSISTENCE_MODULE": SQLITE_FACTORY_TOPIC,
        "APPLICATION_RECORDER_TOPIC": SQLITE_RECORDER_TOPIC,
    }
    if path == ":memory:":
        if mode != "rwc":
            raise ConfigurationError("an in-memory SQLite database is always read-write")
        env["SQLITE_DBNAME"] = f"file:session-awareness-{uuid.uuid4().hex}?mode=memory&cache=shared"
    elif mode == "rwc":
        env["SQLITE_DBNAME"] = path
    else:
        if not os.path.isfile(path):  # noqa: PTH113 -- a path from a URL, checked as given
            raise ConfigurationError(f"no database at {path} (mode={mode} never creates one)")
        env["SQLITE_DBNAME"] = f"file:{quote(os.path.abspath(path))}?mode={mode}"  # noqa: PTH100
        if mode == "ro":
            env["CREATE_TABLE"] = "n"  # a read-only file is used as it is
    return env


def credentials_end(url: str) -> int | None:
    """Where the `@` that ends a URL's credentials is, found without parsing the URL (whose
    password may hold unencoded reserved characters): the last `@` before the query, or,
    when no `@` comes before the first `?` (a `?` in the password), the last `@` of all.
    Generous on purpose: whatever could be a password is treated as one."""
    start = url.find("://")
    if start < 0:
        return None
    query = url.find("?", start)
    at = url.rfind("@", start, query) if query >= 0 else -1
    if at < 0:
        at = url.rfind("@", start)
    return at if at >= 0 else None


def secret_of(url: str) -> str | None:
    """The password of a URL as written (still percent-encoded): between the user's `:` and
    the `@` that ends the credentials."""
    at = credentials_end(url)
    if at is None:
        return None
    user_info = url[url.find("://") + 3 : at]
    colon = user_info.find(":")
    return user_info[colon + 1 :] if colon >= 0 else None


def redact(url: str) -> str:
    """The URL without its password, for messages and logs: the credentials' password (however
    it is written) and any `password=` query value become `***`."""
    if secret_of(url) is not None:
        at = cast(int, credentials_end(url))
        start = url.find("://") + 3
        user = url[start : url.find(":", start)]
        url = f"{url[:start]}{user}:***@{url[at + 1 :]}"
    return re.sub(r"(?i)(password=)[^&#\s]*", r"\1***", url)
