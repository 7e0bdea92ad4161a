"""The Session aggregate as given/when/then over events: lifecycle, signal log, watcher index.

Given: a session's history, built with commands and reconstructed from its events.
When: one command. Then: the new pending events, their fields, and the session's state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from functools import reduce
from typing import Any

import pytest
from eventsourcing.domain import CanMutateAggregate
from eventsourcing.persistence import DatetimeAsISO, JSONTranscoder, Mapper, UUIDAsHex

from session_awareness.domain.keys import SessionRef
from session_awareness.domain.session import (
    SESSION_KINDS,
    DuplicateSignalError,
    Session,
    SessionStateError,
)
from session_awareness.domain.signals import ActorType, Payload, RunOutcome, SignalKind

PARENT = "agent:main:main"
PEER = "agent:main:peer"
CHILD = SessionRef.of("agent:main:subagent:child")
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
T0_MS = 1_796_029_200_000  # T0 in milliseconds since the epoch


def at(seconds: int) -> datetime:
    """A fixed service-clock instant, `seconds` after T0."""
    return T0 + timedelta(seconds=seconds)


def replay(events: Iterable[CanMutateAggregate[Any]]) -> Session:
    """Reconstruct a session from its events, as the repository would."""
    session = reduce(lambda agg, event: event.mutate(agg), events, None)
    assert isinstance(session, Session)
    return session


def opened(*, kind: str = "subagent", label: str | None = None) -> Session:
    """A freshly opened session for CHILD, with its Opened event still pending."""
    return Session.open(CHILD, kind=kind, label=label, parent_key=None, at=T0)


def human_message(session: Session, *, at: datetime, dedupe_key: str | None = None) -> int:
    """Record a human direct message via telegram (R-L5)."""
    return session.record(
        SignalKind.HUMAN_DIRECT_MESSAGE,
        actor_type=ActorType.HUMAN,
        summary="human message via telegram",
        occurred_at=T0_MS,
        at=at,
        payload=Payload(channel="telegram"),
        dedupe_key=dedupe_key,
    )


def goal_changed(session: Session, *, at: datetime) -> int:
    """Record a goal change by the system (R-L5)."""
    return session.record(
        SignalKind.GOAL_CHANGED,
        actor_type=ActorType.SYSTEM,
        summary="goal updated",
        occurred_at=T0_MS,
        at=at,
    )


def given(*steps: Callable[[Session], object]) -> Session:
    """A session opened, taken through `steps`, and reconstructed from its events."""
    session = opened()
    for step in steps:
        step(session)
    return replay(session.collect_events())


def signals(n: int) -> Callable[[Session], object]:
    """A step recording `n` human messages."""
    return lambda session: [human_message(session, at=at(i)) for i in range(1, n + 1)]


def deleted(session: Session) -> None:
    """A step deleting the session."""
    session.delete(at=at(100))


def watched_by(watcher: str) -> Callable[[Session], object]:
    """A step indexing `watcher` as a watcher of the session."""
    return lambda session: session.add_watcher(watcher, at=at(50))


def session_event(event: object) -> Session.Event:
    """An event read back from the store, checked to be one of the Session aggregate's."""
    assert isinstance(event, Session.Event)
    return event


def state(session: Session) -> dict[str, Any]:
    """Everything the session holds, pending events aside."""
    return {name: value for name, value in vars(session).items() if name != "_pending_events"}


def new_events(session: Session) -> list[str]:
    """The names of the session's new pending events, which are collected (and cleared)."""
    return [type(event).__name__ for event in session.collect_events()]


class TestOpen:
    def test_opening_records_the_sessions_identity_and_an_empty_log(self) -> None:
        """R-K3: a session opens with key, agent, kind, label and parent; its log is empty."""
        session = Session.open(CHILD, kind="subagent", label="researcher", parent_key=PARENT, at=T0)

        [event] = session.collect_events()
        assert isinstance(event, Session.Opened)
        assert (event.agent_id, event.key, event.kind) == ("main", CHILD.key, "subagent")
        assert (event.label, event.parent_key, event.timestamp) == ("researcher", PARENT, T0)
        assert session.id == CHILD.session_id
        assert session.ref == CHILD
        assert (session.state_version, session.pruned_watermark) == (0, 0)
        assert not session.deleted
        assert session.watchers == {}

    @pytest.mark.parametrize("kind", sorted(SESSION_KINDS))
    def test_every_session_kind_of_the_spec_is_accepted(self, kind: str) -> None:
        """R-K3: main, group, cron, hook, node, subagent and other are the session kinds."""
        assert opened(kind=kind).kind == kind

    @pytest.mark.parametrize("kind", ["worker", "Main", "", "main "])
    def test_an_unknown_session_kind_is_refused(self, kind: str) -> None:
        """R-K3: a kind outside the rules' list opens no session."""
        with pytest.raises(SessionStateError, match="invalid session kind"):
            opened(kind=kind)


