"""The Watch aggregate as given/when/then over events: the cursor of one pair
(R-W1–R-W7, R-N1–R-N7).

Given: a cursor's history, built with commands and reconstructed from its events.
When: one command. Then: the new pending events, their positions, and the cursor's state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from functools import reduce
from typing import Any

import pytest
from eventsourcing.domain import CanMutateAggregate
from eventsourcing.persistence import DatetimeAsISO, JSONTranscoder, Mapper, UUIDAsHex

from session_awareness.domain.keys import SessionRef, watch_id
from session_awareness.domain.watch import RemovalReason, Via, Watch, WatchStateError, notice_text

WATCHER = "agent:main:main"
TARGET = SessionRef.of("agent:main:subagent:child")
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def at(seconds: int) -> datetime:
    """A fixed service-clock instant, `seconds` after T0."""
    return T0 + timedelta(seconds=seconds)


def notice(since: int) -> str:
    """The R-N1 notice line for TARGET, spelled out independently of `notice_text`."""
    return (
        'Session "agent:main:subagent:child" changed (other actor). Reconcile before acting: '
        f'session_status sessionKey "agent:main:subagent:child" changesSince {since}.'
    )


def replay(events: Iterable[CanMutateAggregate[Any]]) -> Watch:
    """Reconstruct a cursor from its events, as the repository would."""
    watch = reduce(lambda agg, event: event.mutate(agg), events, None)
    assert isinstance(watch, Watch)
    return watch


def history(
    *,
    start: int = 1,
    via: Via = Via.SPAWN,
    observed: Sequence[int] = (),
    acknowledgements: int = 0,
    removed: bool = False,
) -> list[CanMutateAggregate[Any]]:
    """The events of a cursor started at `start` that then observed and acknowledged."""
    watch = Watch.start(WATCHER, TARGET, via=via, at_sequence=start, at=at(0))
    for sequence in observed:
        watch.observe(sequence, at=at(sequence))
    for n in range(acknowledgements):  # the target's M: the newest event observed
        watch.acknowledge(material=max([start, *observed]), at=at(100 + n))
    if removed:
        watch.remove(RemovalReason.UNWATCHED, at=at(200))
    return list(watch.collect_events())


def given(**story: Any) -> Watch:
    """A cursor reconstructed from the events of `history(**story)`, with nothing pending."""
    return replay(history(**story))


def positions(watch: Watch) -> tuple[int, int, int]:
    """The cursor's (L, N, M)."""
    return watch.acknowledged, watch.notified, watch.material


def moved(event: object) -> tuple[str, int, int, int]:
    """A position event as (type, L, N, M)."""
    assert isinstance(event, Watch.Moved)
    return type(event).__name__, event.acknowledged, event.notified, event.material


def watch_event(event: object) -> Watch.Event:
    """An event read back from the store, checked to be one of the Watch aggregate's."""
    assert isinstance(event, Watch.Event)
    return event


def state(watch: Watch) -> dict[str, Any]:
    """Everything the cursor holds, pending events aside."""
    return {name: value for name, value in vars(watch).items() if name != "_pending_events"}


def event_store_mapper() -> Mapper[Any]:
    """The mapper an eventsourcing Application builds by default (JSON, UUID, datetime)."""
    transcoder = JSONTranscoder()
    transcoder.register(UUIDAsHex())
    transcoder.register(DatetimeAsISO())
    return Mapper(transcoder=transcoder)


