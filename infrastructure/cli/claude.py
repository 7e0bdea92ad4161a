"""`mcp`, `hook`, `install` and `uninstall` (each for `claude-code` and `gemini-cli`): the
service for outside agent hosts (the MCP server) and for the agent CLIs (their hooks and
configuration)."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import click

import session_awareness
from session_awareness.application import open_service
from session_awareness.application.service import VISIBILITIES
from session_awareness.configuration import ConfigurationError, check_recordable, redact
from session_awareness.domain.keys import InvalidKeyError, check_key
from session_awareness.infrastructure.claude_hooks import (
    CLAUDE_CODE,
    CLIS,
    GEMINI_CLI,
    UNREAD,
    AgentCli,
    run_for,
    session_key,
    valid_agent,
)
from session_awareness.infrastructure.claude_relay import effective_url, socket_path
from session_awareness.infrastructure.claude_state import (
    ClaudeState,
    host_session,
    process_identity,
    state_dir,
)
from session_awareness.infrastructure.cli.common import (
    NoDatabaseError,
    database_url,
    given_url,
    require_sqlite_store_if_there,
    service_logs,
    store_options,
)
from session_awareness.infrastructure.cli.common import (
    database_url as database_url_in_force,
)
from session_awareness.infrastructure.cli.exits import EXIT_OK
from session_awareness.infrastructure.install_claude import (
    MCP_EXTRA,
    InstallError,
    absolute_url,
    apply_all,
    check_database_url,
    config_paths,
    hook_command,
    mcp_extra_installed,
    plan,
    prepare_database,
)
from session_awareness.infrastructure.install_warnings import installed_elsewhere, switched_off
from session_awareness.infrastructure.mcp_handshake import EarlyAnswer

F = TypeVar("F", bound=Callable[..., Any])
AGENT_HELP = "The agent id of Claude Code sessions: agent:<AGENT>:claude:<session_id>."
GEMINI_AGENT_HELP = "The agent id of Gemini CLI sessions: agent:<AGENT>:gemini:<session_id>."


def _agent(agent: str) -> str:
    if not valid_agent(agent):
        raise click.BadParameter(
            "must be an agent id (no ':' and no whitespace)", param_hint="--agent"
        )
    return agent


#: The longest wait between two reads of the pending notices: an hour.
MAX_POLL_SECONDS = 3600.0


def _finite(_: click.Context, param: click.Parameter, value: float) -> float:
    """NaN passes a range's comparisons (each is false): refuse it by name."""
    if not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number of seconds", param=param)
    return value


def claude_caller(agent: str, state: ClaudeState) -> str | None:
    """The key of the agent-CLI session (Claude Code or Gemini CLI, as the `SessionStart`
    hook recorded it for the process that started this server) this server runs under,
    resolved now."""
    found = host_session(state)
    if found is None or found[0] not in CLIS:
        return None
    return session_key(agent, found[1], CLIS[found[0]])


@click.command()
@click.option(
    "--caller",
    metavar="KEY",
    help="The caller's session key (default: the Claude Code or Gemini CLI session that "
    "started the server).",
)
@click.option(
    "--agent",
    default="claude",
    show_default=True,
    help="The agent id of the caller's key: agent:<AGENT>:claude|gemini:<session_id>.",
)
@click.option(
    "--visibility",
    type=click.Choice(VISIBILITIES),
    default="tree",
    show_default=True,
    help="What the caller may see (R-T2).",
)
@click.option(
    "--poll-seconds",
    type=click.FloatRange(min=0.05, max=MAX_POLL_SECONDS),
    callback=_finite,
    default=1.0,
    show_default=True,
    help="How often pending notices are read, for those no wake announces: ambient ones "
    "(R-W7), and on SQLite those other processes open.",
)
@store_options
def mcp(  # noqa: PLR0917 -- click passes every option as an argument
    caller: str | None,
    agent: str,
    visibility: str,
    poll_seconds: float,
    database_url: str | None,
    verbose: bool,
) -> int:
    """Serve the session tools over MCP on stdin/stdout, for one caller."""
    # `initialize` is answered while the SDK is imported and the store opened (R-M4).
    with EarlyAnswer(session_awareness.__version__) as early:
        return _serve_mcp(early, caller, agent, visibility, poll_seconds, database_url, verbose)


