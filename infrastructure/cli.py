"""The operator CLI `session-awareness` (DESIGN D8); the one place in the package that prints.

    session-awareness demo [--database-url URL] [--verbose]
    session-awareness status KEY [--changes-since N] [--agent-id A] [--database-url URL]
    session-awareness tools-schema

Exit codes: 0 success, 2 bad input (unknown session, bad changesSince, unusable database URL,
bad arguments), 1 any other failure. Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import structlog

from session_awareness.application import SessionAwarenessError, open_service
from session_awareness.application.service import (
    DATABASE_URL_ENV,
    DEFAULT_DATABASE_URL,
    environment_for,
)
from session_awareness.application.tools.schema import tool_schemas
from session_awareness.infrastructure.demo import (
    DatabaseNotEmptyError,
    fresh_database_url,
    run_demo,
)

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2


class NoDatabaseError(Exception):
    """A read-only command named a SQLite file that does not exist."""


def main(argv: list[str] | None = None) -> int:
    """Run the CLI on `argv` (default: the process arguments) and return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # argparse has already printed usage and the error, or --help
        return stop.code if isinstance(stop.code, int) else EXIT_BAD_INPUT
    command: Callable[[argparse.Namespace], int] = args.command
    with service_logs(verbose=args.verbose):
        try:
            return command(args)
        except BrokenPipeError:  # e.g. `session-awareness demo | head`: the reader left
            silence_stdout()
            return EXIT_FAILURE
        except (SessionAwarenessError, DatabaseNotEmptyError, NoDatabaseError) as error:
            return fail(str(error), EXIT_BAD_INPUT)
        except Exception as error:  # noqa: BLE001 -- an operator gets one line, never a traceback
            return fail(f"{type(error).__name__}: {error}", EXIT_FAILURE)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--database-url",
        metavar="URL",
        help=f"the store (default: ${DATABASE_URL_ENV}, else {DEFAULT_DATABASE_URL})",
    )
    common.add_argument(
        "--verbose", action="store_true", help="show the service's logs (on stderr)"
    )
    parser = argparse.ArgumentParser(
        prog="session-awareness",
        description="Operate session-awareness: a durable signal log, one notice per change, "
        "exact reconciliation.",
    )
    commands = parser.add_subparsers(metavar="COMMAND", required=True)

    demo = commands.add_parser(
        "demo",
        parents=[common],
        help="tell the whole story on a fresh database, as a timeline",
        description="A manager spawns two children, a human steps in, the manager gets one "
        "notice and reconciles exactly. Uses a fresh temporary SQLite file unless "
        "--database-url names one (which must hold no sessions).",
    )
    demo.set_defaults(command=demo_command)

    status = commands.add_parser(
        "status",
        parents=[common],
        help="print session_status for a session, as JSON",
        description="Print session_status (stateVersion, and the delta with --changes-since).",
    )
    status.add_argument("key", metavar="KEY", help="the session key, e.g. agent:main:main")
    status.add_argument(
        "--changes-since", metavar="N", help="also list the changes after state version N"
    )
    status.add_argument("--agent-id", metavar="A", help="the agent of a bare key (e.g. global)")
    status.set_defaults(command=status_command)

    tools_schema = commands.add_parser(
        "tools-schema",
        help="print the JSON Schemas of the session tools, as JSON",
        description="Print the session tools (session_status, sessions_list, sessions_send, "
        "sessions_spawn) as a list of {name, description, parameters}, parameters being a "
        "JSON Schema object: the shape LLM function-calling APIs expect.",
    )
    tools_schema.set_defaults(command=tools_schema_command, verbose=False)
    return parser


def demo_command(args: argparse.Namespace) -> int:
    url = args.database_url or fresh_database_url()
    run_demo(url, print)
    return EXIT_OK


def status_command(args: argparse.Namespace) -> int:
    url = database_url(args.database_url)
    require_existing_sqlite_file(url)
    svc = open_service(url)
    try:
        answer = svc.session_status(
            args.key, changes_since=args.changes_since, agent_id=args.agent_id
        )
    finally:
        svc.close()
    print(json.dumps(answer, indent=2))
    return EXIT_OK


def tools_schema_command(args: argparse.Namespace) -> int:
    print(json.dumps(tool_schemas(), indent=2, ensure_ascii=False))
    return EXIT_OK


def database_url(given: str | None) -> str:
    """The URL the service would use: the option, else the environment, else the default."""
    return given or os.environ.get(DATABASE_URL_ENV) or DEFAULT_DATABASE_URL


def require_existing_sqlite_file(url: str) -> None:
    """A query must not create an empty database as a side effect of a mistyped path."""
    path = environment_for(url).get("SQLITE_DBNAME")  # raises ConfigurationError on a bad URL
    if path is None or path.startswith("file:"):
        return  # not SQLite, or an in-memory database
    if not Path(path).is_file():
        raise NoDatabaseError(
            f"no database at {path} (pass --database-url or set ${DATABASE_URL_ENV})"
        )


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not complain again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (e.g. captured in-process)
        pass


def fail(message: str, code: int) -> int:
    print(f"error: {one_line(message)}", file=sys.stderr)
    return code


def one_line(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", text.strip()) or "unknown error"


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


if __name__ == "__main__":
    raise SystemExit(main())
