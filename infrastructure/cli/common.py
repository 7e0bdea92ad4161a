"""What every CLI command shares: its options, opening the store, and printing.

Tables go to stdout through rich (plain text when stdout is not a terminal), JSON through
`json.dumps`; progress and logs go to stderr. Cells are `Text`, never markup, so a key or a
summary holding `[` prints as it is.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import click
import structlog
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from session_awareness.application import (
    ConfigurationError,
    SessionAwareness,
    StoreUnavailableError,
    open_service,
)
from session_awareness.application.audit import check_store_version
from session_awareness.application.ports import system_clock
from session_awareness.application.retention import Retention
from session_awareness.application.service import SessionStore
from session_awareness.configuration import (
    DATABASE_URL_ENV,
    DEFAULT_DATABASE_URL,
    environment_for,
    read_only,
    redact,
    sqlite_file,
    url_in_force,
)

#: The width tables get when stdout is not a terminal (pipes, files, captured output).
PIPE_WIDTH = 200
#: The table every session-awareness store on SQLite holds: the event store's own.
EVENTS_TABLE = "stored_events"
#: On PostgreSQL, the library's factory names the event table after the application.
POSTGRES_EVENTS_TABLE = SessionStore.name.lower() + "_events"
F = TypeVar("F", bound=Callable[..., Any])


class NoDatabaseError(Exception):
    """A command named a SQLite file that does not exist, or a database (a SQLite file, a
    PostgreSQL schema) that is not a store."""


#: Where the logging options leave their values, in the click context's `meta`.
QUIET_KEY, LOG_FORMAT_KEY = "session_awareness.quiet", "session_awareness.log_format"
LOG_FORMATS = ("console", "json")


def _remember(key: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, _: click.Parameter, value: Any) -> None:
        ctx.meta[key] = value

    return callback


def log_options(command: F) -> F:
    """`-v/--verbose`, `-q/--quiet` and `--log-format`: how much of the service's logs goes to
    stderr, and how. `verbose` reaches the command (a count); the others wait in `ctx.meta`."""
    for option in (
        click.option(
            "--log-format",
            type=click.Choice(LOG_FORMATS),
            default="console",
            show_default=True,
            expose_value=False,
            callback=_remember(LOG_FORMAT_KEY),
            help="Logs as aligned text or as JSON lines, with ISO UTC timestamps.",
        ),
        click.option(
            "-q",
            "--quiet",
            count=True,
            expose_value=False,
            callback=_remember(QUIET_KEY),
            help="Fewer logs: -q errors only, -qq critical only.",
        ),
        click.option(
            "-v",
            "--verbose",
            count=True,
            help="More logs (warnings and errors by default): -v info, -vv debug.",
        ),
    ):
        command = option(command)
    return command


def not_empty(why: str) -> Callable[[click.Context, click.Parameter, str | None], str | None]:
    """An option's callback that refuses an empty value (a script's `--option "$VAR"` with
    `VAR` unset) with `why`: read as absent or as given, it would silently mean something
    the caller did not (R-L9)."""

    def given(_: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise click.BadParameter(why, param=param)
        return value

    return given


#: `--database-url ""` left to the fallbacks would open `$SESSION_AWARENESS_DATABASE_URL` or
#: the default store, not the one the caller meant.
given_url = not_empty(
    "an empty URL names no store: give sqlite:///… or postgresql://…, or leave the option "
    "out for its default"
)
#: `--agent-id ""` as given names no agent (`list` shows nothing, `status` finds nothing);
#: as absent, it would silently mean the key's own agent.
given_agent = not_empty("an empty agent id names no agent: give one, or leave the option out")


def store_options(command: F) -> F:
    """`--database-url` and the logging options, on every command that opens the store."""
    return click.option(
        "--database-url",
        metavar="URL",
        callback=given_url,
        help=f"The store (default: ${DATABASE_URL_ENV}, else {DEFAULT_DATABASE_URL}).",
    )(log_options(command))


def json_option(command: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")(command)


def database_url(given: str | None) -> str:
    """The URL the service would use: the option, else the environment, else the default."""
    return url_in_force(given)


@contextmanager
def open_store(
    given_url: str | None,
    *,
    verbose: int,
    startup: bool = False,
    retention: Retention | None = None,
    writes: bool = False,
) -> Iterator[SessionAwareness]:
    """The service on the URL, closed afterwards. Without `startup` the service's startup
    duties (prune, sweep, wake listener) do not run: looking never changes anything, and
    `prune` reports what it removed itself. A missing SQLite file is never created, and a
    SQLite file that is not a store is never written to (see `require_sqlite_store`). A
    command that `writes` refuses a store opened read-only before it starts."""
    url = database_url(given_url)
    with service_logs(verbose=verbose):
        require_sqlite_store(url, startup=startup)
        if writes and read_only(url):
            raise ConfigurationError(
                f"{redact(url)} opens the store read-only, and this command writes to it: "
                "drop ?mode=ro (nothing was changed)"
            )
        if not startup:
            require_postgres_store(url)
        if startup:
            svc = open_service(url)
        else:
            prefix = SessionStore.name.upper() + "_"
            env = {prefix + key: value for key, value in environment_for(url).items()}
            try:
                store = SessionStore(env, clock=system_clock)
                svc = SessionAwareness(store, retention=retention)
            except StoreUnavailableError as error:  # unreachable or restarting (R-E1)
                raise StoreUnavailableError(f"cannot open {redact(url)}: {error.reason}") from None
            except Exception as error:
                raise ConfigurationError(f"cannot open {redact(url)}: {error}") from error
            try:  # a look without start-up still refuses a newer version's store (ADR 035)
                check_store_version(svc.read_model)
            except BaseException:
                svc.close()
                raise
        try:
            yield svc
        finally:
            svc.close()


def require_sqlite_store(url: str, *, startup: bool = False) -> None:
    """Refuse, before anything opens it for writing, a SQLite file a command must not touch:
    a missing one (a mistyped path would become an empty database) and one that is not a
    session-awareness store (the store's tables would be added to someone else's database,
    or to an empty file, by a command that only looks). Only a command that opens the service
    as a host does (`startup`: `adopt`, `upstream scan`) may make a store of an empty
    database, as a host would; every other command needs the store to exist."""
    path = sqlite_file(url)
    if path is None:
        return  # not SQLite, or an in-memory database
    if not Path(path).is_file():
        raise NoDatabaseError(
            f"no database at {path} (pass --database-url or set ${DATABASE_URL_ENV})"
        )
    tables = sqlite_tables(path)
    if EVENTS_TABLE not in tables and (tables or not startup):
        what = "holds other tables" if tables else "is empty"
        raise NoDatabaseError(
            f"{path} is not a session-awareness store: it {what}, with no {EVENTS_TABLE} "
            "table (nothing was changed)"
        )


def require_sqlite_store_if_there(url: str) -> None:
    """For a command that opens the service as a host does (`mcp`): a missing SQLite file
    is made a store, as a host's first open makes it, but an existing file that holds
    other tables is refused (`require_sqlite_store`), not given the store's tables."""
    path = sqlite_file(url)
    if path is not None and Path(path).exists():
        require_sqlite_store(url, startup=True)


