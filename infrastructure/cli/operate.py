"""Operating the store: `audit`, `history`, `prune` and `health` (R-L8, R-L10, R-R1, R-R2,
docs/operations.md)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from session_awareness.application import SessionAwarenessError
from session_awareness.application.audit import Progress as OnProgress
from session_awareness.application.audit_report import AuditReport
from session_awareness.application.backlog import SpoolError
from session_awareness.application.retention import (
    MAX_RETENTION_DAYS,
    MAX_RETENTION_ROWS,
    Retention,
)
from session_awareness.application.service import spool_for
from session_awareness.infrastructure.cli.common import (
    counted,
    given_agent,
    json_option,
    line,
    open_store,
    print_json,
    row,
    show,
    stderr_is_interactive,
    store_options,
    table,
    when,
)
from session_awareness.infrastructure.cli.common import (
    database_url as url_of,
)
from session_awareness.infrastructure.cli.exits import EXIT_FAILURE, EXIT_OK
from session_awareness.infrastructure.cli.history_lines import describe


class RateColumn(ProgressColumn):
    """Replayed events per second."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("– events/s" if speed is None else f"{speed:,.0f} events/s")


@contextmanager
def progress_bar(enabled: bool) -> Iterator[OnProgress | None]:
    """A progress bar on stderr (events/s and ETA), or nothing when stderr is not a terminal."""
    if not enabled:
        yield None
        return
    columns = (TextColumn("replaying"), BarColumn(), TaskProgressColumn(), RateColumn(),
               TimeRemainingColumn())  # fmt: skip
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("replay", total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


@click.command()
@click.option("--rebuild", is_flag=True, help="Replace the live read models by the rebuilt ones.")
@store_options
@json_option
def audit(rebuild: bool, database_url: str | None, verbose: int, as_json: bool) -> int:
    """Replay the event store into scratch read models and compare them with the live ones,
    row by row; exit 1 when anything differs or a recorded fact breaks a rule."""
    with (
        open_store(database_url, verbose=verbose, writes=rebuild) as svc,
        progress_bar(stderr_is_interactive()) as progress,
    ):
        report = svc.audit(rebuild=rebuild, progress=progress)
    if as_json:
        print_json(report.as_dict())
    else:
        print_report(report)
    return EXIT_OK if report.clean else EXIT_FAILURE


def print_report(report: AuditReport) -> None:
    line(
        f"replayed {report.events:,} events (up to #{report.last_position}) in "
        f"{report.seconds:.2f} s: {report.events_per_second:,.0f} events/s"
    )
    out = table("table", ">live rows", ">rebuilt rows", ">missing", ">unexpected", ">changed")
    for name, s in report.tables.items():
        row(out, name, s.live_rows, s.rebuilt_rows, s.missing, s.unexpected, s.changed)
    show(out)
    if report.differences:
        shown = len(report.differences)
        title = f"differences ({shown} of {report.difference_count} shown)"
        out = table("table", "problem", "key", "subject", "live → rebuilt", title=title)
        for d in report.differences:
            key = " ".join(f"{k}={v}" for k, v in d.key.items())
            columns = "; ".join(f"{c}: {live!r} → {new!r}" for c, (live, new) in d.columns.items())
            row(out, d.table, d.problem, key, d.subject, columns)
        show(out)
    if report.violations:
        title = f"broken rules ({len(report.violations)} of {report.violation_count} shown)"
        out = table("rule", ">position", "detail", title=title)
        for v in report.violations:
            row(out, v.rule, v.position, v.detail)
        show(out)
    if report.clean:
        line("clean: the live read models are exactly what the event store implies")
    else:
        rows, rules = counted(report.difference_count, "differing row"), report.violation_count
        line(f"NOT CLEAN: {rows}, {counted(rules, 'broken rule')}")
    if report.rebuilt:
        line("rebuilt: the live read models were replaced by the rebuilt ones, atomically")


@click.command()
@click.argument("key")
@click.option(
    "--agent-id", metavar="A", callback=given_agent, help="The agent of a bare key (e.g. global)."
)
@store_options
@json_option
def history(
    key: str, agent_id: str | None, database_url: str | None, verbose: int, as_json: bool
) -> int:
    """A session's whole audit trail from the event store: signals (pruned ones too),
    lifecycle events and every cursor transition on it, in recording order."""
    with open_store(database_url, verbose=verbose) as svc:
        entries = svc.history(key, agent_id=agent_id)
    if as_json:
        print_json(entries)
        return EXIT_OK
    out = table(">#", "recorded", "by", "event", "details")
    for entry in entries:
        by, event, details = describe(entry)
        row(out, entry["position"], when(entry["recordedAt"]), by, event, details)
    show(out)
    pruned = sum(1 for e in entries if e.get("pruned"))
    gone = counted(pruned, "signal")
    line(f"{counted(len(entries), 'entry', 'entries')} for {key}; {gone} no longer in changesSince")
    return EXIT_OK


@click.command()
@click.option("--dry-run", is_flag=True, help="Show what would go; change nothing.")
@click.option("--retention-days", type=click.IntRange(1, MAX_RETENTION_DAYS), default=30,
              show_default=True, metavar="D",
              help="Remove the rows recorded more than D days ago, and expire the cursors "
              "idle that long.")  # fmt: skip
@click.option("--retention-rows", type=click.IntRange(1, MAX_RETENTION_ROWS), default=50_000,
              show_default=True, metavar="R",
              help="Then keep the newest R rows across all sessions.")  # fmt: skip
@store_options
@json_option
def prune(
    *,
    dry_run: bool,
    retention_days: int,
    retention_rows: int,
    database_url: str | None,
    verbose: int,
    as_json: bool,
) -> int:
    """Apply retention (R-R1): drop old changesSince rows, raising watermarks, and expire
    idle cursors. The event store keeps everything (R-R2)."""
    retention = Retention(retention_days, retention_rows)
    with open_store(database_url, verbose=verbose, retention=retention, writes=not dry_run) as svc:
        result: dict[str, Any] = svc.prune_preview() if dry_run else svc.prune()
    if as_json:
        print_json({**result, "dryRun": dry_run})
        return EXIT_OK
    verb = "would remove" if dry_run else "removed"
    line(
        f"{verb} {counted(result['removedRows'], 'row')} from "
        f"{counted(len(result['watermarks']), 'session')} and "
        f"{counted(result['expiredCursors'], 'idle cursor')}"
        + (" (dry run: nothing changed)" * dry_run)
    )
    if result["watermarks"]:
        out = table("session", "agent", ">watermark")
        for item in result["watermarks"]:
            row(out, item["sessionKey"], item["agentId"], item["watermark"])
        show(out)
    return EXIT_OK


@click.command()
@click.option(
    "--spool",
    "spool_dir",
    metavar="DIR",
    # a mistyped folder would read as an empty spool: "0 kept signals" where some wait
    type=click.Path(exists=True, file_okay=False),
    help="The spool folder the host's services use (default: "
    "$XDG_STATE_HOME/session-awareness/spool, else ~/.local/state/session-awareness/spool).",
)
@store_options
@json_option
def health(spool_dir: str | None, database_url: str | None, verbose: int, as_json: bool) -> int:
    """Whether the store answers, and the spool of this host (R-L8, R-L10): the signals
    kept during an outage that wait there for the next service of the store. Exit 1 when
    the store does not answer; the spool is read either way."""
    url = url_of(database_url)
    spool = spool_for(spool_dir or True, url)
    waiting: dict[str, Any] | None = None
    if spool is not None:
        try:
            waiting = {"path": str(spool.path), "signals": spool.count()}
        except SpoolError as error:
            waiting = {"path": str(spool.path), "signals": None, "error": str(error)}
    try:
        with open_store(database_url, verbose=verbose) as svc:
            report = svc.health()
    except SessionAwarenessError as error:
        report = {"backend": url.partition(":")[0], "store": str(error)}
    result = {"backend": report["backend"], "store": report["store"], "spool": waiting}
    if as_json:
        print_json(result)
    else:
        line(f"store  {result['store']} ({result['backend']})")
        if waiting is None:
            line("spool  none (an in-memory store)")
        elif waiting["signals"] is None:
            line(f"spool  {waiting['path']}: cannot be read: {waiting['error']}")
        else:
            kept = counted(waiting["signals"], "kept signal")
            line(f"spool  {waiting['path']}: {kept} waiting for the next service of this store")
    return EXIT_OK if result["store"] == "ok" else EXIT_FAILURE
