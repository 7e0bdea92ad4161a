"""Which database the service uses, and how its URL is read: the one module every entry point
shares (the facade, the CLI, the hook relay and the installer).

The URL given (an argument, a `--database-url` option) wins; else `$SESSION_AWARENESS_DATABASE_URL`;
else the entry point's default: a SQLite file in the working directory for the library and the
operator CLI, a file in the state directory for the agent CLIs' hooks and servers (which start in
whatever directory the CLI runs). It sits at the package root and imports nothing else of the
package, so a hook's fast path reads it without loading the service (nor `typing`:
what parses a URL is imported by the functions that parse one).

A URL is read here into the eventsourcing environment (`environment_for`), and shown without
its password (`redact`). A URL the service cannot use is a `ConfigurationError`, defined here
(beneath every layer, with its base `SessionAwarenessError`) and given again by
`session_awareness.application` with the other typed errors.
"""

from __future__ import annotations

import os

#: `typing.TYPE_CHECKING` without importing `typing` (a tenth of a relayed hook run); mypy
#: treats the name as true, and sees `typing.overload`. At run time an overload's stub is
#: replaced by the definition that follows it, so the decorator need not do anything.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import overload
else:

    def overload(function: object) -> object:
        return function


class SessionAwarenessError(Exception):
    """Base of every error the service raises on purpose."""


class ConfigurationError(SessionAwarenessError, ValueError):
    """The service cannot be opened as configured: a malformed URL or option, credentials
    or a database the server refuses. A server that cannot be reached at open is a
    `StoreUnavailableError` instead (retryable)."""


#: The environment variable that names the store when no URL is given.
DATABASE_URL_ENV = "SESSION_AWARENESS_DATABASE_URL"
#: The library's and the operator CLI's store when neither a URL nor the variable is given.
DEFAULT_DATABASE_URL = "sqlite:///session-awareness.db"

# Named by topic, not imported: the package root imports no layer (the library resolves them).
SQLITE_FACTORY_TOPIC = "session_awareness.infrastructure.sqlite_store:ServiceSQLiteFactory"
SQLITE_RECORDER_TOPIC = (
    "session_awareness.infrastructure.readmodel.sqlite_recorder:SQLiteReadModelRecorder"
)
POSTGRES_RECORDER_TOPIC = (
    "session_awareness.infrastructure.readmodel.pg_round_trips:PostgresRoundTripsRecorder"
)
POSTGRES_FACTORY_TOPIC = "session_awareness.infrastructure.pg_store:ServicePostgresFactory"


@overload
def url_in_force(given: str | None, *, default: str = DEFAULT_DATABASE_URL) -> str: ...
@overload  # ruff takes the overloads for redefinitions (F811): `overload` is typing's
def url_in_force(given: str | None, *, default: None) -> str | None: ...  # noqa: F811
def url_in_force(  # noqa: F811
    given: str | None, *, default: str | None = DEFAULT_DATABASE_URL
) -> str | None:
    """The URL in force: `given`, else `$SESSION_AWARENESS_DATABASE_URL`, else `default`
    (None: the caller leaves the choice to whoever it hands the URL to)."""
    return given or os.environ.get(DATABASE_URL_ENV) or default


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
    import uuid  # noqa: PLC0415 -- the hook's relay path never parses a URL

    path, mode = sqlite_file_and_mode(url)
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
        from urllib.parse import quote  # noqa: PLC0415 -- the hook's paths never open read-only

        if not os.path.isfile(path):  # noqa: PTH113 -- a path from a URL, checked as given
            raise ConfigurationError(f"no database at {path} (mode={mode} never creates one)")
        env["SQLITE_DBNAME"] = f"file:{quote(os.path.abspath(path))}?mode={mode}"  # noqa: PTH100
        if mode == "ro":
            env["CREATE_TABLE"] = "n"  # a read-only file is used as it is
    return env


def sqlite_file_and_mode(url: str) -> tuple[str, str]:
    """The file a `sqlite:///` URL names (`:memory:` for an in-memory database) and the mode
    it is opened in (`SQLITE_MODES`); `ConfigurationError` for one the service cannot use."""
    path = plain_sqlite_path(url)
    return (path, "rwc") if path is not None else parsed_sqlite_url(url)


