"""The embedding API: `SessionAwareness`, an eventsourcing `Application`, and `open_service`."""

from __future__ import annotations

import os
import uuid
from urllib.parse import unquote, urlsplit

from session_awareness.application.core import Retention
from session_awareness.application.errors import ConfigurationError
from session_awareness.application.ports import Clock, Waker, system_clock
from session_awareness.application.producers import Producers
from session_awareness.application.queries import Queries
from session_awareness.application.watching import Watching

DATABASE_URL_ENV = "SESSION_AWARENESS_DATABASE_URL"
DEFAULT_DATABASE_URL = "sqlite:///session-awareness.db"
_PREFIX = "SESSIONAWARENESS_"
# Named by topic, not imported: the application layer never imports infrastructure.
SQLITE_RECORDER_TOPIC = "session_awareness.infrastructure.sqlite:SQLiteReadModelRecorder"


class SessionAwareness(Producers, Watching, Queries):
    """Signal log, watches, notices and reconciliation for a host's sessions (DESIGN D3)."""

    def start(self) -> None:
        """Startup duties: prune (R-R1) and re-deliver wakes for pending notices (R-N6)."""
        self._maybe_prune(self.clock())
        self.sweep()


def open_service(
    database_url: str | None = None,
    *,
    clock: Clock | None = None,
    waker: Waker | None = None,
    retention_days: int = 30,
    retention_rows: int = 50_000,
) -> SessionAwareness:
    """Open the service on a database URL (default: `$SESSION_AWARENESS_DATABASE_URL`, else
    `sqlite:///session-awareness.db`), run the startup prune and sweep, and return it."""
    for name, value in (("retention_days", retention_days), ("retention_rows", retention_rows)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
    url = database_url or os.environ.get(DATABASE_URL_ENV) or DEFAULT_DATABASE_URL
    env = {_PREFIX + k: v for k, v in environment_for(url).items()}
    try:
        service = SessionAwareness(
            env,
            clock=clock or system_clock,
            waker=waker,
            retention=Retention(retention_days, retention_rows),
        )
    except Exception as error:
        raise ConfigurationError(f"cannot open {redact(url)}: {error}") from error
    try:
        service.start()
    except Exception:
        service.close()
        raise
    return service


def environment_for(url: str) -> dict[str, str]:
    """The eventsourcing environment for a database URL."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        if parts.netloc:
            raise ConfigurationError(
                "SQLite URLs have no host: use sqlite:///relative.db or sqlite:////abs.db, "
                f"got {url}"
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
        raise ConfigurationError("PostgreSQL is not supported yet; use a sqlite:/// URL")
    raise ConfigurationError(
        f"unsupported database URL {redact(url)!r}: expected sqlite:///… or postgresql://…"
    )


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return parts._replace(netloc=netloc).geturl()
