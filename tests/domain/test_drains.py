"""A watcher's drains and the positions they give its cursors (ADR 024, R-N3), as
given/when/then over events, without a database."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from functools import reduce
from typing import Any

import pytest
from eventsourcing.domain import CanMutateAggregate
from eventsourcing.persistence import DatetimeAsISO, JSONTranscoder, Mapper, UUIDAsHex

from session_awareness.application.invariants import Invariants
from session_awareness.domain import notices
from session_awareness.domain.drains import Acknowledgement, Drains, acknowledgements
from session_awareness.domain.keys import SessionRef, drains_id
from session_awareness.domain.watch import RemovalReason, Via, Watch, WatchStateError

WATCHER = "agent:main:main"
CHILD = SessionRef.of("agent:main:subagent:child")
GROUP = SessionRef.of("agent:main:group:ops")
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def replay(events: Iterable[CanMutateAggregate[Any]]) -> Any:
    return reduce(lambda aggregate, event: event.mutate(aggregate), events, None)


def stored_and_back(event: Any) -> Any:
    """An event or snapshot as a store returns it: encoded, then decoded."""
    transcoder = JSONTranscoder()
    for transcoding in (UUIDAsHex(), DatetimeAsISO()):
        transcoder.register(transcoding)
    codec: Mapper[Any] = Mapper(transcoder=transcoder)
    return codec.to_domain_event(codec.to_stored_event(event))


def pending(target: SessionRef = CHILD, via: Via = Via.SPAWN) -> tuple[Watch, list[Any]]:
    """A cursor started at 1 whose notice opened at 2 (L = 1, N = M = 2), and its events."""
    watch = Watch.start(WATCHER, target, via=via, at_sequence=1, at=at(1))
    watch.observe(2, at=at(2))
    events = watch.collect_events()
    return replay(events), events


class TestADrainGivesTheCursorItsPositions:
    def test_an_acknowledgement_of_the_current_version_is_the_cursors_positions(self) -> None:
        """R-N3: the drain's entry names the version it read; the cursor replayed from its own
        events shows the entry's positions, and its own events are untouched."""
        watch, _ = pending()
        drained = watch.acknowledgement(material=3, at=at(10))
        assert (drained.acknowledged, drained.notified, drained.material) == (2, 3, 3)
        assert drained.version == watch.version and drained.reopened
        assert watch.positions == (1, 2, 2) and watch.pending_events == []
        drains = Drains.record(None, WATCHER, [drained.stored()], at=at(10))
        assert drains.id == drains_id(WATCHER)
        again = replay(stored_and_back(e) for e in drains.collect_events())
        cold, _ = pending()
        found = again.latest_for(cold.id, cold.version)
        assert found == Acknowledgement(cold.id, cold.version, 2, 3, 3, at(10))
        cold.overlay(found)
        assert (cold.acknowledged, cold.notified, cold.material) == (2, 3, 3)
        assert cold.moved_on == at(10)

    def test_a_drain_gives_positions_exactly_when_it_has_an_entry_of_the_version(self) -> None:
        """ADR 024: `gives_positions` (a read that builds nothing) answers whether
        `latest_for` finds the cursor's entry: yes at the version drained, no once the cursor
        stores an event of its own, no for a cursor never drained."""
        watch, _ = pending()
        other, _ = pending(GROUP)
        drained = watch.acknowledgement(material=2, at=at(10))
        drains = Drains.record(None, WATCHER, [drained.stored()], at=at(10))
        for cursor in (watch, other):
            found = drains.latest_for(cursor.id, cursor.version)
            assert drains.gives_positions(cursor.id, cursor.version) is (found is not None)
        assert drains.gives_positions(watch.id, watch.version)
        assert not drains.gives_positions(other.id, other.version)
        watch.overlay(drains.latest_for(watch.id, watch.version))  # type: ignore[arg-type]
        assert watch.observe(3, at=at(11))  # its own event: past the drained version
        assert not drains.gives_positions(watch.id, watch.version)
        assert drains.latest_for(watch.id, watch.version) is None

    def test_a_later_event_of_the_cursor_supersedes_the_drain(self) -> None:
        """R-N2: once the cursor stores an event of its own (here the next notice, opened on
        the drained positions), the drain's entry no longer applies."""
        watch, _ = pending()
        drained = watch.acknowledgement(material=2, at=at(10))
        drains = Drains.record(None, WATCHER, [drained.stored()], at=at(10))
        watch.overlay(drained)
        assert watch.synced
        assert watch.observe(3, at=at(11))
        [opened] = watch.collect_events()
        assert (opened.acknowledged, opened.notified, opened.material) == (2, 3, 3)
        assert watch.drained is None
        assert drains.latest_for(watch.id, watch.version) is None

    def test_a_second_drain_of_one_version_replaces_the_first(self) -> None:
        """R-N3: a drain of a reopened notice, the cursor's own events unchanged, is the
        entry that counts."""
        watch, _ = pending()
        first = watch.acknowledgement(material=3, at=at(10))  # L = 2, reopened at 3
        drains = Drains.record(None, WATCHER, [first.stored()], at=at(10))
        watch.overlay(first)
        second = watch.acknowledgement(material=3, at=at(20))
        assert (second.acknowledged, second.notified, second.version) == (3, 3, first.version)
        Drains.record(drains, WATCHER, [second.stored()], at=at(20))
        assert drains.latest_for(watch.id, watch.version) == second
        assert [type(e).__name__ for e in drains.collect_events()] == ["Started", "Drained"]

    def test_only_a_pending_cursor_is_drained_and_only_at_its_version(self) -> None:
        """R-N3: nothing to acknowledge on a synced cursor; an entry of another version is
        refused."""
        watch, _ = pending()
        drained = watch.acknowledgement(material=2, at=at(10))
        watch.overlay(drained)
        with pytest.raises(WatchStateError):
            watch.acknowledgement(material=2, at=at(11))  # synced now
        cold, _ = pending()
        cold.restart(via=Via.SPAWN, at_sequence=3, at=at(12))
        with pytest.raises(WatchStateError):
            cold.overlay(drained)

    def test_a_removal_keeps_the_cursors_own_positions(self) -> None:
        """R-W6: a removal supersedes the drain; the removed cursor is what its own events
        make it, as a replay from them would."""
        watch, events = pending()
        watch.overlay(watch.acknowledgement(material=2, at=at(10)))
        assert watch.synced
        watch.remove(RemovalReason.UNWATCHED, at=at(11))
        removed = watch.collect_events()
        assert (watch.acknowledged, watch.notified, watch.material) == (1, 2, 2)
        assert vars(replay([*events, *removed])) == vars(watch)

    def test_a_drained_ambient_cursor_is_promoted_with_the_drained_positions(self) -> None:
        """R-W7: the promotion supersedes the drain, so it carries what the drain left."""
        watch, events = pending(GROUP, Via.AMBIENT)
        watch.overlay(watch.acknowledgement(material=3, at=at(10)))
        assert watch.promote(at=at(11))
        [promoted] = watch.collect_events()
        assert type(promoted) is Watch.MadeExplicit
        assert replay([*events, stored_and_back(promoted)]).positions == (2, 3, 3)
        plain, _ = pending(GROUP, Via.AMBIENT)
        assert plain.promote(at=at(11))
        assert [type(e) for e in plain.collect_events()] == [Watch.Promoted]

    def test_a_snapshot_of_a_drained_copy_holds_the_cursors_own_positions(self) -> None:
        watch, _ = pending()
        watch.overlay(watch.acknowledgement(material=3, at=at(10)))
        assert watch.positions == (2, 3, 3)
        restored = stored_and_back(Watch.Snapshot.take(watch)).mutate(None)
        assert restored.positions == (1, 2, 2) and restored.drained is None

    def test_the_drains_come_back_from_their_snapshot(self) -> None:
        """ADR 022, R-N3: the snapshot restores every latest acknowledgement."""
        watch, _ = pending()
        other, _ = pending(GROUP, Via.AMBIENT)
        drained = [watch.acknowledgement(material=3, at=at(10)),
                   other.acknowledgement(material=2, at=at(10))]  # fmt: skip
        drains = Drains.record(None, WATCHER, [a.stored() for a in drained], at=at(10))
        drains.collect_events()
        restored = stored_and_back(Drains.Snapshot.take(drains)).mutate(None)
        assert vars(restored) == vars(drains)
        assert restored.latest_for(watch.id, watch.version) == drained[0]


