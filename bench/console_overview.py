"""`python -m bench.console_overview [--sessions N] [--backend B] [--rounds R] [--blocks K]`:
how long the console's overview (`/`) takes to render over a store of N sessions (100,000
by default), with the registry's activity index and without it (R-O1; ADR 040).

The store is built through the service's own record path (`bench.seed.Batch`): 10 agents,
each with managers that spawn 99 children (so each manager watches its children), a human
turn on every hundredth child (a pending notice), the service clock moving 50 ms a call so
activity times differ. The console is created as `session-awareness console` creates it,
over a service opened for looking, and asked through Starlette's test client, so a figure
is the whole page: the query, the trees, the template. The index is dropped and created
again between blocks (`K` of each, alternating which goes first, `R` requests of each page
in a block), so both states are measured in the same minutes on this noisy machine.

Pages: `/` (the first page, what an operator opens), `/?page=N/100` (halfway down) and
`/?agentId=a7` (one agent's). Prints each page's median and 95th percentile per state.

With `--watches`, the cursor pages instead (issue 39, item 6; each child is watched by its
manager, so N sessions hold about N cursors): `/watches` (the first page), one watcher's
and the pending ones', as the console serves them now ("after": one page read from the
store, counted there) and as it computed them before ("before": every cursor read, then
filtered, sorted and sliced in Python, `whole_list_watches`), in alternating blocks.
"""

from __future__ import annotations

import argparse
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.context import run_context
from bench.harness import median, percentile, quiet_logs
from bench.seed import Batch
from session_awareness.application import open_service
from session_awareness.infrastructure.cli.common import open_store
from session_awareness.infrastructure.readmodel.tables import REGISTRY


def pages(sessions: int) -> tuple[str, ...]:
    """The first page, one halfway down the list (50 sessions a page), one agent's."""
    return ("/", f"/?page={sessions // 100}", "/?agentId=a7")


AGENTS = 10
CHILDREN = 99
INDEX = "session_registry_updated"


def watch_pages() -> tuple[str, ...]:
    """The first page of every cursor, one manager's (99 children), the pending ones."""
    return ("/watches", "/watches?watcher=agent:a7:m0", "/watches?state=pending")


def whole_list_watches(
    svc: Any,
    *,
    watcher: str | None = None,
    target: str | None = None,
    pending_only: bool = False,
    page: int = 0,
    page_size: int = 100,
) -> Any:
    """The watches page as the console computed it before issue 39's fix: every live
    cursor read, then filtered, sorted and sliced here (the figure `before`)."""
    from session_awareness.infrastructure.console import cursors  # noqa: PLC0415

    every = [
        c
        for c in svc.read_model.cursors_updated_before(2**62)
        if (watcher is None or c.watcher_key == watcher)
        and (target is None or c.target_key == target)
        and (c.pending or not pending_only)
    ]
    every.sort(key=lambda c: (c.watcher_key, c.target_key, c.target_id))
    shown = every[page * page_size : (page + 1) * page_size]
    more = len(every) > (page + 1) * page_size
    pending = sum(c.pending for c in every)
    return cursors.Watches(cursors.edges(svc, shown), len(every), pending, page, more)


@contextmanager
def whole_list() -> Iterator[None]:
    """The console's watches page computed as before (`whole_list_watches`)."""
    from session_awareness.infrastructure.console import cursors  # noqa: PLC0415

    now = cursors.watches
    cursors.watches = whole_list_watches
    try:
        yield
    finally:
        cursors.watches = now


def stepping_clock(start: datetime, step: timedelta) -> Callable[[], datetime]:
    now = [start]

    def clock() -> datetime:
        now[0] += step
        return now[0]

    return clock


