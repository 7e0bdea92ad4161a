"""Looking at sessions: `status`, `list`, `notices` and `watches` (R-W1–R-W7, R-N1–R-N7,
R-S1–R-S5)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from session_awareness.application import SessionAwareness
from session_awareness.application.ports import CursorRow
from session_awareness.domain.signals import MAX_SAFE_INTEGER
from session_awareness.infrastructure.cli.common import (
    counted,
    given_agent,
    json_option,
    line,
    open_store,
    print_json,
    row,
    show,
    store_options,
    table,
    when,
)
from session_awareness.infrastructure.cli.exits import EXIT_OK

#: More than any store holds: `cursor_page(limit=EVERY)` reads every cursor.
EVERY = 2**62


@click.command()
@click.argument("key")
@click.option("--changes-since", metavar="N", help="Also list the changes after state version N.")
@click.option(
    "--agent-id", metavar="A", callback=given_agent, help="The agent of a bare key (e.g. global)."
)
@store_options
@json_option
def status(
    *,
    key: str,
    changes_since: str | None,
    agent_id: str | None,
    database_url: str | None,
    verbose: int,
    as_json: bool,
) -> int:
    """A session's stateVersion, and with --changes-since N the exact delta after N."""
    with open_store(database_url, verbose=verbose) as svc:
        answer = svc.session_status(key, changes_since=changes_since, agent_id=agent_id)
    if as_json:
        print_json(answer)
        return EXIT_OK
    line(f"{answer['sessionKey']}  stateVersion {answer['stateVersion']}")
    changes = answer.get("stateChanges")
    if changes is not None:
        gap = "HISTORY GAP (rows were pruned)" if changes["historyGap"] else "no history gap"
        more = ", truncated: more follow" if changes["truncated"] else ""
        line(
            f"changes since {changes_since}: {len(changes['events'])} events, earliest "
            f"available #{changes['earliestAvailableSequence']}, {gap}{more}"
        )
        out = table(">#", "kind", "actor", "occurred at", "summary", "payload")
        for event in changes["events"]:
            actor = " ".join(filter(None, (event["actorType"], event.get("actorId"))))
            payload = " ".join(f"{k}={v}" for k, v in (event.get("payload") or {}).items())
            row(out, event["sequence"], event["kind"], actor, when(event["occurredAt"]),
                event["summary"], payload)  # fmt: skip
        show(out)
    return EXIT_OK


@click.command(name="list")
@click.option("--agent-id", metavar="A", callback=given_agent, help="Only this agent's sessions.")
@click.option("--kind", "kinds", multiple=True, metavar="KIND", help="Only these kinds.")
@click.option("--search", metavar="TEXT", help="Key or label contains TEXT.")
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="At most N sessions.")
@click.option("--archived", is_flag=True, help="List the archived sessions instead.")
@store_options
@json_option
def list_sessions(
    *,
    agent_id: str | None,
    kinds: tuple[str, ...],
    search: str | None,
    limit: int | None,
    archived: bool,
    database_url: str | None,
    verbose: int,
    as_json: bool,
) -> int:
    """Live sessions, most recently updated first (--json: the sessions_list tool's rows)."""
    with open_store(database_url, verbose=verbose) as svc:
        items = svc.sessions_list(
            agent_id=agent_id, kinds=kinds or None, search=search, limit=limit,
            archived=archived,
        )  # fmt: skip
    if as_json:
        print_json(items)
        return EXIT_OK
    out = table("session", "agent", "kind", "label", "parent", ">children", ">stateVersion",
                "run", "updated")  # fmt: skip
    for item in items:
        row(out, item["sessionKey"], item["agentId"], item["kind"], item["label"],
            item["parentSessionKey"], len(item["childSessionKeys"]),
            item.get("stateVersion", 0), item.get("runStatus"),
            when(item["updatedAt"]))  # fmt: skip
    show(out)
    line(counted(len(items), "session"))
    return EXIT_OK


@click.command()
@click.argument("watcher")
@click.option("--drain", is_flag=True, help="Hand the notices over and acknowledge them (R-N3).")
@store_options
@json_option
def notices(
    watcher: str, drain: bool, database_url: str | None, verbose: int, as_json: bool
) -> int:
    """A watcher's pending notices, oldest first; --drain acknowledges them."""
    with open_store(database_url, verbose=verbose, writes=drain) as svc:  # R-L9: the key
        if drain:
            return hand_over(svc, watcher, as_json=as_json)
        texts = svc.pending_notices(watcher)
    if as_json:
        print_json({"watcher": watcher, "notices": texts, "drained": False})
        return EXIT_OK
    for text in texts:
        line(text)
    line(f"{counted(len(texts), 'notice')} pending for {watcher}")
    return EXIT_OK