class TestStart:
    def test_a_started_cursor_is_synced_at_the_given_sequence(self) -> None:
        """R-W1: a cursor seeded by the spawn edge at s starts synced, L = N = M = s."""
        watch = Watch.start(WATCHER, TARGET, via=Via.SPAWN, at_sequence=1, at=T0)

        [started] = watch.collect_events()
        assert isinstance(started, Watch.Started)
        assert (started.watcher, started.target_id) == (WATCHER, TARGET.session_id)
        assert (started.target_agent_id, started.target_key) == ("main", TARGET.key)
        assert (started.via, started.at_sequence, started.timestamp) == ("spawn", 1, T0)
        assert positions(watch) == (1, 1, 1)
        assert watch.synced
        assert not watch.pending
        assert watch.notice is None

    def test_the_cursor_id_is_derived_from_the_watcher_and_the_target(self) -> None:
        """R-W1: a pair always names the same cursor stream, so seeding it is idempotent."""
        watch = Watch.start(WATCHER, TARGET, via=Via.WATCH, at_sequence=0, at=T0)

        assert watch.id == watch_id(WATCHER, TARGET.session_id)

    def test_a_parent_cursor_started_at_zero_notices_since_zero(self) -> None:
        """R-W4: a parent without a cursor gets one at L = 0, so its notice reads changesSince 0."""
        watch = given(start=0, via=Via.PARENT)

        assert watch.observe(3, at=at(3)) is True

        assert [moved(e) for e in watch.collect_events()] == [("NoticeOpened", 0, 3, 3)]
        assert watch.notice == notice(0)


class TestObserve:
    def test_an_event_on_a_synced_cursor_opens_one_notice(self) -> None:
        """R-N2: on a synced cursor, event e sets N = M = e and opens one notice since L."""
        watch = given(start=1)

        assert watch.observe(2, at=at(2)) is True

        [opened] = watch.collect_events()
        assert moved(opened) == ("NoticeOpened", 1, 2, 2)
        assert opened.timestamp == at(2)
        assert watch.pending
        assert watch.notice == notice(1)

    def test_a_pending_cursor_stores_nothing(self) -> None:
        """R-N2: on a pending cursor, event e moves only M, which is the target's (ADR 023):
        N stays frozen, no second notice, nothing stored."""
        watch = given(start=1, observed=[2])

        assert watch.observe(3, at=at(3)) is False

        assert watch.collect_events() == []
        assert positions(watch) == (1, 2, 2)
        assert watch.notice == notice(1)

    def test_twenty_rapid_changes_give_one_notice(self) -> None:
        """R-N2: twenty notify-eligible events on a synced cursor open exactly one notice."""
        watch = given(start=1)

        opened = [watch.observe(sequence, at=at(sequence)) for sequence in range(2, 22)]

        events = watch.collect_events()
        assert opened == [True] + [False] * 19
        assert [type(e).__name__ for e in events] == ["NoticeOpened"]
        assert positions(watch) == (1, 2, 2)
        assert watch.notice == notice(1)

    @pytest.mark.parametrize("sequence", [1, 2])
    def test_an_event_not_after_material_is_refused(self, sequence: int) -> None:
        """R-N2: an observed sequence must be after the stored M; an earlier or equal one
        records nothing."""
        watch = given(start=1, observed=[2, 3])

        with pytest.raises(WatchStateError, match="not after material position 2"):
            watch.observe(sequence, at=at(9))

        assert watch.collect_events() == []
        assert positions(watch) == (1, 2, 2)

    def test_a_removed_cursor_refuses_to_observe(self) -> None:
        """R-W6: a removed cursor receives no notice and records nothing."""
        watch = given(start=1, removed=True)

        with pytest.raises(WatchStateError, match="removed"):
            watch.observe(2, at=at(2))

        assert watch.collect_events() == []


class TestAcknowledge:
    def test_acknowledging_with_nothing_new_syncs_the_cursor(self) -> None:
        """R-N3: draining sets L = N_old; with M = N_old the pair becomes synced, no new notice."""
        watch = given(start=1, observed=[2])

        assert watch.acknowledge(material=2, at=at(50)) is False

        assert [moved(e) for e in watch.collect_events()] == [("Acknowledged", 2, 2, 2)]
        assert watch.synced
        assert watch.notice is None

    def test_acknowledging_with_newer_material_opens_one_fresh_notice(self) -> None:
        """R-N3: draining with M > N_old sets L = N_old, N = M and opens one notice since L."""
        watch = given(start=1, observed=[2, 3])

        assert watch.acknowledge(material=3, at=at(50)) is True

        assert [moved(e) for e in watch.collect_events()] == [("Acknowledged", 2, 3, 3)]
        assert watch.pending
        assert watch.notice == notice(2)

    def test_acknowledging_without_a_pending_notice_is_refused(self) -> None:
        """R-N3: draining a synced cursor yields nothing and records nothing."""
        watch = given(start=4)

        with pytest.raises(WatchStateError, match="no pending notice"):
            watch.acknowledge(material=4, at=at(50))

        assert watch.collect_events() == []
        assert positions(watch) == (4, 4, 4)

    def test_acknowledging_a_removed_cursor_is_refused(self) -> None:
        """R-W6: a removed cursor's notice is gone, so there is nothing to drain."""
        watch = given(start=1, observed=[2], removed=True)

        with pytest.raises(WatchStateError, match="no pending notice"):
            watch.acknowledge(material=2, at=at(50))

        assert watch.collect_events() == []