def _serve_mcp(  # noqa: PLR0917 -- the command's options, passed on
    early: EarlyAnswer,
    caller: str | None,
    agent: str,
    visibility: str,
    poll_seconds: float,
    database_url: str | None,
    verbose: bool,
) -> int:
    try:
        from session_awareness.infrastructure.mcp_server import (  # noqa: PLC0415
            STDIN_CLOSED,
            WakeRelay,
            serve_stdio,
        )
        from session_awareness.infrastructure.mcp_tools import McpSurface  # noqa: PLC0415
    except ImportError as error:
        raise click.ClickException(
            f"the MCP server needs the mcp extra: {MCP_EXTRA} ({error})"
        ) from None
    import anyio  # noqa: PLC0415

    if caller is not None:
        try:
            check_key(caller)
        except InvalidKeyError:
            raise click.BadParameter("must be a session key", param_hint="--caller") from None
        resolve = partial(lambda key: key, caller)
        hook_socket = None
    else:
        state = ClaudeState(state_dir())
        resolve = partial(claude_caller, _agent(agent), state)
        host = process_identity(os.getppid())
        hook_socket = socket_path(state, host) if host is not None else None
    # A host makes a store of a missing or empty file, never of someone else's database;
    # and the server records (its hooks' relayed signals, acknowledgements), into a store
    # the other sessions share: never an in-memory or read-only one (R-L9).
    url = database_url_in_force(database_url)
    check_recordable(url)
    require_sqlite_store_if_there(url)
    relay = WakeRelay()
    # The relay's wakes tell the notices resource's subscribers of each new notice, which
    # is news every time: no coalescing (R-N5 coalesces heartbeat wakes).
    with (
        service_logs(verbose=verbose),
        open_service(
            database_url, visibility=visibility, waker=relay, wake_coalesce_seconds=0
        ) as svc,
    ):
        # Read on both backends: ambient notices (R-W7) publish no wake, not even NOTIFY.
        stopped = anyio.run(
            partial(
                serve_stdio,
                McpSurface(svc, resolve, named=caller is not None),
                relay,
                poll_seconds=poll_seconds,
                hook_socket=hook_socket,
                database_url=effective_url(database_url),
                early=early.finish(),
            )
        )
    if stopped != STDIN_CLOSED:
        # Told to stop (Claude Code waits on its SIGINT): the store is closed, so the
        # process ends now rather than after the interpreter's teardown of the SDK's modules
        # (0.3 to 0.7 s measured here).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_OK)
    return EXIT_OK


@click.group()
def hook() -> None:
    """Record an agent host's hook event (JSON on stdin)."""


def _hook_options(agent_help: str, default_agent: str) -> Callable[[F], F]:
    def decorate(command: F) -> F:
        options: tuple[Callable[[F], F], ...] = (
            click.option("--verbose", is_flag=True, help="Show the service's logs (on stderr)."),
            click.option(
                "--database-url",
                metavar="URL",
                help="The store (default: "
                "$SESSION_AWARENESS_DATABASE_URL, else sqlite:///session-awareness.db).",
            ),
            click.option("--agent", default=default_agent, show_default=True, help=agent_help),
        )
        for option in options:
            command = option(command)
        return command

    return decorate


class HookCommand(click.Command):
    """A hook's command: a usage error exits `UNREAD` (1), which the agent CLI reports and
    goes on; click's 2 would block the turn (ADR 049)."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as error:
            error.exit_code = UNREAD
            raise


@hook.command(name="claude-code", cls=HookCommand)
@_hook_options(AGENT_HELP, CLAUDE_CODE.default_agent)
def hook_claude_code(agent: str, database_url: str | None, verbose: bool) -> int:
    """Map one Claude Code hook event onto the service; exits 0, with a warning Claude Code
    shows the user (a `systemMessage`) when the hook's settings can never record."""
    return run_for(CLAUDE_CODE, agent=agent, database_url=database_url, verbose=verbose)


@hook.command(name="gemini-cli", cls=HookCommand)
@_hook_options(GEMINI_AGENT_HELP, GEMINI_CLI.default_agent)
def hook_gemini_cli(agent: str, database_url: str | None, verbose: bool) -> int:
    """Map one Gemini CLI hook event onto the service; exits 0 and writes nothing but the
    JSON Gemini CLI reads (the reason for recording nothing goes to the state directory's
    hook.log), with a warning Gemini CLI shows the user (a `systemMessage`) when the hook's
    settings can never record."""
    return run_for(GEMINI_CLI, agent=agent, database_url=database_url, verbose=verbose)


def _scope_options(user_files: str, project_files: str) -> Callable[[F], F]:
    def decorate(command: F) -> F:
        options: tuple[Callable[[F], F], ...] = (
            click.option("--dry-run", is_flag=True, help="Print the change; write nothing."),
            click.option("--user", is_flag=True, help=f"Every project: {user_files}."),
            click.option(
                "--project",
                type=click.Path(exists=True, file_okay=False, path_type=Path),
                help=f"One project, an existing directory: {project_files} (default: the "
                "working directory).",
            ),
        )
        for option in options:
            command = option(command)
        return command

    return decorate


_CLAUDE_SCOPES = _scope_options(
    "~/.claude/settings.json and ~/.claude.json", "DIR/.claude/settings.json and DIR/.mcp.json"
)
_GEMINI_SCOPES = _scope_options("~/.gemini/settings.json", "DIR/.gemini/settings.json")