def hand_over(svc: SessionAwareness, watcher: str, *, as_json: bool) -> int:
    """`notices W --drain`: print the pending notices, then acknowledge them (R-N8): a reader
    of stdout that goes away midway (`| head`, Ctrl-C) leaves them pending, to be shown
    again, never acknowledged unseen. A notice whose cursor moved on meanwhile stays as it
    is now (pending, if it still is); one opened since is left pending. With `--json` the
    document is written up to its last field, `pendingAfter`, which is known only once the
    notices are acknowledged."""
    handover = svc.hand_over_notices(watcher)
    if as_json:  # all but its last field and the closing brace: `{…, "drained": true`
        answer = {"watcher": watcher, "notices": list(handover.notices), "drained": True}
        click.echo(json.dumps(answer, indent=2, ensure_ascii=False).removesuffix("\n}"), nl=False)
    else:
        for text in handover.notices:
            line(text)
    sys.stdout.flush()  # a closed stdout fails here, before anything is acknowledged
    drained = svc.acknowledge_handed(watcher, handover)
    pending = svc.pending_notices(watcher)
    if as_json:
        click.echo(f',\n  "pendingAfter": {len(pending)}\n}}')
        return EXIT_OK
    reopened = " (newer changes opened a fresh notice)" if pending else ""
    line(f"{counted(len(drained), 'notice')} drained; {len(pending)} pending now{reopened}")
    return EXIT_OK


@click.command()
@click.option("--watcher", metavar="W", help="Only the cursors W holds.")
@click.option("--target", metavar="T", help="Only the cursors on session T.")
@click.option(
    "--agent-id", metavar="A", callback=given_agent, help="The agent of a bare target key."
)
@click.option("--limit", type=click.IntRange(1, MAX_SAFE_INTEGER), metavar="N",
              help="At most N cursors.")  # fmt: skip
@click.option("--offset", type=click.IntRange(0, MAX_SAFE_INTEGER), default=0, metavar="N",
              help="Skip the first N cursors (with --limit: the next page).")  # fmt: skip
@store_options
@json_option
def watches(
    *,
    watcher: str | None,
    target: str | None,
    agent_id: str | None,
    limit: int | None,
    offset: int,
    database_url: str | None,
    verbose: int,
    as_json: bool,
) -> int:
    """Cursor positions (L acknowledged, N notified, M material) and pending state.

    By watcher, then target; --limit and --offset show one page, read as one from the store.
    """
    if watcher is not None and target is not None:
        raise click.UsageError("give --watcher or --target, not both")
    with open_store(database_url, verbose=verbose) as svc:
        if target is not None:  # one session's watchers, by its id (a bare key's agent)
            every = svc.read_model.cursors_on_target(svc.resolve(target, agent_id).session_id)
            end = None if limit is None else offset + limit
            cursors = every[offset:end]
            total, pending = len(every), sum(c.pending for c in every)
        else:
            cursors, total, pending = svc.read_model.cursor_page(
                watcher_key=watcher, offset=offset, limit=EVERY if limit is None else limit
            )
            if watcher is not None and not total:  # a mistyped key is refused (R-L9)
                svc.pending_notices(watcher)
    items = [cursor_json(c) for c in cursors]
    if as_json:
        print_json(items)
        return EXIT_OK
    out = table("watcher", "target", ">L", ">N", ">M", "state", "updated")
    for c in cursors:
        state = f"pending: changesSince {c.acknowledged}" if c.pending else "synced"
        row(out, c.watcher_key, c.target_key, c.acknowledged, c.notified, c.material, state,
            when(c.updated_at))  # fmt: skip
    show(out)
    shown = "" if len(items) == total else f"{len(items)} shown of "
    line(f"{shown}{counted(total, 'cursor')}, {pending} pending")
    return EXIT_OK


def cursor_json(c: CursorRow) -> dict[str, Any]:
    return {
        "watcher": c.watcher_key,
        "target": c.target_key,
        "acknowledged": c.acknowledged,
        "notified": c.notified,
        "material": c.material,
        "pending": c.pending,
        "updatedAt": c.updated_at,
    }