def require_postgres_store(url: str) -> None:
    """Refuse a PostgreSQL schema that holds no store, before anything opens it: a command
    that only looks (or prunes, drains, rebuilds) would create the schema and the store's
    tables there, as a host's first open does, from a mistyped `?schema=`. A server that
    cannot be reached is left for the open to report, with its own message."""
    env = environment_for(url)
    if "POSTGRES_URL" not in env:
        return
    try:
        import psycopg  # noqa: PLC0415 -- the postgres extra; its absence is the open's to say
        import psycopg.sql  # noqa: PLC0415

        from session_awareness.infrastructure.pg_config import parse_postgres_url  # noqa: PLC0415
    except ImportError:
        return
    try:
        config = parse_postgres_url(url)
    except ConfigurationError as error:  # named as the open names it (docs/operations.md)
        raise ConfigurationError(f"cannot open {redact(url)}: {error}") from None
    events = POSTGRES_EVENTS_TABLE
    try:
        with psycopg.connect(config.conninfo, autocommit=True) as conn:
            table = psycopg.sql.Identifier(config.schema, events).as_string(conn)
            row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
    except psycopg.Error:
        return
    if row is None or not row[0]:
        raise NoDatabaseError(
            f"{config.describe()} holds no session-awareness store in schema {config.schema} "
            f"(no {events} table; nothing was changed)"
        )