class TestTheAuditOfDrains:
    def test_a_drain_of_a_version_the_cursor_has_left_is_a_violation(self) -> None:
        """R-N3: the audit follows each entry like an `Acknowledged`; one that names an older
        version of its cursor than the store holds is reported."""
        watch, events = pending()
        stale = watch.acknowledgement(material=2, at=at(10))
        watch = replay(events)
        watch.restart(via=Via.SPAWN, at_sequence=3, at=at(11))
        restarted = watch.collect_events()
        drains = Drains.record(None, WATCHER, [stale.stored()], at=at(12))
        invariants = Invariants()
        for position, event in enumerate([*events, *restarted, *drains.collect_events()], 1):
            invariants.check(position, event)
        assert [(v.rule, v.position) for v in invariants.found] == [("R-N3", 4)]

    def test_a_drain_keeps_the_rules_of_an_acknowledgement(self) -> None:
        watch, events = pending()
        drained = watch.acknowledgement(material=2, at=at(10))
        forged = Acknowledgement(watch.id, drained.version, 1, 2, 2, at(10))  # L not the old N
        drains = Drains.record(None, WATCHER, [forged.stored()], at=at(10))
        [started] = drains.collect_events()
        assert acknowledgements(started) == [forged]
        invariants = Invariants()
        for position, event in enumerate([*events, started], 1):
            invariants.check(position, event)
        assert [(v.rule, v.position) for v in invariants.found] == [("R-N3", 3)]


