"""The demo, the tools' JSON Schemas, and the upstream commands (R-U1–R-U5, R-T1–R-T3,
docs/operations.md)."""

from __future__ import annotations

import importlib
import json
import shlex
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import click

from session_awareness.application.tools.catalog import TOOLS
from session_awareness.application.tools.tool_schemas import FLAVORS, tool_schemas
from session_awareness.configuration import DATABASE_URL_ENV
from session_awareness.infrastructure.cli.common import (
    counted,
    given_agent,
    given_url,
    json_option,
    line,
    log_options,
    open_store,
    print_json,
    row,
    service_logs,
    show,
    store_options,
    table,
)
from session_awareness.infrastructure.cli.exits import EXIT_OK, PROG
from session_awareness.infrastructure.demo import run_demo, temporary_database_url

#: Imported only when an upstream command runs.
UPSTREAM_COMMANDS = "session_awareness.infrastructure.upstream_commands"


@click.command(
    help=f"""Tell the whole story on a fresh database, as a timeline.

    A manager spawns two children, a human steps in, the manager gets one notice and
    reconciles exactly.

    The story runs on a new temporary SQLite file, removed afterwards, unless --database-url
    names a store that holds no sessions yet; that one is kept, to query afterwards. The demo
    never reads ${DATABASE_URL_ENV}, so it never writes into the store you work with."""
)
@click.option(
    "--database-url",
    metavar="URL",
    callback=given_url,
    help="A store without sessions to tell the story in, kept afterwards "
    "(default: a temporary SQLite file).",
)
@log_options
def demo(database_url: str | None, verbose: int) -> int:
    with service_logs(verbose=verbose):
        if database_url is not None:
            run_demo(database_url, click.echo, program=invoked_as())
        else:
            with temporary_database_url() as url:
                run_demo(url, click.echo, program=invoked_as(), kept=False)
    return EXIT_OK


def invoked_as() -> str:
    """The CLI as the shell ran it (`.venv/bin/session-awareness` after `make demo`), so a
    command the demo suggests runs as printed; the bare name when it cannot tell."""
    argv0 = sys.argv[0] if sys.argv else ""
    return shlex.quote(argv0) if Path(argv0).name == PROG else PROG


#: The formats `tools-schema --format` prints: each a name and how to build it.
SCHEMA_FORMATS: dict[str, Callable[[], Any]] = {
    flavor: partial(tool_schemas, flavor) for flavor in FLAVORS
}


@click.command(
    name="tools-schema",
    help=f"""Print the session tools' schemas as JSON, in the shape a function-calling API takes.

    For {", ".join(TOOLS)}: json-schema gives {{name, description, parameters}}; openai and
    openai-strict the Chat Completions tool ({{type: function, function: {{...}}}}); anthropic
    {{name, description, input_schema}}; mcp {{name, description, inputSchema}}. The output
    is JSON either way (--json is accepted like on every other command).""",
)
@click.option(
    "--format",
    "schema_format",
    type=click.Choice(list(SCHEMA_FORMATS)),
    default="json-schema",
    show_default=True,
    help="The API's shape: plain JSON Schema, OpenAI (strict or not), Anthropic or MCP.",
)
@json_option
def tools_schema(schema_format: str, as_json: bool) -> int:
    del as_json  # the output is JSON either way
    print_json(SCHEMA_FORMATS[schema_format]())
    return EXIT_OK


@click.group()
def upstream() -> None:
    """Upstream monitoring of adopted sessions (R-U1–R-U5)."""


@upstream.command()
@store_options
@json_option
def scan(database_url: str | None, verbose: int, as_json: bool) -> int:
    """Scan every watched, idle upstream link once and show what was found."""
    commands = importlib.import_module(UPSTREAM_COMMANDS)
    with open_store(database_url, verbose=verbose, startup=True, writes=True) as svc:
        outcomes: list[dict[str, Any]] = commands.scan_once(svc)
    if as_json:
        print_json(outcomes)
        return EXIT_OK
    columns = sorted({name for outcome in outcomes for name in outcome})
    if columns:
        out = table(*columns)
        for outcome in outcomes:
            row(out, *(_cell(outcome.get(name)) for name in columns))
        show(out)
    line(f"{counted(len(outcomes), 'upstream link')} scanned")
    return EXIT_OK


@click.command()
@click.argument("key")
@click.option(
    "--claude-transcript",
    "transcript",
    required=True,
    metavar="PATH",
    help="A Claude Code JSONL transcript to follow.",
)
@click.option(
    "--agent-id", metavar="A", callback=given_agent, help="The agent of a bare key (e.g. global)."
)
@store_options
@json_option
def adopt(
    *,
    key: str,
    transcript: str,
    agent_id: str | None,
    database_url: str | None,
    verbose: int,
    as_json: bool,
) -> int:
    """Adopt an upstream thread into session KEY: its new human turns become signals (R-U1).

    A KEY no session has (or a deleted one's) is opened, as a host adopting a thread does:
    the output's `adopted` says whether this call adopted it, and `sessionKey` which session
    it is. Only turns written after the transcript's last complete line count."""
    commands = importlib.import_module(UPSTREAM_COMMANDS)
    with open_store(database_url, verbose=verbose, startup=True, writes=True) as svc:
        link: dict[str, Any] = commands.adopt_claude_transcript(
            svc, key, transcript, agent_id=agent_id
        )
    if as_json:
        print_json(link)
        return EXIT_OK
    out = table("field", "value")
    for name, value in link.items():
        row(out, name, _cell(value))
    show(out)
    return EXIT_OK


def _cell(value: Any) -> str:
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return "" if value is None else str(value)
