"""The operator CLI `session-awareness` (DESIGN D8); the one place in the package that prints.

    session-awareness --version
    session-awareness demo | tools-schema [--format json-schema|openai|openai-strict|anthropic|mcp]
    session-awareness status KEY [--changes-since N] [--agent-id A]
    session-awareness list [--agent-id A] [--kind K]... [--search TEXT] [--limit N]
    session-awareness notices WATCHER [--drain]
    session-awareness watches [--watcher W | --target T]
    session-awareness history KEY [--agent-id A]
    session-awareness transcript KEY [--limit N] [--offset N] [--include-tools]
    session-awareness audit [--rebuild]
    session-awareness prune [--dry-run] [--retention-days D] [--retention-rows R]
    session-awareness health [--spool DIR]
    session-awareness upstream scan | adopt KEY --claude-transcript PATH
    session-awareness mcp [--caller KEY] [--visibility V]
    session-awareness hook claude-code [--agent A]
    session-awareness install claude-code [--project DIR | --user] [--dry-run] | uninstall …

Every command that opens the store takes `--database-url URL` and the logging options
`-v/--verbose`, `-q/--quiet` and `--log-format console|json` (logs go to stderr); those that
print take `--json`. Exit codes: 0 success; 1 an audit that is not clean, or any other
failure; 2 bad input (bad arguments, unknown session, bad changesSince, unusable or
unreachable database); 130 interrupted (Ctrl-C); 141 the reader of stdout went away (a
closed pipe, as in `| head`). Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import os
import re
import sys

import click

from session_awareness import __version__
from session_awareness.application import SessionAwarenessError
from session_awareness.infrastructure.cli import audit, claude, extras, sessions, transcript
from session_awareness.infrastructure.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_BROKEN_PIPE,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    PROG,
    NoDatabaseError,
)
from session_awareness.infrastructure.demo import DatabaseNotEmptyError


class StdoutClosed(Exception):
    """The reader of stdout went away while a command was printing."""


class Commands(click.Group):
    """The command group; a closed stdout leaves it as `StdoutClosed`, because click itself
    would turn the `BrokenPipeError` into exit code 1."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as error:
            raise StdoutClosed from error


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__, "-V", "--version", prog_name=PROG, message="%(prog)s %(version)s"
)
def cli() -> None:
    """Operate session-awareness: a durable signal log, one notice per change, exact
    reconciliation, and an event store that audits it all."""


for command in (
    extras.demo,
    sessions.status,
    sessions.list_sessions,
    sessions.notices,
    sessions.watches,
    audit.history,
    transcript.transcript,
    audit.audit,
    audit.prune,
    audit.health,
    extras.upstream,
    extras.adopt,
    extras.tools_schema,
    claude.mcp,
    claude.hook,
    claude.install,
    claude.uninstall,
):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0911 -- one exit per outcome
    """Run the CLI on `argv` (default: the process arguments) and return the exit code."""
    try:
        result = cli.main(args=argv, prog_name=PROG, standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as error:
        error.show()  # the usage and the command list, on stderr
        return EXIT_BAD_INPUT
    except click.UsageError as error:
        where = error.ctx.command_path if error.ctx is not None else PROG
        return fail(f"{error.format_message()} (see {where} --help)", EXIT_BAD_INPUT)
    except click.ClickException as error:
        return fail(error.format_message(), error.exit_code)
    except (click.Abort, KeyboardInterrupt):  # Ctrl-C (click reports it as Abort)
        return fail("interrupted", EXIT_INTERRUPTED)
    except (BrokenPipeError, StdoutClosed):  # e.g. `… history KEY | head`: the reader left
        silence_stdout()
        return EXIT_BROKEN_PIPE
    except (SessionAwarenessError, DatabaseNotEmptyError, NoDatabaseError) as error:
        return fail(str(error), EXIT_BAD_INPUT)
    except Exception as error:  # noqa: BLE001 -- an operator gets one line, never a traceback
        return fail(f"{type(error).__name__}: {error}", EXIT_FAILURE)
    return result if isinstance(result, int) else 0


def fail(message: str, code: int) -> int:
    click.echo(f"error: {one_line(message)}", err=True)
    return code


def one_line(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", text.strip()) or "unknown error"


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not complain again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (e.g. captured in-process)
        pass


if __name__ == "__main__":
    raise SystemExit(main())
