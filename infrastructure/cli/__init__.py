"""The operator CLI `session-awareness` (docs/operations.md); the one place in the package that
prints.

    session-awareness --version
    session-awareness demo | tools-schema [--format json-schema|openai|openai-strict|anthropic|mcp]
    session-awareness status KEY [--changes-since N] [--agent-id A]
    session-awareness list [--agent-id A] [--kind K]... [--search TEXT] [--limit N]
    session-awareness notices WATCHER [--drain]
    session-awareness watches [--watcher W | --target T] [--limit N] [--offset N]
    session-awareness history KEY [--agent-id A]
    session-awareness transcript KEY [--limit N] [--offset N] [--before POS] [--include-tools]
    session-awareness audit [--rebuild]
    session-awareness prune [--dry-run] [--retention-days D] [--retention-rows R]
    session-awareness health [--spool DIR]
    session-awareness upstream scan | adopt KEY --claude-transcript PATH
    session-awareness mcp [--caller KEY] [--visibility V]
    session-awareness console [--host 127.0.0.1] [--port 8765] [--token T]
    session-awareness hook claude-code | gemini-cli [--agent A]
    session-awareness install claude-code | gemini-cli [--project DIR | --user] [--dry-run]
    session-awareness uninstall claude-code | gemini-cli [--project DIR | --user] [--dry-run]

Every command that opens the store takes `--database-url URL` and the logging options
`-v/--verbose`, `-q/--quiet` and `--log-format console|json` (logs go to stderr); those that
print take `--json`. Exit codes: 0 success; 1 an audit that is not clean, or any other
failure; 2 bad input (bad arguments, unknown session, bad changesSince, unusable or
unreachable database); 130 interrupted (Ctrl-C); 141 the reader of stdout went away (a
closed pipe, as in `| head`). Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import importlib
import os
import re
import sys

import click

from session_awareness.infrastructure.cli.exits import (
    EXIT_BAD_INPUT,
    EXIT_BROKEN_PIPE,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    PROG,
)

#: Every command: its module in this package, the attribute that holds it, and the line
#: `--help` lists it with (the first sentence of its own help; a test holds them equal). A
#: command's module, and the service with it, is imported only when that command is run or
#: asked for its help, so `--version` and `--help` start in the time click takes to import.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "adopt": ("extras", "adopt", "Adopt an upstream thread into session KEY: its new human "
              "turns become signals (R-U1)."),
    "audit": ("operate", "audit", "Replay the event store into scratch read models and compare "
              "them with the live ones, row by row; exit 1 when anything differs or a recorded "
              "fact breaks a rule."),
    "console": ("console", "console", "Serve a read-only operator console (session trees, "
                "cursors, timelines, health, live updates) and Prometheus metrics at /metrics; "
                "loopback only unless given a token."),
    "demo": ("extras", "demo", "Tell the whole story on a fresh database, as a timeline."),
    "history": ("operate", "history", "A session's whole audit trail from the event store: "
                "signals (pruned ones too), lifecycle events and every cursor transition on it, "
                "in recording order."),
    "health": ("operate", "health", "Whether the store answers, and the spool of this host "
               "(R-L8, R-L10): the signals kept during an outage that wait there for the next "
               "service of the store."),
    "hook": ("claude", "hook", "Record an agent host's hook event (JSON on stdin)."),
    "install": ("claude", "install", "Set an agent host up to use the service."),
    "list": ("sessions", "list_sessions", "Live sessions, most recently updated first (--json: "
             "the sessions_list tool's rows)."),
    "mcp": ("claude", "mcp", "Serve the session tools over MCP on stdin/stdout, for one caller."),
    "notices": ("sessions", "notices", "A watcher's pending notices, oldest first; --drain "
                "acknowledges them."),
    "prune": ("operate", "prune", "Apply retention (R-R1): drop old changesSince rows, raising "
              "watermarks, and expire idle cursors."),
    "status": ("sessions", "status", "A session's stateVersion, and with --changes-since N the "
               "exact delta after N."),
    "tools-schema": ("extras", "tools_schema", "Print the session tools' schemas as JSON, in "
                     "the shape a function-calling API takes."),
    "transcript": ("transcript", "transcript", "A session's transcript as sessions_history "
                   "shows it: bounded and safety-filtered."),
    "uninstall": ("claude", "uninstall", "Remove what `install` added."),
    "upstream": ("extras", "upstream", "Upstream monitoring of adopted sessions (R-U1–R-U5)."),
    "watches": ("sessions", "watches", "Cursor positions (L acknowledged, N notified, M "
                "material) and pending state."),
}  # fmt: skip


class StdoutClosed(Exception):
    """The reader of stdout went away while a command was printing."""


class Commands(click.Group):
    """The command group: it loads a command's module when the command is asked for
    (`COMMANDS`), and a closed stdout leaves it as `StdoutClosed`, because click itself would
    turn the `BrokenPipeError` into exit code 1."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
        return command if isinstance(command, click.Command) else None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list, from `COMMANDS`: listing needs none of their modules."""
        limit = formatter.width - 6 - max(map(len, COMMANDS))
        rows = [
            (name, click.Command(name, help=summary).get_short_help_str(limit))
            for name, (_, _, summary) in sorted(COMMANDS.items())
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as error:
            raise StdoutClosed from error


def show_version(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    """`--version`: the version is read when asked for (`session_awareness.__version__` reads
    the installed metadata, and `importlib.metadata` is a tenth of every command's start)."""
    if not value or ctx.resilient_parsing:
        return
    import session_awareness  # noqa: PLC0415

    click.echo(f"{PROG} {session_awareness.__version__}")
    ctx.exit()


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-V",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=show_version,
    help="Show the version and exit.",
)
def cli() -> None:
    """Operate session-awareness: a durable signal log, one notice per change, exact
    reconciliation, and an event store that audits it all."""


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0911 -- one exit per outcome
    """Run the CLI on `argv` (default: the process arguments) and return the exit code."""
    try:
        result = cli.main(args=argv, prog_name=PROG, standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as error:
        error.show()  # the usage and the command list, on stderr
        return EXIT_BAD_INPUT
    except click.UsageError as error:
        where = error.ctx.command_path if error.ctx is not None else PROG
        # click's 2 (EXIT_BAD_INPUT), unless the command says otherwise (a hook's: ADR 049)
        return fail(f"{error.format_message()} (see {where} --help)", error.exit_code)
    except click.ClickException as error:
        return fail(error.format_message(), error.exit_code)
    except (click.Abort, KeyboardInterrupt):  # Ctrl-C (click reports it as Abort)
        return fail("interrupted", EXIT_INTERRUPTED)
    except (BrokenPipeError, StdoutClosed):  # e.g. `… history KEY | head`: the reader left
        silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as error:  # noqa: BLE001 -- an operator gets one line, never a traceback
        if isinstance(error, bad_input_errors()):
            return fail(str(error), EXIT_BAD_INPUT)
        return fail(f"{type(error).__name__}: {error}", EXIT_FAILURE)
    return result if isinstance(result, int) else 0


def bad_input_errors() -> tuple[type[Exception], ...]:
    """The errors that are the operator's input (exit 2): imported only once one is raised,
    since by then the command that raised it has imported them."""
    from session_awareness.application import SessionAwarenessError  # noqa: PLC0415
    from session_awareness.infrastructure.cli.common import NoDatabaseError  # noqa: PLC0415
    from session_awareness.infrastructure.demo import DatabaseNotEmptyError  # noqa: PLC0415

    return (SessionAwarenessError, DatabaseNotEmptyError, NoDatabaseError)


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
