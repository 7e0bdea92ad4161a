"""One event per drain (ADR 024): a drain stores one `Drains` event for all of a watcher's
pairs, every process reads the cursors it drained as drained, and a cursor changed after the
drain read it sends the drain round again (R-N3)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from session_awareness.application import SessionAwareness
from session_awareness.application import projection as p
from session_awareness.application.unit_of_work import UnitOfWork
from session_awareness.domain.drains import Drains
from session_awareness.domain.keys import SessionRef, drains_id, watch_id
from session_awareness.infrastructure.readmodel.bulk import BulkWrites
from tests.conftest import RecordingWaker, ServiceFactory
from tests.contract.helpers import CHILD, MANAGER, OTHER, PEER, cursor, notice, spawn

CHILDREN = [f"agent:main:subagent:c{n}" for n in range(20)]


def stored(svc: SessionAwareness) -> int:
    """How many events the store holds (its newest notification id)."""
    return svc.store.recorder.max_notification_id() or 0


def versions(svc: SessionAwareness, aggregate_id: Any) -> list[int]:
    return [e.originator_version for e in svc.store.repository.event_store.get(aggregate_id)]


@contextmanager
def before_the_drain_saves(action: Callable[[], object]) -> Iterator[list[int]]:
    """Run `action` once, inside the next drain's first attempt, after it read the cursors
    and before it saves: another command committing in between. Yields the attempts made."""
    record = Drains.record
    attempts: list[int] = []

    def racing(*args: Any, **kwargs: Any) -> Drains:
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            action()
        return record(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Drains, "record", racing)
        yield attempts


class TestOneEventPerDrain:
    def test_a_drain_of_twenty_pairs_stores_one_event_and_no_cursor_event(
        self, svc: SessionAwareness
    ) -> None:
        """R-N3: twenty pending notices, half of them with newer material, drain in one
        stored event; the cursors' own streams are untouched; the rows show each pair
        acknowledged, the ones with newer material reopened."""
        for index, child in enumerate(CHILDREN):
            spawn(svc, child=child, run=f"run-{index}")
            svc.record_human_direct_message(child, channel="telegram")  # 2: opens
            if index % 2:
                svc.record_human_direct_message(child, channel="telegram")  # 3
        cursors = [watch_id(MANAGER, SessionRef.of(child).session_id) for child in CHILDREN]
        before, streams = stored(svc), [versions(svc, wid) for wid in cursors]
        texts = svc.drain_notices(MANAGER)
        assert texts == [notice(child, 1) for child in CHILDREN]
        assert stored(svc) == before + 1
        assert [versions(svc, wid) for wid in cursors] == streams
        assert versions(svc, drains_id(MANAGER)) == [1]
        for index, child in enumerate(CHILDREN):
            assert cursor(svc, MANAGER, child) == ((2, 3, 3) if index % 2 else (2, 2, 2))
        assert svc.pending_notices(MANAGER) == [notice(c, 2) for c in CHILDREN[1::2]]
        svc.drain_notices(MANAGER)
        assert versions(svc, drains_id(MANAGER)) == [1, 2]
        assert svc.pending_notices(MANAGER) == []
        assert svc.audit().clean

    def test_a_drained_cursor_opens_its_next_notice_after_a_restart(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-N2, R-N3, R-N6: a restarted service loads the cursor from its own events and
        the watcher's drain: synced, so the next record opens one notice, at the drained L."""
        svc = open_svc()
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2
        svc.record_human_direct_message(CHILD, channel="telegram")  # 3
        svc.drain_notices(MANAGER)  # L = 2, reopened at 3
        svc.drain_notices(MANAGER)  # synced at 3
        svc.close()
        again = open_svc()
        assert again.pending_notices(MANAGER) == []
        again.record_human_direct_message(CHILD, channel="telegram")  # 4: opens
        assert cursor(again, MANAGER, CHILD) == (3, 4, 4)
        assert again.pending_notices(MANAGER) == [notice(CHILD, 3)]
        assert again.audit().clean

    def test_another_process_that_cached_the_cursor_pending_sees_the_drain(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-N2: a second service holds the cursor as pending in its cache (and the watcher
        as never drained); after the first drains it, a record in the second opens the next
        notice, before and after the watcher's drains exist."""
        first, second = open_svc(), open_svc()
        spawn(first)
        first.record_human_direct_message(CHILD, channel="telegram")  # 2: opens
        second.record_human_direct_message(CHILD, channel="telegram")  # 3: pending, cached
        first.drain_notices(MANAGER)  # L = 2, reopened at 3
        first.drain_notices(MANAGER)  # synced at 3
        second.record_human_direct_message(CHILD, channel="telegram")  # 4: opens
        assert cursor(second, MANAGER, CHILD) == (3, 4, 4)
        first.drain_notices(MANAGER)  # synced at 4
        second.record_human_direct_message(CHILD, channel="telegram")  # 5: opens
        assert second.pending_notices(MANAGER) == [notice(CHILD, 4)]
        assert first.pending_notices(MANAGER) == [notice(CHILD, 4)]
        assert second.audit().clean

    def test_the_history_shows_each_drained_pair_as_acknowledged(
        self, svc: SessionAwareness
    ) -> None:
        """R-N3, R-R2: a drain's one event reads, in each target's history, as the
        acknowledged step of the pair on it, reopened or not."""
        spawn(svc)
        spawn(svc, child=OTHER, run="run-2")
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2
        svc.record_human_direct_message(CHILD, channel="telegram")  # 3
        svc.record_human_direct_message(OTHER, channel="telegram")  # 2
        svc.drain_notices(MANAGER)
        steps = [
            (e["event"], *e["cursor"].values(), e.get("reopened"))
            for e in svc.history(CHILD)
            if e.get("watcher") == MANAGER and "cursor" in e
        ]
        assert steps == [
            ("cursor_seeded", 1, 1, 1, None),
            ("notice_opened", 1, 2, 2, None),
            ("material_advanced", 1, 2, 3, None),
            ("acknowledged", 2, 3, 3, True),
        ]
        other = [e for e in svc.history(OTHER) if e["event"] == "acknowledged"]
        assert [(e["watcher"], *e["cursor"].values(), e["reopened"]) for e in other] == [
            (MANAGER, 2, 2, 2, False)
        ]

    def test_a_notice_the_drain_reopens_wakes_its_watcher_once(
        self, open_svc: ServiceFactory, waker: RecordingWaker
    ) -> None:
        """R-N3, R-N5: the reopened notice wakes the watcher after the drain commits; a
        drain that reopens nothing wakes nobody."""
        svc = open_svc(wake_coalesce_seconds=0)
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2: opens, a wake
        svc.record_human_direct_message(CHILD, channel="telegram")  # 3: pending, none
        assert waker.woken == [MANAGER]
        assert svc.drain_notices(MANAGER) == [notice(CHILD, 1)]  # reopened at 3
        assert waker.woken == [MANAGER, MANAGER]
        assert svc.drain_notices(MANAGER) == [notice(CHILD, 2)]  # synced
        assert waker.woken == [MANAGER, MANAGER]


class TestADrainThatRacesAnotherCommand:
    def test_a_cursor_removed_after_the_drain_read_it_sends_the_drain_round_again(
        self, svc: SessionAwareness
    ) -> None:
        """R-N3, R-W6: the removal commits between the drain's read and its save; the save
        is refused and the drain runs again without the removed pair."""
        spawn(svc)
        svc.open_session(PEER)
        assert svc.watch(PEER, CHILD)
        assert svc.watch(PEER, MANAGER)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2: opens
        svc.record_human_direct_message(MANAGER, channel="telegram")  # 1: opens
        with before_the_drain_saves(lambda: svc.unwatch(PEER, CHILD)) as attempts:
            assert svc.drain_notices(PEER) == [notice(MANAGER, 0)]
        assert attempts == [1, 2]
        assert cursor(svc, PEER, CHILD) is None
        assert cursor(svc, PEER, MANAGER) == (1, 1, 1)
        assert svc.audit().clean

    def test_a_spawn_edge_that_restarts_the_cursor_sends_the_drain_round_again(
        self, svc: SessionAwareness
    ) -> None:
        """R-W1: a new spawn edge sets the parent's cursor again after the drain read it;
        the drain runs again on the restarted cursor, which has nothing pending."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2: opens

        def respawn() -> None:
            svc.record_child_spawned(CHILD, parent=MANAGER, run_id="run-2")  # 3: restarts

        with before_the_drain_saves(respawn) as attempts:
            assert svc.drain_notices(MANAGER) == []
        assert attempts == [1]  # the second attempt found nothing pending to drain
        assert cursor(svc, MANAGER, CHILD) == (3, 3, 3)
        assert svc.audit().clean

    def test_a_record_after_the_drain_read_m_sends_the_drain_round_again(
        self, svc: SessionAwareness
    ) -> None:
        """R-N3, ADR 023: the drain would sync the cursor at the M it read; a record that
        committed meanwhile moved M, so the save is refused and the drain reopens."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2: opens

        def record() -> None:
            svc.record_human_direct_message(CHILD, channel="telegram")  # 3

        with before_the_drain_saves(record) as attempts:
            assert svc.drain_notices(MANAGER) == [notice(CHILD, 1)]
        assert attempts == [1, 2]
        assert cursor(svc, MANAGER, CHILD) == (2, 3, 3)
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 2)]
        assert svc.audit().clean

    def test_an_ambient_cursor_promoted_after_a_drain_keeps_the_drained_positions(
        self, svc: SessionAwareness
    ) -> None:
        """R-W7: a drained ambient cursor made an explicit watch keeps what the drain left,
        in this process and after a replay."""
        group = "agent:main:group:ops"
        svc.open_session(MANAGER)
        svc.open_session(group, kind="group")
        svc.record_human_direct_message(group, channel="slack")  # 1: ambient grant, opens
        svc.record_human_direct_message(group, channel="slack")  # 2
        assert svc.drain_notices(MANAGER) == [notice(group, 0)]  # L = 1, reopened at 2
        assert svc.watch(MANAGER, group)  # promoted, positions kept
        assert cursor(svc, MANAGER, group) == (1, 2, 2)
        assert svc.drain_notices(MANAGER) == [notice(group, 1)]
        assert cursor(svc, MANAGER, group) == (2, 2, 2)
        assert svc.audit().clean


