"""Concurrency soak: 4 processes append a mix of every producer to overlapping sessions while
2 processes drain two watchers (issue 8.5; R-L4, R-W5, R-N2, R-N3, R-S1).

At the end, what each watcher drained and reconciled accounts for every material event of
every target it watches, exactly as the model says, and every signal a writer recorded is in
the log once.
"""

from __future__ import annotations

from collections import Counter

import pytest

from session_awareness.application import open_service
from tests.contract.helpers import CHILD, MANAGER, OTHER, cursor, spawn
from tests.reliability.helpers import all_events, assert_audit_clean
from tests.reliability.ledger import Proc, account_for, reconciled
from tests.reliability.worker import SINCE

OPS = "agent:ops:main"
THIRD = "agent:main:subagent:third"
TARGETS = [CHILD, OTHER, THIRD]
SEEDS = {(MANAGER, CHILD): 1, (MANAGER, OTHER): 1, (MANAGER, THIRD): 1, (OPS, OTHER): 1,
         (OPS, THIRD): 1}  # fmt: skip
KINDS = {"run": "run_completed"}
#: Soak figures per backend, for docs/reliability.md.
FIGURES: Counter[str] = Counter()


def soak(url: str, per_writer: int, backend: str) -> None:
    with open_service(url) as svc:
        spawn(svc)
        spawn(svc, child=OTHER, run="run-2")
        spawn(svc, child=THIRD, run="run-3")
        svc.open_session(OPS)  # a watcher the service knows (R-L9)
        assert svc.watch(OPS, OTHER) and svc.watch(OPS, THIRD)
    drainers = {watcher: Proc("drain", url, watcher) for watcher in (MANAGER, OPS)}
    writers = [Proc("mix", url, f"w{n}", str(per_writer), str(n), *TARGETS) for n in range(4)]
    try:
        for proc in [*drainers.values(), *writers]:
            proc.wait_for(lambda line: line.get("ready") is True)
        written = [w.wait_for(lambda line: line.get("done") is True, timeout=600) for w in writers]
        reported = [line for w in writers for line in w.lines if "seq" in line]
        drained = {watcher: proc.finish() for watcher, proc in drainers.items()}
    finally:
        for proc in [*writers, *drainers.values()]:
            proc.stop()

    with open_service(url) as svc:
        logs = {target: all_events(svc, target) for target in TARGETS}
        for events in logs.values():
            assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
        recorded = [(line["key"], line["seq"], line["kind"]) for line in reported if line["seq"]]
        assert len({(key, seq) for key, seq, _ in recorded}) == len(recorded)
        for key, seq, kind in recorded:
            assert logs[key][seq - 1]["kind"] == KINDS.get(kind, kind)
        flushed = sum(done["backlog"]["flushed"] for done in written)
        assert sum(done["backlog"]["dropped"] for done in written) == 0
        assert sum(len(events) - 1 for events in logs.values()) == len(recorded) + flushed
        notices = 0
        for (watcher, target), seed in SEEDS.items():
            final = []
            while texts := svc.drain_notices(watcher):
                final += [int(SINCE.search(t)["since"]) for t in texts if f'"{target}"' in t]  # type: ignore[index]
            sinces = [
                line["since"] for line in drained[watcher]
                if "notice" in line and line["target"] == target
            ]  # fmt: skip
            position = cursor(svc, watcher, target)
            assert position is not None
            account_for(logs[target], watcher, seed, sinces + final, position)
            notices += len(sinces) + len(final)
        checked = reconciled([line for lines in drained.values() for line in lines], logs)
        assert_audit_clean(svc)
    figures = {"signals": len(recorded) + flushed, "notices": notices, "reconciled": checked}
    FIGURES.update({f"{backend}: {name}": value for name, value in figures.items()})
    print(f"\nsoak on {backend}, 4 x {per_writer}: {figures}")


def backend_of(url: str) -> str:
    return "postgresql" if url.startswith("postgresql") else "sqlite"


class TestSoak:
    def test_four_writers_and_two_drainers_account_for_every_material_event(
        self, database_url: str
    ) -> None:
        """R-L4, R-W5, R-N2, R-N3, R-S1: a short soak (4 × 40 signals)."""
        soak(database_url, per_writer=40, backend=backend_of(database_url))

    @pytest.mark.slow
    def test_a_longer_soak_accounts_for_every_material_event(self, database_url: str) -> None:
        """R-L4, R-W5, R-N2, R-N3, R-S1: the same with 4 × 600 signals."""
        soak(database_url, per_writer=600, backend=backend_of(database_url))