class TestRecord:
    def test_signals_take_contiguous_sequences_from_1(self) -> None:
        """R-L4: a session's sequences start at 1 and are contiguous, whatever the kind."""
        session = given()

        sequences = [
            human_message(session, at=at(1)),
            goal_changed(session, at=at(2)),
            human_message(session, at=at(3)),
        ]

        events = session.collect_events()
        assert sequences == [1, 2, 3]
        assert [event.sequence for event in events if isinstance(event, Session.Signal)] == [
            1,
            2,
            3,
        ]
        assert session.state_version == 3

    def test_a_signal_event_carries_every_field_of_the_log(self) -> None:
        """R-L2: an event has sequence, kind, actor type and id, run id, time, summary, payload."""
        session = given()

        session.record(
            SignalKind.HUMAN_DIRECT_MESSAGE,
            actor_type=ActorType.HUMAN,
            summary="human message via telegram",
            occurred_at=T0_MS,
            at=at(5),
            actor_id="human:ana",
            run_id="run-7",
            payload=Payload(channel="telegram", turns=3),
            dedupe_key="human:k1",
        )

        [event] = session.collect_events()
        assert isinstance(event, Session.HumanDirectMessage)
        assert event.KIND is SignalKind.HUMAN_DIRECT_MESSAGE
        assert (event.sequence, event.actor_type, event.actor_id) == (1, "human", "human:ana")
        assert (event.run_id, event.occurred_at, event.timestamp) == ("run-7", T0_MS, at(5))
        assert event.summary == "human message via telegram"
        assert event.payload == {"channel": "telegram", "turns": 3}
        assert event.dedupe_key == "human:k1"

    @pytest.mark.parametrize("kind", list(SignalKind))
    def test_each_signal_kind_records_its_own_event(self, kind: SignalKind) -> None:
        """R-L1: every kind of the log is recorded as an event of that kind."""
        session = given()

        session.record(kind, actor_type=ActorType.SYSTEM, summary="s", occurred_at=T0_MS, at=at(1))

        [event] = session.collect_events()
        assert isinstance(event, Session.Signal)
        assert event.KIND is kind

    def test_a_payload_is_stored_without_its_absent_keys(self) -> None:
        """R-L2: the stored payload holds only the keys given, here just the outcome."""
        session = given()

        session.record(
            SignalKind.RUN_FAILED,
            actor_type=ActorType.SYSTEM,
            summary="child run timed out",
            occurred_at=T0_MS,
            at=at(1),
            payload=Payload(outcome=RunOutcome.TIMEOUT),
        )

        [event] = session.collect_events()
        assert isinstance(event, Session.RunFailed)
        assert event.payload == {"outcome": "timeout"}

    def test_a_signal_without_a_payload_stores_none(self) -> None:
        """R-L2: the payload is optional; a signal without one stores none."""
        session = given()

        goal_changed(session, at=at(1))

        [event] = session.collect_events()
        assert isinstance(event, Session.GoalChanged)
        assert event.payload is None

    def test_watcher_events_do_not_advance_the_state_version(self) -> None:
        """R-L4: stateVersion counts signals only; the aggregate version counts every event."""
        session = given(signals(1), watched_by(PARENT), watched_by(PEER))
        assert (session.state_version, session.version) == (1, 4)

        sequence = goal_changed(session, at=at(60))

        assert sequence == 2
        assert (session.state_version, session.version) == (2, 5)

    def test_a_repeated_idempotency_key_is_refused_and_records_nothing(self) -> None:
        """R-L5: an idempotent producer's second report with the same key records nothing."""
        session = given(lambda s: human_message(s, at=at(1), dedupe_key="human:k1"))

        with pytest.raises(DuplicateSignalError, match="human:k1"):
            human_message(session, at=at(2), dedupe_key="human:k1")

        assert session.collect_events() == []
        assert session.state_version == 1
        assert session.has_seen("human:k1")

    def test_signals_without_an_idempotency_key_are_never_duplicates(self) -> None:
        """R-L5: the idempotency key is optional; without one every report is recorded."""
        session = given(signals(1))

        assert human_message(session, at=at(2)) == 2

        assert new_events(session) == ["HumanDirectMessage"]
        assert not session.has_seen(None)

    def test_a_child_spawned_signal_sets_the_parent(self) -> None:
        """R-L5: the spawn edge is recorded on the child by the parent, who becomes its parent."""
        session = given()

        session.record(
            SignalKind.CHILD_SPAWNED,
            actor_type=ActorType.AGENT,
            summary="child session spawned",
            occurred_at=T0_MS,
            at=at(1),
            actor_id=PARENT,
            run_id="run-1",
            dedupe_key="spawn:run-1",
        )

        [event] = session.collect_events()
        assert isinstance(event, Session.ChildSpawned)
        assert (event.actor_type, event.actor_id, event.run_id) == ("agent", PARENT, "run-1")
        assert session.parent_key == PARENT

    def test_recording_on_a_deleted_session_is_refused(self) -> None:
        """R-W6: a deleted session's log takes no signal until its key is opened again."""
        session = given(signals(2), deleted)

        with pytest.raises(SessionStateError, match="deleted"):
            goal_changed(session, at=at(200))

        assert session.collect_events() == []
        assert session.state_version == 2


