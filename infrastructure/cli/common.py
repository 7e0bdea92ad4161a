"""What every CLI command shares: its options, opening the store, and printing.

Tables go to stdout through rich (plain text when stdout is not a terminal), JSON through
`json.dumps`; progress and logs go to stderr. Cells are `Text`, never markup, so a key or a
summary holding `[` prints as it is.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click
import structlog
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from session_awareness.application import ConfigurationError, SessionAwareness, open_service
from session_awareness.application.core import Retention
from session_awareness.application.ports import system_clock
from session_awareness.application.service import (
    DATABASE_URL_ENV,
    DEFAULT_DATABASE_URL,
    environment_for,
    redact,
)

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2
#: The width tables get when stdout is not a terminal (pipes, files, captured output).
PIPE_WIDTH = 200
F = TypeVar("F", bound=Callable[..., Any])


class NoDatabaseError(Exception):
    """A command named a SQLite file that does not exist."""


def store_options(command: F) -> F:
    """`--database-url` and `--verbose`, on every command that opens the store."""
    command = click.option("--verbose", is_flag=True, help="Show the service's logs (on stderr).")(
        command
    )
    return click.option(
        "--database-url",
        metavar="URL",
        help=f"The store (default: ${DATABASE_URL_ENV}, else {DEFAULT_DATABASE_URL}).",
    )(command)


def json_option(command: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")(command)


def database_url(given: str | None) -> str:
    """The URL the service would use: the option, else the environment, else the default."""
    return given or os.environ.get(DATABASE_URL_ENV) or DEFAULT_DATABASE_URL


@contextmanager
def open_store(
    given_url: str | None,
    *,
    verbose: bool,
    startup: bool = False,
    retention: Retention | None = None,
) -> Iterator[SessionAwareness]:
    """The service on the URL, closed afterwards. Without `startup` the service's startup
    duties (prune, sweep, wake listener) do not run: looking never changes anything, and
    `prune` reports what it removed itself. A missing SQLite file is never created."""
    url = database_url(given_url)
    with service_logs(verbose=verbose):
        require_existing_sqlite_file(url)
        if startup:
            svc = open_service(url)
        else:
            prefix = SessionAwareness.name.upper() + "_"
            env = {prefix + key: value for key, value in environment_for(url).items()}
            try:
                svc = SessionAwareness(env, clock=system_clock, retention=retention)
            except Exception as error:
                raise ConfigurationError(f"cannot open {redact(url)}: {error}") from error
        try:
            yield svc
        finally:
            svc.close()


def require_existing_sqlite_file(url: str) -> None:
    """A command must not create an empty database as a side effect of a mistyped path."""
    path = environment_for(url).get("SQLITE_DBNAME")  # raises ConfigurationError on a bad URL
    if path is None or path.startswith("file:"):
        return  # not SQLite, or an in-memory database
    if not Path(path).is_file():
        raise NoDatabaseError(
            f"no database at {path} (pass --database-url or set ${DATABASE_URL_ENV})"
        )


@contextmanager
def service_logs(*, verbose: bool) -> Iterator[None]:
    """Send the service's structlog output to stderr, warnings and errors only unless
    `verbose`, and restore the previous configuration afterwards (main may run in-process)."""
    saved = structlog.get_config()
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="%H:%M:%S"),
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.INFO if verbose else logging.WARNING
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )
    try:
        yield
    finally:
        structlog.configure(**saved)


# -- printing -----------------------------------------------------------------------------------


def stdout() -> Console:
    """A console on the current stdout (looked up per call, so tests can capture it)."""
    interactive = sys.stdout.isatty()
    return Console(file=sys.stdout, highlight=False, width=None if interactive else PIPE_WIDTH)


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