def sqlite_tables(path: str) -> set[str]:
    """The names of a SQLite file's tables, read on a read-only connection (`mode=ro`)."""
    uri = f"file:{quote(os.path.abspath(path))}?mode=ro"  # noqa: PTH100 -- a path from a URL
    try:
        with closing(sqlite3.connect(uri, uri=True)) as c:
            rows = c.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    except sqlite3.Error as error:
        raise NoDatabaseError(f"cannot read {path} as a SQLite database: {error}") from None
    return {name for (name,) in rows}


def log_level(verbose: int, quiet: int) -> int:
    """Warnings and errors by default; -v info, -vv debug; -q errors only, -qq critical."""
    return min(max(logging.WARNING - 10 * verbose + 10 * quiet, logging.DEBUG), logging.CRITICAL)


def log_processors(log_format: str) -> list[Any]:
    """The CLI's rendering: `console` (aligned, no colours) or `json` (one object a line)."""
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
    if log_format == "json":
        return [
            structlog.processors.add_log_level,
            stamp,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ]
    return [structlog.processors.add_log_level, stamp, structlog.dev.ConsoleRenderer(colors=False)]


@contextmanager
def service_logs(*, verbose: int) -> Iterator[None]:
    """Send the service's structlog events to stderr at the level and in the format the
    command's options chose, and restore the previous configuration afterwards (main may run
    in-process). The CLI is a host: it configures structlog, so the library follows it."""
    ctx = click.get_current_context(silent=True)
    meta = ctx.meta if ctx is not None else {}
    saved = structlog.get_config()
    was_configured = structlog.is_configured()
    structlog.configure(
        processors=log_processors(meta.get(LOG_FORMAT_KEY, "console")),
        wrapper_class=structlog.make_filtering_bound_logger(
            log_level(verbose, meta.get(QUIET_KEY, 0))
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )
    try:
        yield
    finally:
        if was_configured:
            structlog.configure(**saved)
        else:
            structlog.reset_defaults()


# -- printing -----------------------------------------------------------------------------------


class PipeConsole(Console):
    """A rich console that lets a closed stdout end the command as the CLI ends it (exit 141,
    silently): rich's own `on_broken_pipe` exits with 1, past the CLI's handling."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def stdout() -> Console:
    """A console on the current stdout (looked up per call, so tests can capture it)."""
    interactive = sys.stdout.isatty()
    return PipeConsole(file=sys.stdout, highlight=False, width=None if interactive else PIPE_WIDTH)


def stderr_is_interactive() -> bool:
    return Console(stderr=True).is_terminal


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def line(text: str) -> None:
    stdout().print(Text(text))


def table(*columns: str, title: str | None = None) -> Table:
    """A plain table; columns named with a leading `>` are right-aligned (numbers)."""
    out = Table(
        box=box.SIMPLE_HEAD, title=title, title_justify="left", pad_edge=False, show_edge=False
    )
    for name in columns:
        right = name.startswith(">")
        out.add_column(name.lstrip(">"), justify="right" if right else "left", overflow="fold")
    return out


def row(out: Table, *cells: Any) -> None:
    out.add_row(*(Text("" if cell is None else str(cell)) for cell in cells))


def show(out: Table) -> None:
    """Print a table without the padding rich leaves at the end of each line."""
    console = stdout()
    with console.capture() as captured:
        console.print(out)
    click.echo("\n".join(text.rstrip() for text in captured.get().splitlines()))


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`1 notice`, `2 notices`."""
    return f"{n} {noun}" if n == 1 else f"{n} {plural or noun + 's'}"


def when(ms: int | None) -> str:
    """A stored time (ms since the epoch) as UTC `YYYY-MM-DD HH:MM:SS`."""
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