class TestWorkedExample:
    """R-N1–R-N7: P spawned C at 1; a human message (2), a goal change (3), a human message (4)."""

    def test_three_changes_after_the_spawn_leave_one_notice_since_1(self) -> None:
        """R-N2 worked example: after events 2, 3, 4 P has one notice, changesSince 1."""
        watch = given(start=1)

        for sequence in (2, 3, 4):
            watch.observe(sequence, at=at(sequence))

        assert [moved(e) for e in watch.collect_events()] == [("NoticeOpened", 1, 2, 2)]
        assert positions(watch) == (1, 2, 2)  # M = 4 is the target's (ADR 023)
        assert watch.notice == notice(1)

    def test_the_first_drain_acknowledges_2_and_reopens_since_2(self) -> None:
        """R-N3 worked example: draining sets L = 2 and, as M = 4 > 2, opens one notice since 2."""
        watch = given(start=1, observed=[2, 3, 4])

        assert watch.acknowledge(material=4, at=at(50)) is True

        assert [moved(e) for e in watch.collect_events()] == [("Acknowledged", 2, 4, 4)]
        assert positions(watch) == (2, 4, 4)
        assert watch.notice == notice(2)

    def test_the_second_drain_syncs_the_cursor_at_4(self) -> None:
        """R-N3 worked example: draining again sets L = 4 and the pair is synced."""
        watch = given(start=1, observed=[2, 3, 4], acknowledgements=1)

        assert watch.acknowledge(material=4, at=at(60)) is False

        assert [moved(e) for e in watch.collect_events()] == [("Acknowledged", 4, 4, 4)]
        assert watch.synced
        assert watch.notice is None

    def test_a_third_drain_is_refused_and_records_nothing(self) -> None:
        """R-N3 worked example: a third drain with nothing new yields nothing."""
        watch = given(start=1, observed=[2, 3, 4], acknowledgements=2)

        with pytest.raises(WatchStateError):
            watch.acknowledge(material=4, at=at(70))

        assert watch.collect_events() == []
        assert positions(watch) == (4, 4, 4)


class TestRestart:
    def test_a_spawn_edge_overwrites_an_active_cursor(self) -> None:
        """R-W1: a spawn edge seeds the cursor at s, overwriting a pending one and its notice."""
        watch = given(start=1, observed=[2, 3, 4])

        watch.restart(via=Via.SPAWN, at_sequence=5, at=at(50))

        [restarted] = watch.collect_events()
        assert isinstance(restarted, Watch.Restarted)
        assert (restarted.via, restarted.at_sequence, restarted.timestamp) == ("spawn", 5, at(50))
        assert (restarted.watcher, restarted.target_id) == (WATCHER, TARGET.session_id)
        assert positions(watch) == (5, 5, 5)
        assert watch.synced
        assert watch.notice is None

    def test_an_explicit_watch_leaves_an_active_cursor_untouched(self) -> None:
        """R-W2: registering a pair that has a cursor is refused; its pending notice survives."""
        watch = given(start=1, observed=[2])

        with pytest.raises(WatchStateError, match="spawn edge"):
            watch.restart(via=Via.WATCH, at_sequence=7, at=at(50))

        assert watch.collect_events() == []
        assert positions(watch) == (1, 2, 2)
        assert watch.notice == notice(1)

    def test_a_removed_cursor_restarts_synced_at_the_given_sequence(self) -> None:
        """R-W2: after removal, a new registration starts synced at the target's head."""
        watch = given(start=1, observed=[2], removed=True)

        watch.restart(via=Via.WATCH, at_sequence=7, at=at(300))

        [restarted] = watch.collect_events()
        assert isinstance(restarted, Watch.Restarted)
        assert (restarted.via, restarted.at_sequence) == ("watch", 7)
        assert watch.active
        assert positions(watch) == (7, 7, 7)
        assert watch.synced