def _install_options(agent_help: str, default_agent: str) -> Callable[[F], F]:
    def decorate(command: F) -> F:
        options: tuple[Callable[[F], F], ...] = (
            click.option(
                "--visibility",
                type=click.Choice(VISIBILITIES),
                default="agent",
                show_default=True,
                help="What each session's MCP tools may see.",
            ),
            click.option("--agent", default=default_agent, show_default=True, help=agent_help),
            click.option(
                "--database-url",
                metavar="URL",
                callback=given_url,
                help="The one store the hooks and the MCP server "
                "use (default: $SESSION_AWARENESS_DATABASE_URL, else a SQLite file in the state "
                "directory).",
            ),
        )
        for option in options:
            command = option(command)
        return command

    return decorate


def _run_plan(
    cli: AgentCli, project: Path | None, user: bool, dry_run: bool, **options: object
) -> int:
    if project is not None and user:
        raise click.UsageError("--project and --user are exclusive")
    settings, mcp_config = config_paths(project=project, user=user, cli=cli)
    if not options.get("remove"):
        url = absolute_url(options.get("database_url"))  # type: ignore[arg-type]
        try:
            check_database_url(url)
            require_sqlite_store_if_there(url)  # the hooks would fill someone else's file
        except (ConfigurationError, NoDatabaseError) as error:
            raise _unusable(url, str(error).removesuffix(" (nothing was changed)")) from None
    try:
        changes = plan(settings=settings, mcp_config=mcp_config, cli=cli, **options)  # type: ignore[arg-type]
    except InstallError as error:
        raise click.ClickException(str(error)) from None
    if not dry_run:
        try:
            if not options.get("remove"):
                try:
                    prepare_database(url)
                except OSError as error:  # the database's folder cannot be made
                    why = f"cannot make the folder of its file: {error.strerror or error}"
                    raise _unusable(url, why) from None
            apply_all(changes)
        except InstallError as error:
            raise click.ClickException(str(error)) from None
    for change in changes:
        if not change.changed:
            click.echo(f"{change.path}: unchanged")
        elif dry_run:
            click.echo(change.diff(), nl=False)
        else:
            click.echo(f"{change.path}: {'removed' if change.after is None else 'updated'}")
    return EXIT_OK


def _unusable(url: str, why: str) -> click.UsageError:
    return click.UsageError(
        f"the hooks and the MCP server cannot use {redact(url)}: {why} (nothing was changed)"
    )


def _install(cli: AgentCli, project: Path | None, user: bool, dry_run: bool,
             **options: object) -> int:  # fmt: skip
    code = _run_plan(cli, project, user, dry_run, **options)
    command = hook_command(absolute_url(options["database_url"]), options["agent"], cli)  # type: ignore[arg-type]
    found = switched_off(cli, project=project, user=user)  # installed, yet never run
    found += installed_elsewhere(cli, project=project, user=user, command=command)
    for line in found:
        click.echo(f"warning: {line}", err=True)
    if not mcp_extra_installed():  # the entry is written anyway: the hooks work without it
        click.echo(f"warning: the MCP server entry needs the mcp extra: {MCP_EXTRA}", err=True)
    return code


@click.group()
def install() -> None:
    """Set an agent host up to use the service."""


@install.command(name="claude-code")
@_CLAUDE_SCOPES
@_install_options(AGENT_HELP, CLAUDE_CODE.default_agent)
def install_claude_code(  # noqa: PLR0917 -- click passes every option as an argument
    project: Path | None,
    user: bool,
    dry_run: bool,
    database_url: str | None,
    agent: str,
    visibility: str,
) -> int:
    """Add the hooks and the MCP server to Claude Code's configuration (merged, not replaced)."""
    return _install(CLAUDE_CODE, project, user, dry_run, database_url=database_url,
                    agent=_agent(agent), visibility=visibility)  # fmt: skip


@install.command(name="gemini-cli")
@_GEMINI_SCOPES
@_install_options(GEMINI_AGENT_HELP, GEMINI_CLI.default_agent)
def install_gemini_cli(  # noqa: PLR0917 -- click passes every option as an argument
    project: Path | None,
    user: bool,
    dry_run: bool,
    database_url: str | None,
    agent: str,
    visibility: str,
) -> int:
    """Add the hooks and the MCP server to Gemini CLI's settings.json (merged, not replaced)."""
    return _install(GEMINI_CLI, project, user, dry_run, database_url=database_url,
                    agent=_agent(agent), visibility=visibility)  # fmt: skip


@click.group()
def uninstall() -> None:
    """Remove what `install` added."""


@uninstall.command(name="claude-code")
@_CLAUDE_SCOPES
def uninstall_claude_code(project: Path | None, user: bool, dry_run: bool) -> int:
    """Remove the hooks and the MCP server entry `install claude-code` wrote; nothing else."""
    return _run_plan(CLAUDE_CODE, project, user, dry_run, database_url=database_url(None),
                     remove=True)  # fmt: skip


@uninstall.command(name="gemini-cli")
@_GEMINI_SCOPES
def uninstall_gemini_cli(project: Path | None, user: bool, dry_run: bool) -> int:
    """Remove the hooks and the MCP server entry `install gemini-cli` wrote; nothing else."""
    return _run_plan(GEMINI_CLI, project, user, dry_run, database_url=database_url(None),
                     remove=True)  # fmt: skip