class TestTheSweepReDeliversAPendingNotice:
    def test_a_re_delivered_notice_has_its_n_raised_to_m_and_its_l_kept(self) -> None:
        """R-N6: as the reference's sweep re-materializes a pending notice, N rises to the
        target's M and L (the notice's text) stays; the entry gives the cursor its positions
        and the audit finds it clean."""
        watch, events = pending()  # L = 1, N = 2; material up to 4 reached it since
        drains, entries = notices.redeliver(None, WATCHER, [(watch, 4)], at=at(10))
        assert [(e.acknowledged, e.notified, e.material) for e in entries] == [(1, 4, 4)]
        assert drains is not None
        stored = [stored_and_back(event) for event in drains.collect_events()]
        assert [type(event) for event in stored] == [Drains.Started, Drains.Redelivered]
        loaded = replay(events)
        loaded.overlay(replay(stored).latest_for(watch.id, watch.version))
        assert loaded.positions == (1, 4, 4) and loaded.notice == watch.notice
        invariants = Invariants()
        for position, event in enumerate([*events, *stored], 1):
            invariants.check(position, event)
        assert invariants.found == []

    def test_its_drain_acknowledges_up_to_m_without_a_follow_up(self) -> None:
        """R-N6, R-N3: after the re-delivery the drain leaves the cursor synced at M."""
        watch, _ = pending()
        _, [entry] = notices.redeliver(None, WATCHER, [(watch, 4)], at=at(10))
        watch.overlay(entry)
        drained = watch.acknowledgement(material=4, at=at(11))
        assert (drained.acknowledged, drained.notified, drained.material) == (4, 4, 4)
        assert not drained.reopened

    def test_a_notice_without_material_past_n_is_left_alone(self) -> None:
        """R-N6: N = M already: nothing to store; a synced cursor is not re-delivered."""
        watch, _ = pending()
        assert notices.redeliver(None, WATCHER, [(watch, 2)], at=at(10)) == (None, [])
        synced = Watch.start(WATCHER, CHILD, via=Via.SPAWN, at_sequence=1, at=at(1))
        with pytest.raises(WatchStateError):
            synced.redelivery(material=3, at=at(10))

    def test_a_re_delivery_that_moves_l_is_a_violation(self) -> None:
        """R-N6: the audit refuses an entry that changes the notice's L."""
        watch, events = pending()
        forged = Acknowledgement(watch.id, watch.version, 2, 4, 4, at(10))
        drains = Drains.redeliver(None, WATCHER, [forged], at=at(10))
        invariants = Invariants()
        for position, event in enumerate([*events, *drains.collect_events()], 1):
            invariants.check(position, event)
        assert [(v.rule, v.position) for v in invariants.found] == [("R-N6", 4)]
