"""Several gateway processes on one PostgreSQL database (R-L4, R-N2, R-N7)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from session_awareness.application import SessionAwareness, open_service
from session_awareness.domain.keys import SessionRef
from session_awareness.infrastructure.readmodel.bulk import BULK_INLINE
from tests.conftest import RecordingWaker, wait_until
from tests.contract.helpers import CHILD, MANAGER, notice, spawn
from tests.postgres.conftest import Worker

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


class TestConcurrentAppends:
    def test_three_processes_appending_to_one_session_get_contiguous_sequences(
        self, pg_url: str, workers: Callable[..., Worker], tmp_path: Path
    ) -> None:
        """R-L4, R-N2: 3 processes × 150 appends on one session all succeed; sequences are
        unique, contiguous and in commit order; the burst leaves exactly one notice."""
        with open_service(pg_url) as svc:
            spawn(svc)
            go = tmp_path / "go"
            burst = [workers("append", pg_url, CHILD, "150", str(go)) for _ in range(3)]
            for worker in burst:
                worker.read(lambda m: m.get("ready") is True)
            go.touch()
            reported = [w.read(lambda m: "sequences" in m, timeout=240)["sequences"] for w in burst]
            for worker in burst:
                worker.finish()

            recorded = sorted(s for sequences in reported for s in sequences)
            assert recorded == list(range(2, 452))  # none lost, none twice
            for sequences in reported:
                assert sequences == sorted(sequences)  # each process sees its own order
            read_back: list[int] = []
            since = 0
            while True:
                page = svc.session_status(CHILD, changes_since=since)["stateChanges"]
                read_back += [event["sequence"] for event in page["events"]]
                if not page["truncated"]:
                    break
                since = read_back[-1]
            assert read_back == list(range(1, 452))
            assert signal_sequences_in_commit_order(svc) == list(range(1, 452))
            assert svc.pending_notices(MANAGER) == [notice(CHILD, 1)]


def signal_sequences_in_commit_order(svc: SessionAwareness) -> list[int]:
    """The child's signal sequences in notification (commit) order, from the event store."""
    child_id = SessionRef.of(CHILD).session_id
    out: list[int] = []
    for notification in svc.store.recorder.select_notifications(1, 10_000):
        if notification.originator_id == child_id:
            event = svc.store.mapper.to_domain_event(notification)
            if hasattr(event, "sequence"):
                out.append(event.sequence)
    return out


class TestCrossProcessNotices:
    def test_a_notice_opened_in_one_process_wakes_and_is_visible_in_another(
        self, pg_url: str, workers: Callable[..., Worker]
    ) -> None:
        """R-N7: process B sees A's notice at once and B's waker is called through NOTIFY."""
        waker = RecordingWaker()
        with open_service(pg_url, waker=waker) as svc:
            spawn(svc)
            other = workers("listen", pg_url, MANAGER)
            assert other.read(lambda m: m.get("ready") is True)["listener"] == "connected"
            svc.record_human_direct_message(CHILD, channel="telegram")
            woken = other.read(lambda m: "woken" in m)
            assert woken == {"woken": MANAGER, "pending": [notice(CHILD, 1)]}
            assert waker.woken == [MANAGER]
            other.finish()

    def test_a_process_is_not_woken_twice_for_its_own_notice(self, pg_url: str) -> None:
        """R-N5, R-N7: the local wake happens after commit; the process's own NOTIFY is not
        delivered again. Proved with a later notice from another process, which arrives
        through the same listener after the first one."""
        here, there = RecordingWaker(), RecordingWaker()
        with open_service(pg_url, waker=here) as a, open_service(pg_url, waker=there) as b:
            spawn(a)
            spawn(a, child="agent:ops:subagent:x", parent="agent:ops:main", run="r2")
            a.record_goal_changed(CHILD, summary="goal created")
            b.record_goal_changed("agent:ops:subagent:x", summary="goal created")
            assert wait_until(lambda: "agent:ops:main" in here.woken)
            assert here.woken == [MANAGER, "agent:ops:main"]
            assert wait_until(lambda: len(there.woken) == 2)
            assert sorted(there.woken) == [MANAGER, "agent:ops:main"]

    def test_after_the_listener_reconnects_every_pending_watcher_is_woken(
        self, pg_url: str, workers: Callable[..., Worker]
    ) -> None:
        """R-N7: a NOTIFY lost while B's listener was down costs only a late wake: after it
        reconnects, B wakes every watcher with a pending notice."""
        with open_service(pg_url) as svc:
            spawn(svc)
            other = workers("listen", pg_url, MANAGER)
            backend = other.read(lambda m: m.get("ready") is True)["backend_pid"]
            with svc.store.recorder.datastore.transaction(commit=True) as c:  # type: ignore[attr-defined]
                c.execute("SELECT pg_terminate_backend(%s)", (backend,))
            svc.record_goal_changed(CHILD, summary="goal created")
            woken = other.read(lambda m: "woken" in m)
            assert woken == {"woken": MANAGER, "pending": [notice(CHILD, 1)]}
            other.finish()