def seed(url: str, sessions: int) -> None:
    """`sessions` sessions: per agent, managers each spawning `CHILDREN` children."""
    clock = stepping_clock(datetime.now(UTC) - timedelta(hours=6), timedelta(milliseconds=50))
    svc = open_service(url, clock=clock, spool=False)
    try:
        batch = Batch(svc)
        family = CHILDREN + 1
        for number in range(sessions // family):
            agent, manager = f"a{number % AGENTS}", f"m{number // AGENTS}"
            parent = f"agent:{agent}:{manager}"
            batch.open(parent)
            for child in range(CHILDREN):
                key = f"agent:{agent}:subagent:{manager}c{child}"
                batch.spawn(key, parent=parent, run_id=f"spawn-{manager}-{child}")
                if child % 100 == 7:
                    batch.human(key)
        batch.flush()
    finally:
        svc.close()


def index_sql(drop: bool) -> str:
    column = dict(REGISTRY.indexes)[INDEX]
    if drop:
        return f"DROP INDEX IF EXISTS {INDEX}"
    return f"CREATE INDEX IF NOT EXISTS {INDEX} ON session_registry ({column})"


def set_index(backend: str, target: str, *, present: bool) -> None:
    sql = index_sql(drop=not present)
    if backend == "sqlite":
        with closing(sqlite3.connect(target)) as db:
            db.execute(sql)
            db.execute("ANALYZE")
            db.commit()
        return
    import psycopg  # noqa: PLC0415 -- the postgres extra, only for that backend

    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute(sql)  # type: ignore[arg-type]
        conn.execute("ANALYZE")


def index_present(backend: str, target: str) -> bool:
    if backend == "sqlite":
        with closing(sqlite3.connect(target)) as db:
            found = db.execute("SELECT count(*) FROM sqlite_master WHERE name = ?", (INDEX,))
            return bool(found.fetchone()[0])
    import psycopg  # noqa: PLC0415

    with psycopg.connect(target) as conn:
        found = conn.execute("SELECT count(*) FROM pg_indexes WHERE indexname = %s", (INDEX,))
        return bool(found.fetchone()[0])  # type: ignore[index]


@contextmanager
def previous_ddl() -> Iterator[None]:
    """The read models' DDL as the version before the index wrote it: without this, the
    console's own open (which runs the DDL, as every open does) would create the index."""
    from session_awareness.infrastructure.readmodel import recorder  # noqa: PLC0415

    ddl = recorder.READ_MODEL_DDL
    recorder.READ_MODEL_DDL = [statement for statement in ddl if INDEX not in statement]
    try:
        yield
    finally:
        recorder.READ_MODEL_DDL = ddl


@contextmanager
def console(url: str) -> Iterator[Any]:
    from starlette.testclient import TestClient  # noqa: PLC0415 -- the console extra

    from session_awareness.infrastructure.console import create_app  # noqa: PLC0415

    with (
        open_store(url, verbose=0) as svc,
        TestClient(create_app(svc), base_url="http://localhost") as client,
    ):
        yield client


def measure(client: Any, rounds: int, asked: tuple[str, ...]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {page: [] for page in asked}
    for page in asked:  # warm: the page's statements prepared, its rows cached
        client.get(page)
    for _ in range(rounds):
        for page in asked:
            started = time.perf_counter()
            answer = client.get(page)
            times[page].append(time.perf_counter() - started)
            if answer.status_code != 200 or "/sessions/agent%3A" not in answer.text:
                raise RuntimeError(f"{page} answered {answer.status_code}")
    return times


def run(backend: str, sessions: int, rounds: int, blocks: int) -> dict[str, dict[str, Any]]:
    quiet_logs()
    with run_context(quick=False, backends=(backend,)) as ctx:
        url, target = ctx.database(backend, "overview")
        started = time.perf_counter()
        seed(url, sessions)
        print(f"[overview] {backend}: {sessions} sessions seeded in "
              f"{time.perf_counter() - started:.0f} s")  # fmt: skip
        found: dict[bool, dict[str, list[float]]] = {True: {}, False: {}}
        for block in range(blocks):
            for present in (True, False) if block % 2 else (False, True):
                set_index(backend, target, present=present)
                with nullcontext() if present else previous_ddl(), console(url) as client:
                    for page, times in measure(client, rounds, pages(sessions)).items():
                        found[present].setdefault(page, []).extend(times)
                if index_present(backend, target) != present:
                    raise RuntimeError(f"the index was meant to be {'in' if present else 'out'}")
        return {
            ("with index" if present else "without index"): {
                page: {"median_ms": median(t) * 1000, "p95_ms": percentile(t, 0.95) * 1000}
                for page, t in times.items()
            }
            for present, times in found.items()
        }


def run_watches(backend: str, sessions: int, rounds: int, blocks: int) -> dict[str, dict[str, Any]]:
    """The cursor pages before and after, in alternating blocks over one store."""
    quiet_logs()
    with run_context(quick=False, backends=(backend,)) as ctx:
        url, _ = ctx.database(backend, "watches")
        started = time.perf_counter()
        seed(url, sessions)
        print(f"[watches] {backend}: {sessions} sessions seeded in "
              f"{time.perf_counter() - started:.0f} s")  # fmt: skip
        found: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
        for block in range(blocks):
            for state in ("after", "before") if block % 2 else ("before", "after"):
                with whole_list() if state == "before" else nullcontext(), console(url) as client:
                    for page, times in measure(client, rounds, watch_pages()).items():
                        found[state].setdefault(page, []).extend(times)
        return {
            state: {
                page: {"median_ms": median(t) * 1000, "p95_ms": percentile(t, 0.95) * 1000}
                for page, t in times.items()
            }
            for state, times in found.items()
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--watches", action="store_true", help="the cursor pages instead")
    args = parser.parse_args()
    if args.watches:
        figures = run_watches(args.backend, args.sessions, args.rounds, args.blocks)
        asked = " | ".join(f"`{page}`" for page in watch_pages())
    else:
        figures = run(args.backend, args.sessions, args.rounds, args.blocks)
        asked = " | ".join(f"`{page}`" for page in pages(args.sessions))
    print(f"| {args.backend}, {args.sessions:,} sessions | {asked} |")
    for state, shown in figures.items():
        cells = [f"{p['median_ms']:.1f} ms (p95 {p['p95_ms']:.1f})" for p in shown.values()]
        print(f"| {state} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
