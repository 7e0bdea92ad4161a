"""`session-awareness transcript KEY`: the `sessions_history` view of a session's transcript,
for an operator (the audit trail is `history`)."""

from __future__ import annotations

import click

from session_awareness.infrastructure.cli.common import (
    counted,
    given_agent,
    json_option,
    line,
    open_store,
    print_json,
    store_options,
    when,
)
from session_awareness.infrastructure.cli.exits import EXIT_OK


@click.command()
@click.argument("key")
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="The newest N messages.")
@click.option("--offset", type=click.IntRange(min=0), metavar="N", help="Skip N newer messages.")
@click.option("--before", metavar="POS", help="Only messages older than the one at position POS.")
@click.option("--include-tools", is_flag=True, help="Also show tool calls and results.")
@click.option(
    "--agent-id", metavar="A", callback=given_agent, help="The agent of a bare key (e.g. global)."
)
@store_options
@json_option
def transcript(
    *,
    key: str,
    limit: int | None,
    offset: int | None,
    before: str | None,
    include_tools: bool,
    agent_id: str | None,
    database_url: str | None,
    verbose: int,
    as_json: bool,
) -> int:
    """A session's transcript as sessions_history shows it: bounded and safety-filtered."""
    with open_store(database_url, verbose=verbose) as svc:
        page = svc.sessions_history(key, limit=limit, offset=offset,
            include_tools=include_tools, agent_id=agent_id, before=before)  # fmt: skip
    if as_json:
        print_json(page)
        return EXIT_OK
    for message in page["messages"]:
        at = when(message["timestamp"]) if "timestamp" in message else "?"
        line(f"[{at}] {message['role']} ({message['position']})")
        for block in message["content"]:
            if block["type"] == "toolCall":
                line(f"  -> {block['name']} {block['arguments']}")
            else:
                prefix = "  <- " if block["type"] == "toolResult" else "  "
                error = " (error)" if block.get("isError") else ""
                first, *rest = block["text"].splitlines() or [""]
                line(f"{prefix}{first}{error}")
                for text in rest:
                    line(" " * len(prefix) + text)
    flags = [name for name in ("truncated", "contentTruncated", "contentRedacted") if page[name]]
    dropped = f", {page['droppedMessages']} dropped" if page["droppedMessages"] else ""
    skipped = page["skippedLines"]
    dropped += f", {counted(skipped, 'line')} unreadable" if skipped else ""
    more = f", next --before {page['nextBefore']}" if "nextBefore" in page else ""
    if more and before is None:
        more = f", next --offset {page['nextOffset']} or --before {page['nextBefore']}"
    line(f"{counted(len(page['messages']), 'message')}, {page['bytes']} bytes{dropped}{more}"
         + (f" ({', '.join(flags)})" if flags else ""))  # fmt: skip
    return EXIT_OK