class TestDelete:
    def test_deleting_raises_the_watermark_to_the_head_and_clears_the_watchers(self) -> None:
        """R-W6: deletion removes the log rows up to the head and every cursor on the target."""
        session = given(signals(3), watched_by(PARENT))

        session.delete(at=at(100))

        [event] = session.collect_events()
        assert isinstance(event, Session.Deleted)
        assert (event.watermark, event.timestamp) == (3, at(100))
        assert session.deleted
        assert session.watchers == {}
        assert (session.state_version, session.pruned_watermark) == (3, 3)

    def test_deleting_a_deleted_session_is_refused(self) -> None:
        """R-K3: a session is deleted once; a second delete records nothing."""
        session = given(signals(1), deleted)

        with pytest.raises(SessionStateError, match="deleted"):
            session.delete(at=at(200))

        assert session.collect_events() == []


class TestReset:
    def test_resetting_keeps_the_history_and_the_watchers(self) -> None:
        """R-W6: a reset removes the cursors the session holds, not its history or its watchers."""
        session = given(signals(2), watched_by(PARENT))

        session.reset(at=at(100))

        assert new_events(session) == ["Reset"]
        assert session.state_version == 2
        assert session.watchers == {PARENT: True}


class TestReopen:
    def test_a_reopened_session_continues_its_sequences(self) -> None:
        """R-L4: after delete and reopen, sequences continue after the old head, never reused."""
        session = given(signals(2), deleted)

        session.reopen(kind="other", label="again", parent_key=PEER, at=at(200))
        sequence = goal_changed(session, at=at(201))

        [reopened, signal] = session.collect_events()
        assert isinstance(reopened, Session.Reopened)
        assert (reopened.kind, reopened.label, reopened.parent_key) == ("other", "again", PEER)
        assert isinstance(signal, Session.GoalChanged)
        assert sequence == signal.sequence == 3
        assert not session.deleted
        assert session.parent_key == PEER

    def test_a_reopened_session_keeps_its_pruned_watermark(self) -> None:
        """R-S3: the rows removed by deletion stay a history gap after the key is opened again."""
        session = given(signals(2), deleted)

        session.reopen(kind="other", label=None, parent_key=None, at=at(200))

        assert new_events(session) == ["Reopened"]
        assert (session.state_version, session.pruned_watermark) == (2, 2)

    def test_reopening_an_open_session_is_refused(self) -> None:
        """R-K3: only a deleted session's key is opened again."""
        session = given(signals(1))

        with pytest.raises(SessionStateError, match="is open"):
            session.reopen(kind="other", label=None, parent_key=None, at=at(200))

        assert session.collect_events() == []


