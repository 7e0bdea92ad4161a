"""Ambiguous commits: the transaction commits, the answer never reaches the client (issue 8.4).

A loopback proxy forwards the COMMIT and drops the connection instead of the server's answer.
Whatever the producer, its own retry and the host's retry of the same call must not record
the signal twice, and a drained notice must reach the watcher (R-L5, R-L8, R-N3).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from session_awareness.application import SessionAwareness, open_service
from session_awareness.application.errors import StoreUnavailableError
from session_awareness.testing.pgcluster import PostgresCluster
from tests.contract.helpers import CHILD, MANAGER, notice
from tests.contract.test_group_commit import (
    group,
    joined,
    record,
    spawned,
    started,
    write_lock_held,
)
from tests.reliability.helpers import all_events, assert_audit_clean, wait_until
from tests.reliability.proxy import CommitDroppingProxy

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.fixture
def proxy(postgres: PostgresCluster) -> Iterator[CommitDroppingProxy]:
    front = CommitDroppingProxy(postgres.port)
    yield front
    front.close()


@pytest.fixture
def svc(postgres: PostgresCluster, proxy: CommitDroppingProxy) -> Iterator[SessionAwareness]:
    """A service whose every connection goes through the proxy; the manager has spawned CHILD."""
    url = postgres.url.replace(f":{postgres.port}/", f":{proxy.port}/")
    with open_service(f"{url}?schema=a_{uuid.uuid4().hex[:12]}") as service:
        service.open_session(MANAGER)
        assert service.record_child_spawned(CHILD, parent=MANAGER, run_id="run-1") == 1
        yield service
        assert_audit_clean(service)


def lose_the_commit_answer(proxy: CommitDroppingProxy, call: Callable[[], Any]) -> Any:
    """Run `call` with the next COMMIT's answer lost; its result, or the error it raised."""
    proxy.arm()
    try:
        result = call()
    except StoreUnavailableError as error:
        result = error
    assert proxy.dropped.is_set(), "no COMMIT answer was lost: the scenario did not happen"
    return result


def kinds(svc: SessionAwareness, key: str = CHILD) -> list[tuple[int, str]]:
    svc.flush_signals()
    return [(event["sequence"], event["kind"]) for event in all_events(svc, key)]


IDEMPOTENT: dict[str, Callable[[SessionAwareness], Any]] = {
    "spawn": lambda svc: svc.record_child_spawned(CHILD, parent=MANAGER, run_id="run-2"),
    "run terminal": lambda svc: svc.record_run_terminal(CHILD, run_id="run-1", outcome="error"),
    "compaction": lambda svc: svc.record_compacted(CHILD, operation_id="op-1"),
    "keyed human message": lambda svc: svc.record_human_direct_message(
        CHILD, channel="telegram", idempotency_key="turn-7"
    ),
}


class TestAmbiguousCommit:
    @pytest.mark.parametrize("producer", IDEMPOTENT)
    def test_an_idempotent_producer_records_once_whatever_retries_it(
        self, svc: SessionAwareness, proxy: CommitDroppingProxy, producer: str
    ) -> None:
        """R-L5, R-L8: the service's own retry and the host's retry of the same call after a
        lost COMMIT answer record nothing more: one event, the next sequence."""
        record = IDEMPOTENT[producer]
        lose_the_commit_answer(proxy, lambda: record(svc))
        assert wait_until(svc.flush_signals)
        assert record(svc) is None  # the host's retry
        assert [sequence for sequence, _ in kinds(svc)] == [1, 2]
        assert svc.session_status(CHILD)["stateVersion"] == 2

    def test_a_spawn_seeds_the_parent_cursor_once(
        self, svc: SessionAwareness, proxy: CommitDroppingProxy
    ) -> None:
        """R-W1: the seeded cursor is the committed spawn's, whatever retried it."""
        other = "agent:main:subagent:other"
        lose_the_commit_answer(
            proxy, lambda: svc.record_child_spawned(other, parent=MANAGER, run_id="run-9")
        )
        assert svc.record_child_spawned(other, parent=MANAGER, run_id="run-9") is None
        rows = svc.read_model.cursors_of_watcher(MANAGER, pending_only=False)
        assert {(r.target_key, r.acknowledged, r.notified, r.material) for r in rows} == {
            (CHILD, 1, 1, 1),
            (other, 1, 1, 1),
        }

    def test_an_idempotent_producer_reports_the_sequence_it_recorded(
        self, svc: SessionAwareness, proxy: CommitDroppingProxy
    ) -> None:
        """R-L8: None means nothing was recorded; a recorded spawn reports its sequence."""
        got = lose_the_commit_answer(
            proxy, lambda: svc.record_child_spawned(CHILD, parent=MANAGER, run_id="run-2")
        )
        assert got == 2

    def test_a_goal_change_is_recorded_once_when_its_commit_answer_is_lost(
        self, svc: SessionAwareness, proxy: CommitDroppingProxy
    ) -> None:
        """R-L8 (Beyond), R-S1: a retried recording is the same signal, not a second one."""
        lose_the_commit_answer(
            proxy, lambda: svc.record_goal_changed(CHILD, summary="goal updated")
        )
        assert wait_until(svc.flush_signals)
        assert kinds(svc) == [(1, "child_spawned"), (2, "goal_changed")]

    def test_a_drain_whose_commit_answer_is_lost_still_hands_the_notice_over(
        self, svc: SessionAwareness, proxy: CommitDroppingProxy
    ) -> None:
        """R-N3, R-N4: every notice the cursor acknowledged reaches the watcher."""
        svc.record_goal_changed(CHILD, summary="goal updated")  # 2: notice "changesSince 1"
        svc.record_goal_changed(CHILD, summary="goal cleared")  # 3: M only
        first = lose_the_commit_answer(proxy, lambda: svc.drain_notices(MANAGER))
        received = (first if isinstance(first, list) else []) + svc.drain_notices(MANAGER)
        assert received[:1] == [notice(CHILD, 1)]


def test_a_batch_whose_commit_answer_is_lost_records_each_of_its_signals_once(
    svc: SessionAwareness, proxy: CommitDroppingProxy
) -> None:
    """R-L8 under group commit (ADR 025): the COMMIT of a batch of several records commits
    and its answer is lost. Every caller keeps its signal with its unconfirmed event; each
    is confirmed as landed, not recorded again. A first record's batch waits on the table
    lock (held by another connection) until its deadline, so the others queue in one batch
    behind it."""
    children = spawned(svc, 4)
    commits = group(svc)
    with write_lock_held(svc) as release:
        first, results = started([record(svc, children[0])])
        assert wait_until(commits.writing)
        rest, more = started([record(svc, child) for child in children[1:]])
        assert wait_until(lambda: commits.queued() == len(rest))
        joined(first)  # its batch ended at the deadline: kept in the backlog
        proxy.arm()
        release()
        joined(rest)
    assert proxy.dropped.is_set(), "no COMMIT answer was lost: the scenario did not happen"
    assert [*results, *more] == [[None]] * 4
    assert commits.largest == len(rest)
    assert wait_until(svc.flush_signals)
    for number, child in enumerate(children):
        assert [sequence for sequence, _ in kinds(svc, child)] == [1, 2]
        assert svc.pending_notices(f"agent:m{number}:main") == [notice(child, 1)]