class TestADrainReadsItsCursorsTogether:
    def test_each_cursor_reads_as_it_reads_alone_whatever_the_cache_holds(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-N3, ADR 024: a drain reads all of its watcher's cursors with one look at the
        watcher's `Drains` (`cursors_to_read`), and each reads as `cursor_to_read` reads it
        alone: one cached pending, one a drain reopened (its positions the drain's), one a
        drain synced, one another process changed (stale here), and one that never was."""
        first, second = open_svc(), open_svc()
        children = [f"agent:main:subagent:r{n}" for n in range(4)]
        for index, child in enumerate(children):
            spawn(first, child=child, run=f"run-{index}")
            first.record_human_direct_message(child, channel="telegram")  # 2: opens
        first.record_human_direct_message(children[1], channel="telegram")  # 3
        first.record_human_direct_message(children[3], channel="telegram")  # 3
        first.drain_notices(MANAGER)  # r1 and r3 reopened at 3, r0 and r2 synced at 2
        first.record_human_direct_message(children[0], channel="telegram")  # 3: opens
        second.record_human_direct_message(children[2], channel="telegram")  # 3: opens
        wids = [watch_id(MANAGER, SessionRef.of(child).session_id) for child in children]
        wids.append(watch_id(MANAGER, SessionRef.of(OTHER).session_id))

        def shown(watch: Any) -> Any:
            return None if watch is None else (watch.positions, watch.pending, watch.version)

        together = UnitOfWork(first.store).cursors_to_read(MANAGER, wids)
        alone = [UnitOfWork(first.store).cursor_to_read(wid) for wid in wids]
        assert [shown(w) for w in together] == [shown(w) for w in alone]
        assert [shown(w) for w in together][:4] == [
            ((2, 3, 3), True, 3), ((2, 3, 3), True, 2), ((2, 3, 3), True, 3),
            ((2, 3, 3), True, 2),
        ]  # fmt: skip
        assert together[4] is None
        reopened_first = [children[1], children[3], children[0], children[2]]
        assert first.drain_notices(MANAGER) == [notice(child, 2) for child in reopened_first]
        assert first.audit().clean


@contextmanager
def race_checks() -> Iterator[list[int]]:
    """The drained pairs the saves' check for a cursor changed after the drain read it is
    given (`BulkWrites.check_cursors_held`), one count per save."""
    check = BulkWrites.check_cursors_held
    counts: list[int] = []

    def counting(self: BulkWrites, c: Any, changes: Any) -> None:
        drained = [ch for ch in changes if type(ch) is p.CursorsAcknowledged]
        counts.append(sum(len(ch.entries) for ch in drained))
        check(self, c, changes)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BulkWrites, "check_cursors_held", counting)
        yield counts


class TestTheRaceChecksOfADrain:
    def test_a_drain_no_other_save_came_between_checks_nothing(self, svc: SessionAwareness) -> None:
        """R-N3, ADR 024: the drain looked at the log before its reads and its event is the
        next one stored, so no save can have changed its cursors or their M: its two race
        checks are skipped, and what it leaves is what the checked drain left."""
        for index, child in enumerate(CHILDREN[:3]):
            spawn(svc, child=child, run=f"run-{index}")
            svc.record_human_direct_message(child, channel="telegram")  # 2: opens
        svc.record_human_direct_message(CHILDREN[0], channel="telegram")  # 3
        with race_checks() as counts:
            assert svc.drain_notices(MANAGER) == [notice(c, 1) for c in CHILDREN[:3]]
        assert sum(counts) == 0
        assert [cursor(svc, MANAGER, c) for c in CHILDREN[:3]] == [
            (2, 3, 3), (2, 2, 2), (2, 2, 2),
        ]  # fmt: skip
        assert svc.audit().clean

    def test_a_drain_another_save_came_before_checks_each_pair(self, svc: SessionAwareness) -> None:
        """R-N3, ADR 024: a save of another command committed between the drain's reads and
        its save (here on an unrelated session): the drain's pairs are checked, pass, and
        the drain lands in its first attempt."""
        for index, child in enumerate(CHILDREN[:3]):
            spawn(svc, child=child, run=f"run-{index}")
            svc.record_human_direct_message(child, channel="telegram")  # 2: opens
        with (
            race_checks() as counts,
            before_the_drain_saves(lambda: svc.open_session(PEER)) as attempts,
        ):
            assert svc.drain_notices(MANAGER) == [notice(c, 1) for c in CHILDREN[:3]]
        assert attempts == [1]
        assert sum(counts) == 3
        assert svc.audit().clean