class TestPruneHistory:
    def test_pruning_raises_the_watermark(self) -> None:
        """R-R1: pruning raises the session's watermark to the highest removed sequence."""
        session = given(signals(3))

        session.prune_history(2, at=at(100))

        [event] = session.collect_events()
        assert isinstance(event, Session.HistoryPruned)
        assert event.watermark == 2
        assert (session.state_version, session.pruned_watermark) == (3, 2)

    @pytest.mark.parametrize("watermark", [0, 1, 2])
    def test_pruning_never_lowers_the_watermark(self, watermark: int) -> None:
        """R-R1: a watermark at or below the current one records nothing."""
        session = given(signals(3), lambda s: s.prune_history(2, at=at(50)))

        session.prune_history(watermark, at=at(100))

        assert session.collect_events() == []
        assert session.pruned_watermark == 2

    def test_pruning_past_the_head_is_refused(self) -> None:
        """R-R1: pruning never creates or moves a head, so it cannot go past it."""
        session = given(signals(3))

        with pytest.raises(SessionStateError, match="past the head"):
            session.prune_history(4, at=at(100))

        assert session.collect_events() == []
        assert (session.state_version, session.pruned_watermark) == (3, 0)


class TestWatcherIndex:
    def test_adding_a_watcher_records_it(self) -> None:
        """R-W4: a cursor holder on the session is indexed as one of its watchers."""
        session = given(signals(1))

        session.add_watcher(PARENT, at=at(50))

        [event] = session.collect_events()
        assert isinstance(event, Session.WatcherAdded)
        assert event.watcher == PARENT
        assert session.watchers == {PARENT: True}

    def test_adding_a_known_watcher_records_nothing(self) -> None:
        """R-W2: registering a watcher again is idempotent."""
        session = given(watched_by(PARENT))

        session.add_watcher(PARENT, at=at(60))

        assert session.collect_events() == []
        assert session.watchers == {PARENT: True}

    def test_removing_a_watcher_drops_it(self) -> None:
        """R-W6: an unwatched pair leaves the session's watcher index."""
        session = given(watched_by(PARENT), watched_by(PEER))

        session.remove_watcher(PARENT, at=at(60))

        assert new_events(session) == ["WatcherRemoved"]
        assert session.watchers == {PEER: True}

    def test_removing_an_unknown_watcher_records_nothing(self) -> None:
        """R-W6: removing a watcher that is not indexed is idempotent."""
        session = given(watched_by(PEER))

        session.remove_watcher(PARENT, at=at(60))

        assert session.collect_events() == []
        assert session.watchers == {PEER: True}

    def test_a_deleted_session_refuses_a_new_watcher(self) -> None:
        """R-W6: a deleted session has no watchers, so it takes no new one until reopened."""
        session = given(signals(1), deleted)

        with pytest.raises(SessionStateError):
            session.add_watcher(PARENT, at=at(200))

        assert session.collect_events() == []


class TestReplay:
    def test_replaying_the_events_reconstructs_identical_state(self) -> None:
        """R-R2: replaying a session's events rebuilds exactly the state its commands produced."""
        session = opened()
        human_message(session, at=at(1), dedupe_key="human:k1")
        session.add_watcher(PARENT, at=at(2))
        goal_changed(session, at=at(3))
        session.prune_history(1, at=at(4))
        session.delete(at=at(5))
        session.reopen(kind="other", label=None, parent_key=PEER, at=at(6))
        session.add_watcher(PEER, at=at(7))

        events = session.collect_events()

        assert state(replay(events)) == state(session)

    def test_events_read_back_from_the_event_store_reconstruct_identical_state(self) -> None:
        """R-R2: events stored under explicit topics and read back rebuild the same session."""
        transcoder = JSONTranscoder()
        transcoder.register(UUIDAsHex())
        transcoder.register(DatetimeAsISO())
        mapper: Mapper[Any] = Mapper(transcoder=transcoder)
        session = opened()
        human_message(session, at=at(1), dedupe_key="human:k1")
        session.add_watcher(PARENT, at=at(2))
        events = session.collect_events()

        stored = [mapper.to_stored_event(event) for event in events]
        read_back = [session_event(mapper.to_domain_event(record)) for record in stored]

        assert [record.topic for record in stored] == [
            "session_awareness:Session.Opened",
            "session_awareness:Session.HumanDirectMessage",
            "session_awareness:Session.WatcherAdded",
        ]
        assert state(replay(read_back)) == state(replay(events))