def test_a_wide_fan_out_wakes_every_watcher_in_another_service(pg_url: str) -> None:
    """R-N7 on the inline bulk path: one save opens notices for more watchers than
    BULK_INLINE, and another service (its own LISTEN connection) is woken for each."""
    watchers = [f"agent:w{number}:main" for number in range(BULK_INLINE + 4)]
    there = RecordingWaker()
    with open_service(pg_url) as a, open_service(pg_url, waker=there) as b:
        spawn(a)
        for watcher in watchers:
            a.open_session(watcher)  # a watcher the service knows (R-L9)
            a.watch(watcher, CHILD)
        a.record_human_direct_message(CHILD, channel="chat")
        assert wait_until(lambda: len(there.woken) == len(watchers) + 1)
        assert sorted(there.woken) == sorted([MANAGER, *watchers])
        assert b.pending_notices(watchers[-1]) == [notice(CHILD, 1)]


@pytest.mark.parametrize("watchers", [1, BULK_INLINE + 4], ids=["one-save", "bulk-save"])
def test_an_ambient_notice_publishes_no_wake_to_another_service(pg_url: str, watchers: int) -> None:
    """R-W7, R-N7: main's ambient notice on a group is not NOTIFYed; the explicit watchers'
    notices of the same save are, so their arrival proves the ambient one was never sent
    (the inline path, and the bulk path of a save with many rows)."""
    team = "agent:main:team"
    explicit = [f"agent:w{number}:main" for number in range(watchers)]
    here, there = RecordingWaker(), RecordingWaker()
    quick = {"wake_coalesce_seconds": 0}  # every wake counted
    with (
        open_service(pg_url, waker=here, **quick) as a,
        open_service(pg_url, waker=there, **quick) as b,
    ):
        a.open_session(team, kind="group")
        for watcher in explicit:
            a.open_session(watcher)
            a.watch(watcher, team)
        a.record_human_direct_message(team, channel="slack")
        assert wait_until(lambda: len(there.woken) == len(explicit))
        assert sorted(there.woken) == sorted(explicit)
        assert sorted(here.woken) == sorted(explicit)
        assert b.pending_notices(MANAGER) == [notice(team, 0)]
        spawn(a)
        a.record_goal_changed(CHILD, summary="goal created")
        assert wait_until(lambda: MANAGER in there.woken)
        assert there.woken.count(MANAGER) == 1  # the spawn cursor's notice, not the ambient one


def test_a_drain_that_reopens_an_ambient_notice_publishes_no_wake(pg_url: str) -> None:
    """R-W7, R-N7, ADR 024: the drain's one event reopens main's ambient notice on a group;
    no NOTIFY goes out for it. A later explicit notice of main's does, once: had the reopen
    been sent, it would have arrived first."""
    team = "agent:main:team"
    there = RecordingWaker()
    quick = {"wake_coalesce_seconds": 0}  # every wake counted
    with (
        open_service(pg_url, waker=RecordingWaker(), **quick) as a,
        open_service(pg_url, waker=there, **quick) as b,
    ):
        a.open_session(team, kind="group")
        a.record_human_direct_message(team, channel="slack")  # 1: the ambient notice
        a.record_human_direct_message(team, channel="slack")  # 2
        assert a.drain_notices(MANAGER) == [notice(team, 0)]  # reopened for 2
        assert b.pending_notices(MANAGER) == [notice(team, 1)]
        spawn(a)
        a.record_goal_changed(CHILD, summary="goal created")
        assert wait_until(lambda: MANAGER in there.woken)
        assert there.woken.count(MANAGER) == 1


@pytest.mark.parametrize("pairs", [1, BULK_INLINE + 4], ids=["one-pair", "many-pairs"])
def test_a_drain_that_reopens_explicit_notices_wakes_another_service_once(
    pg_url: str, pairs: int
) -> None:
    """R-N3, R-N5, ADR 024: a drain's one change for all of its pairs publishes one NOTIFY
    for the notices it reopened (each pair with material past its notice), none for the
    pairs it synced; the other service wakes the watcher."""
    children = [f"agent:main:subagent:n{number}" for number in range(pairs)]
    there = RecordingWaker()
    quick = {"wake_coalesce_seconds": 0}  # every wake counted
    with (
        open_service(pg_url, waker=RecordingWaker(), **quick) as a,
        open_service(pg_url, waker=there, **quick) as b,
    ):
        for number, child in enumerate(children):
            spawn(a, child=child, run=f"run-{number}")
            a.record_human_direct_message(child, channel="chat")  # 2: opens
        assert wait_until(lambda: there.woken.count(MANAGER) == pairs)
        a.record_human_direct_message(children[0], channel="chat")  # 3: past the notice
        assert a.drain_notices(MANAGER) == [notice(child, 1) for child in children]
        assert wait_until(lambda: there.woken.count(MANAGER) == pairs + 1)
        assert b.pending_notices(MANAGER) == [notice(children[0], 2)]
        assert a.drain_notices(MANAGER) == [notice(children[0], 2)]  # synced: no wake
        assert b.pending_notices(MANAGER) == []
        a.record_human_direct_message(children[-1], channel="chat")  # opens: one wake
        assert wait_until(lambda: there.woken.count(MANAGER) >= pairs + 2)
        assert there.woken.count(MANAGER) == pairs + 2  # had the synced drain woken, + 3
