"""Measure the audit's replay rate on a database of many events.

    .venv/bin/python -m tests.ops.replay_rate --events 100000 [--database-url URL]
    .venv/bin/python -m tests.ops.replay_rate --database-url postgresql://… --copy-from F.db

Fills the database (unless it already holds that many events) with a mixed workload through
the service — spawns, human messages, goal changes, drains, prunes — then runs `audit()` and
prints the events replayed, the seconds, the rate and the process's peak memory (run it
again on the filled database to measure the audit alone). `--copy-from` loads an empty
PostgreSQL event store with a SQLite file's stored events instead (filling PostgreSQL through
the service is slow); its read models start empty, so the first audit rebuilds them.
"""

from __future__ import annotations

import argparse
import resource
import sqlite3
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

from session_awareness.application import SessionAwareness, open_service

START = datetime(2026, 11, 1, tzinfo=UTC)


class StepClock:
    """A service clock that moves a second per call, so retention has something to prune."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def fill(svc: SessionAwareness, events: int) -> int:
    """Record a mixed workload until the store holds at least `events` events."""
    stored = int(svc.store.recorder.max_notification_id() or 0)
    round_ = 0
    while stored < events:
        manager = f"agent:a{round_ % 50}:main"
        svc.open_session(manager)
        child = f"agent:a{round_ % 50}:subagent:c{round_}"
        svc.record_child_spawned(child, parent=manager, run_id=f"run-{round_}")
        for turn in range(20):
            svc.record_human_direct_message(child, channel="telegram")
            svc.record_goal_changed(child, summary="goal updated", actor_type="human")
            if turn % 5 == 4:
                svc.drain_notices(manager)
        svc.record_run_terminal(child, run_id=f"run-{round_}", outcome="ok")
        if round_ % 25 == 24:
            svc.prune()
        round_ += 1
        stored = int(svc.store.recorder.max_notification_id() or 0)
    return stored


def copy_events(svc: SessionAwareness, source: str) -> None:
    """Append a SQLite file's stored events to this PostgreSQL store's empty events table."""
    recorder: Any = svc.store.recorder.read_models
    table = recorder.dialect.schema_prefix + f'"{recorder.events_table_name}"'
    rows = sqlite3.connect(source).execute(
        "SELECT originator_id, originator_version, topic, state FROM stored_events ORDER BY rowid"
    )
    with (
        recorder.datastore.transaction(commit=True) as c,
        c.copy(
            f"COPY {table} (originator_id, originator_version, topic, state) FROM STDIN"
        ) as copy,
    ):
        for originator_id, version, topic, state in rows:
            copy.write_row((uuid.UUID(originator_id), version, topic, state))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--database-url")
    parser.add_argument("--copy-from", metavar="F.db", help="a SQLite file's events (PostgreSQL)")
    args = parser.parse_args()
    url = args.database_url or "sqlite:///" + str(
        Path(tempfile.mkdtemp(prefix="replay-rate-")) / "events.db"
    )
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    svc = open_service(url, clock=StepClock(), retention_rows=5_000)
    try:
        if args.copy_from and not svc.store.recorder.max_notification_id():
            copy_events(svc, args.copy_from)
        stored = fill(svc, args.events)
        report = svc.audit(rebuild=bool(args.copy_from))
    finally:
        svc.close()
    print(f"database        {url}")
    print(f"stored events   {stored:,}")
    print(f"replayed        {report.events:,} events in {report.seconds:.2f} s")
    print(f"replay rate     {report.events_per_second:,.0f} events/s")
    print(f"clean           {report.clean}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"peak memory     {peak} MiB (the whole process)")


if __name__ == "__main__":
    main()