def sqlite_file(url: str) -> str | None:
    """The file a SQLite URL names, as written; None for another database or an in-memory
    one. `ConfigurationError` for a URL the service cannot use."""
    environment_for(url)
    if not url.startswith("sqlite://"):
        return None
    path = sqlite_file_and_mode(url)[0]
    return None if path == ":memory:" else path


def read_only(url: str) -> bool:
    """Whether the URL opens its store read-only (`sqlite:///…?mode=ro`)."""
    return url.startswith("sqlite://") and sqlite_file_and_mode(url)[1] == "ro"


def check_recordable(url: str) -> None:
    """`ConfigurationError` for a URL the agent CLIs' hooks and MCP servers can never record
    into: one the service cannot use, an in-memory SQLite database (each of those processes
    would record into a new, empty one of its own, gone when it ends) or a read-only one.
    `install` and `mcp` refuse such a URL, and a hook run given one says so (R-L9)."""
    environment_for(url)
    if not url.startswith("sqlite://"):
        return
    path, mode = sqlite_file_and_mode(url)
    if path == ":memory:":
        raise ConfigurationError(
            "an in-memory database lasts one process, and each hook run and MCP server is a "
            "process of its own: give a file (sqlite:///path.db) or postgresql://…"
        )
    if mode == "ro":
        raise ConfigurationError(
            "the hooks and the MCP server record signals: the store cannot be read-only"
        )


def plain_sqlite_path(url: str) -> str | None:
    """The file of `sqlite:///PATH` when PATH holds nothing a URL parser reads (no `%`,
    `?` or `#`, and no tab or line break, which it drops): PATH as written, which is what
    `parsed_sqlite_url` finds there, in the default mode. None for any other URL. The
    usual URL, the one `install` writes for the hooks, is read so without importing
    `urllib.parse` (with `ipaddress`, about 2 ms of every in-process hook run, issue 39)."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        return None
    path = url[len(prefix) :]
    return None if any(c in "%?#\t\r\n" for c in path) else path


def parsed_sqlite_url(url: str) -> tuple[str, str]:
    """The file and the mode of a SQLite URL, read by `urllib.parse`; `ConfigurationError`
    when it names no file, has a host, or an option or mode the service does not know."""
    from urllib.parse import parse_qsl, unquote, urlsplit  # noqa: PLC0415 -- see plain_sqlite_path

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
    return path, mode


def store_identity(url: str) -> str | None:
    """What names a store on this host, for its spool (R-L10), without any secret: a SQLite
    file's real path; a PostgreSQL server's user, host, port, database and `schema`, as the
    URL writes them (the password and the options that do not change the store aside). None
    for an in-memory SQLite store."""
    from urllib.parse import parse_qsl  # noqa: PLC0415 -- the hook's relay path never parses a URL

    if url.startswith("sqlite://"):
        path = sqlite_file(url)
        return None if path is None else "sqlite:" + os.path.realpath(path)  # None: in memory
    environment_for(url)
    start = url.find("://") + 3
    at = credentials_end(url)
    user = "" if at is None else url[start:at].partition(":")[0]
    place, _, query = url[(start if at is None else at + 1) :].partition("?")
    where = dict(parse_qsl(query))
    named = "&".join(f"{key}={where[key]}" for key in _STORE_OPTIONS if key in where)
    return f"postgresql://{user}@{place}?schema={where.get('schema', '')}" + (
        f"&{named}" if named else ""
    )


#: The libpq options of a URL that say which server, database or user it reaches (the schema
#: aside); the others (timeouts, pool sizes, the password) leave the store the same.
_STORE_OPTIONS = ("host", "hostaddr", "port", "dbname", "user", "service")


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
    import re  # noqa: PLC0415 -- the hook's relay path never parses a URL

    at = credentials_end(url)
    if at is not None and secret_of(url) is not None:
        start = url.find("://") + 3
        user = url[start : url.find(":", start)]
        url = f"{url[:start]}{user}:***@{url[at + 1 :]}"
    return re.sub(r"(?i)(password=)[^&#\s]*", r"\1***", url)


__all__ = [
    "DATABASE_URL_ENV",
    "DEFAULT_DATABASE_URL",
    "ConfigurationError",
    "SessionAwarenessError",
    "check_recordable",
    "credentials_end",
    "environment_for",
    "read_only",
    "redact",
    "secret_of",
    "sqlite_environment",
    "sqlite_file",
    "store_identity",
    "url_in_force",
]
