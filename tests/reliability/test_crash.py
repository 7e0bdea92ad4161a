"""Crashes: writers killed with SIGKILL mid-burst, PostgreSQL stopped with `pg_ctl -m immediate`
mid-burst, while watchers drain in other processes (issue 8.2; R-L4, R-L8, R-N3, R-R2).

After recovery: every sequence a writer reported exists once, sequences are contiguous, the
notices drained account for every material event, and a rebuild equals the read models.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Iterator

import pytest

from session_awareness.application import open_service
from session_awareness.testing.pgcluster import PostgresCluster
from tests.contract.helpers import CHILD, MANAGER, OTHER, cursor, spawn
from tests.reliability.helpers import all_events, assert_audit_clean
from tests.reliability.ledger import Line, Proc, account_for, reconciled
from tests.reliability.worker import SINCE

OPS = "agent:ops:main"
TARGETS = [CHILD, OTHER]
#: (watcher, target) → the cursor's seed: the spawns seed the manager at 1, OPS watches at 1.
SEEDS = {(MANAGER, CHILD): 1, (MANAGER, OTHER): 1, (OPS, OTHER): 1}
#: Crashes survived, per backend and kind, for docs/reliability.md.
SURVIVED: Counter[str] = Counter()


def build(url: str) -> None:
    with open_service(url) as svc:
        spawn(svc)
        spawn(svc, child=OTHER, run="run-2")
        svc.open_session(OPS)  # a watcher the service knows (R-L9)
        assert svc.watch(OPS, OTHER)


def drainers(url: str) -> dict[str, Proc]:
    started = {watcher: Proc("drain", url, watcher) for watcher in (MANAGER, OPS)}
    for proc in started.values():
        proc.wait_for(lambda line: line.get("ready") is True)
    return started


def verify(url: str, reported: list[Line], drained: dict[str, list[Line]]) -> dict[str, int]:
    """Nothing lost, nothing doubled, every notice accounted for, the audit clean."""
    with open_service(url) as svc:
        logs = {target: all_events(svc, target) for target in TARGETS}
        for target, events in logs.items():
            head = svc.session_status(target)["stateVersion"]
            assert [e["sequence"] for e in events] == list(range(1, head + 1))  # contiguous
        recorded = [(line["key"], line["seq"]) for line in reported if line.get("seq")]
        assert len(recorded) == len(set(recorded)), "a sequence was reported twice"
        for key, seq in recorded:
            assert logs[key][seq - 1]["kind"] == "human_direct_message"
        for (watcher, target), seed in SEEDS.items():
            lines = drained[watcher]
            final = []
            while texts := svc.drain_notices(watcher):
                final += [int(SINCE.search(text)["since"]) for text in texts if target in text]  # type: ignore[index]
            sinces = [
                line["since"] for line in lines if "notice" in line and line["target"] == target
            ]
            position = cursor(svc, watcher, target)
            assert position is not None
            account_for(
                logs[target], watcher, seed, sinces + final, position,
                drain_failed=any("drain_failed" in line for line in lines),
            )  # fmt: skip
        count = reconciled([line for lines in drained.values() for line in lines], logs)
        assert_audit_clean(svc)
        return {"recorded": len(recorded), "reconciled": count}


def kill_writers(url: str, kills: int, rng: random.Random, backend: str) -> list[Line]:
    """Start a writer, let it report 0–30 records, then SIGKILL it at a random moment."""
    reported: list[Line] = []
    for number in range(kills):
        writer = Proc("write", url, f"w{number}", "100000", CHILD, OTHER)
        writer.wait_for(lambda line: line.get("ready") is True)
        records = rng.randint(0, 30)
        if records:
            writer.wait_for(lambda line, n=records: line.get("n") == n - 1)
        threading.Event().wait(rng.uniform(0, 0.02))  # anywhere, mid-transaction included
        writer.kill()
        SURVIVED[f"{backend}: writer SIGKILLs"] += 1
        reported += [line for line in writer.lines if "seq" in line]
    return reported


@pytest.fixture
def backend(database_url: str) -> Iterator[str]:
    yield "postgresql" if database_url.startswith("postgresql") else "sqlite"


def run_kills(database_url: str, backend: str, kills: int, seed: int) -> None:
    build(database_url)
    watchers = drainers(database_url)
    try:
        reported = kill_writers(database_url, kills, random.Random(seed), backend)  # noqa: S311 -- a replayable schedule
        drained = {watcher: proc.finish() for watcher, proc in watchers.items()}
    finally:
        for proc in watchers.values():
            proc.stop()
    figures = verify(database_url, reported, drained)
    print(f"\ncrash test on {backend}: {kills} SIGKILLs, {figures}")


class TestWriterKilled:
    def test_a_few_writers_killed_mid_burst_lose_and_double_nothing(
        self, database_url: str, backend: str
    ) -> None:
        """R-L4, R-N3, R-R2: three SIGKILLs at random moments; nothing lost or doubled."""
        run_kills(database_url, backend, kills=3, seed=8)

    @pytest.mark.slow
    def test_twenty_writers_killed_mid_burst_lose_and_double_nothing(
        self, database_url: str, backend: str
    ) -> None:
        """R-L4, R-N3, R-R2: twenty SIGKILLs at random moments; nothing lost or doubled."""
        run_kills(database_url, backend, kills=20, seed=20)


class TestDatabaseCrash:
    @pytest.mark.slow
    def test_postgresql_stopped_immediately_mid_burst_loses_and_doubles_nothing(self) -> None:
        """R-L8: while PostgreSQL is down the writer keeps its signals; after the restart
        (crash recovery) every attempt is recorded exactly once and notices add up."""
        with PostgresCluster() as cluster:
            url = f"{cluster.url}?schema=crash&connect_timeout=1"
            build(url)
            watchers = drainers(url)
            writer = Proc("write", url, "w", "100000", CHILD, OTHER)
            try:
                writer.wait_for(lambda line: line.get("n") == 20)
                cluster.stop(mode="immediate")
                writer.wait_for(lambda line: "seq" in line and line["seq"] is None)  # kept
                resumed = len(writer.lines)
                cluster.start()
                writer.wait_for(lambda line: line.get("n", 0) >= resumed + 50)  # the burst goes on
                lines = writer.finish()
                drained = {watcher: proc.finish() for watcher, proc in watchers.items()}
            finally:
                for proc in [writer, *watchers.values()]:
                    proc.stop()
            SURVIVED["postgresql: pg_ctl -m immediate"] += 1
            done = lines[-1]
            assert done["done"] and done["backlog"]["dropped"] == 0
            assert done["backlog"]["buffered"] == 0
            verify(url, [line for line in lines if "seq" in line], drained)
            with open_service(url) as svc:
                humans = [e for t in TARGETS for e in all_events(svc, t)
                          if e["kind"] == "human_direct_message"]  # fmt: skip
            assert len(humans) == done["attempts"]  # every attempt once: none lost, none doubled
            print(f"\nimmediate stop survived: {done}")