class TestRemove:
    def test_removing_a_pending_cursor_drops_its_notice(self) -> None:
        """R-W6: removing a cursor deactivates it and its pending notice is no longer offered."""
        watch = given(start=1, observed=[2])

        watch.remove(RemovalReason.DELETED, at=at(300))

        [removed] = watch.collect_events()
        assert isinstance(removed, Watch.Removed)
        assert (removed.reason, removed.timestamp) == ("deleted", at(300))
        assert not watch.active
        assert not watch.pending
        assert not watch.synced
        assert watch.notice is None

    def test_removing_a_removed_cursor_is_refused(self) -> None:
        """R-W6: a cursor is removed once; a second removal records nothing."""
        watch = given(start=1, removed=True)

        with pytest.raises(WatchStateError, match="removed"):
            watch.remove(RemovalReason.EXPIRED, at=at(300))

        assert watch.collect_events() == []


class TestNoticeText:
    def test_the_notice_text_is_byte_exact(self) -> None:
        """R-N1: the notice line is exactly the rules' text, byte for byte."""
        text = notice_text("agent:main:subagent:child", 1)

        assert text.encode() == (
            b'Session "agent:main:subagent:child" changed (other actor). Reconcile before acting: '
            b'session_status sessionKey "agent:main:subagent:child" changesSince 1.'
        )

    def test_the_target_key_is_inserted_as_is(self) -> None:
        """R-N1: the key is inserted as is, with no quoting or escaping."""
        text = notice_text('agent:ops:"quoted" ké', 12)

        assert text == (
            'Session "agent:ops:"quoted" ké" changed (other actor). Reconcile before acting: '
            'session_status sessionKey "agent:ops:"quoted" ké" changesSince 12.'
        )

    def test_the_notice_text_stays_byte_identical_while_pending(self) -> None:
        """R-N1: further changes on a pending cursor leave its notice byte-identical."""
        watch = given(start=1, observed=[2])
        before = watch.notice

        for sequence in range(3, 11):
            watch.observe(sequence, at=at(sequence))

        assert before is not None
        assert watch.notice is not None
        assert watch.notice.encode() == before.encode() == notice(1).encode()


class TestReplay:
    STORY: dict[str, Any] = {"start": 1, "observed": [2, 3, 4, 9], "acknowledgements": 2}

    def test_replaying_the_events_reconstructs_identical_state(self) -> None:
        """R-R2: replaying a cursor's events rebuilds exactly the state its commands produced."""
        watch = Watch.start(WATCHER, TARGET, via=Via.SPAWN, at_sequence=1, at=at(0))
        for sequence in (2, 3, 4):
            watch.observe(sequence, at=at(sequence))
        watch.acknowledge(material=4, at=at(50))
        watch.remove(RemovalReason.RESET, at=at(60))
        watch.restart(via=Via.PARENT, at_sequence=0, at=at(70))
        watch.observe(6, at=at(80))

        events = watch.collect_events()

        assert state(replay(events)) == state(watch)
        assert replay(events).notice == watch.notice == notice(0)

    def test_events_read_back_from_the_event_store_reconstruct_identical_state(self) -> None:
        """R-R2: events stored under their explicit topics and read back rebuild the same cursor."""
        mapper = event_store_mapper()
        events = history(**self.STORY)

        stored = [mapper.to_stored_event(event) for event in events]
        read_back = [watch_event(mapper.to_domain_event(record)) for record in stored]

        assert [record.topic for record in stored] == [
            "session_awareness:Watch.Started",
            "session_awareness:Watch.NoticeOpened",
            "session_awareness:Watch.Acknowledged",
            "session_awareness:Watch.Acknowledged",
        ]
        assert state(replay(read_back)) == state(replay(events))
        assert positions(replay(read_back)) == (9, 9, 9)
