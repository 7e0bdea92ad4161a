"""Who is told, decided by the domain alone: the notice protocol of R-W1–R-W7, R-N1–R-N7 without a
database (R-W1, R-W2, R-W4, R-W5, R-N2, R-N3, R-L6).

Given: a target session and the cursors its audience holds, built with commands. When: one
decision of `domain/notices.py`. Then: the cursors' positions, the notices that opened, the
cursors created and the target's watcher index.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from session_awareness.domain import notices
from session_awareness.domain.keys import SessionRef
from session_awareness.domain.session import Session
from session_awareness.domain.signals import ActorType, SignalKind
from session_awareness.domain.watch import RemovalReason, Via, Watch

PARENT = "agent:main:main"
OTHER = "agent:main:other"
CHILD = SessionRef.of("agent:main:subagent:child")
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def child(parent: str | None = PARENT) -> Session:
    return Session.open(CHILD, kind="subagent", label=None, parent_key=parent, at=at(0))


def human_turn(session: Session, second: int, actor: str | None = None) -> int:
    return session.record(
        SignalKind.HUMAN_DIRECT_MESSAGE,
        actor_type=ActorType.HUMAN,
        summary="Human sent a direct message (channel: api)",
        occurred_at=0,
        at=at(second),
        actor_id=actor,
    )


def spawned(session: Session, parent: str = PARENT) -> tuple[int, Watch]:
    """The spawn edge recorded on the child and the parent's cursor seeded (R-W1)."""
    sequence = session.record(
        SignalKind.CHILD_SPAWNED,
        actor_type=ActorType.AGENT,
        summary="Child session spawned",
        occurred_at=0,
        at=at(1),
        actor_id=parent,
    )
    watch = notices.seed_spawn(session, parent, None, sequence, at=at(1))
    assert watch is not None
    return sequence, watch


def told(
    session: Session, sequence: int, held: dict[str, Watch | None], second: int
) -> notices.Told:
    return notices.tell(session, sequence, held, at=at(second))


def positions(watch: Watch, target: Session | None = None) -> tuple[int, int, int]:
    """The cursor's (L, N, M), M derived from the `target` when it is given (ADR 023)."""
    m = watch.material if target is None else notices.material(watch, target)
    return watch.acknowledged, watch.notified, m


def test_spawn_seeds_the_parents_cursor_at_the_spawn_and_indexes_it() -> None:
    """R-W1: L = N = M = the spawn's sequence; the parent joins the watcher index."""
    session = child()
    sequence, watch = spawned(session)
    assert (watch.watcher, positions(watch), watch.synced) == (PARENT, (1, 1, 1), True)
    assert sequence == 1 and PARENT in session.watchers


def test_spawn_overwrites_an_existing_cursor_even_a_pending_one() -> None:
    """R-W1: the spawn edge overwrites any cursor for the pair."""
    session = child()
    _, watch = spawned(session)
    two = human_turn(session, 2)
    told(session, two, {PARENT: watch}, 2)
    assert watch.pending
    again = session.record(
        SignalKind.CHILD_SPAWNED, actor_type=ActorType.AGENT, summary="Child session spawned",
        occurred_at=0, at=at(3), actor_id=PARENT, run_id="r2",
    )  # fmt: skip
    seeded = notices.seed_spawn(session, PARENT, watch, again, at=at(3))
    assert seeded is watch and positions(watch) == (3, 3, 3) and watch.synced


@pytest.mark.parametrize(
    ("parent", "target"),
    [
        (CHILD.key, CHILD),  # a session is not its own watcher
        ("agent:ops:main", SessionRef("main", "bare")),  # a bare key of another agent (R-W3)
    ],
)
def test_spawn_seeds_no_cursor_the_pair_may_not_hold(parent: str, target: SessionRef) -> None:
    session = Session.open(target, kind="other", label=None, parent_key=None, at=at(0))
    assert notices.seed_spawn(session, parent, None, 1, at=at(1)) is None
    assert parent not in session.watchers


def test_a_synced_cursor_opens_one_notice_and_a_pending_one_only_advances() -> None:
    """R-N2: synced -> N = M = e, one notice; pending -> M = e only, no second notice."""
    session = child()
    _, watch = spawned(session)
    first = told(session, human_turn(session, 2), {PARENT: watch}, 2)
    assert [(o.watcher, o.sequence) for o in first.opened] == [(PARENT, 2)]
    assert positions(watch) == (1, 2, 2)
    for second in range(3, 23):  # twenty rapid changes give one line
        assert told(session, human_turn(session, second), {PARENT: watch}, second).opened == ()
    assert positions(watch, session) == (1, 2, 22) and watch.notice is not None
    assert watch.notice.endswith("changesSince 1.")


def test_worked_example_of_spec_5() -> None:
    """R-N1–R-N7's worked example, through the decision and the drain (R-N2, R-N3)."""
    session = child()
    _, watch = spawned(session)
    for second in (2, 3, 4):
        told(session, human_turn(session, second), {PARENT: watch}, second)
    assert positions(watch, session) == (1, 2, 4)
    assert cast_notice(watch).endswith("changesSince 1.")
    assert notices.acknowledge(watch, session, at=at(5)) is True
    assert positions(watch, session) == (2, 4, 4) and cast_notice(watch).endswith("changesSince 2.")
    assert notices.acknowledge(watch, session, at=at(6)) is False and watch.synced


def cast_notice(watch: Watch) -> str:
    assert watch.notice is not None
    return watch.notice


def test_the_audience_is_the_cursor_holders_then_the_parent() -> None:
    """R-W4: every cursor holder on T, plus T's parent."""
    session = child()
    session.add_watcher(OTHER, at=at(1))
    assert notices.audience(session, actor=None) == [OTHER, PARENT]


def test_a_parent_already_indexed_is_named_once() -> None:
    session = child()
    spawned(session)
    assert notices.audience(session, actor=None) == [PARENT]


def test_a_deleted_parent_is_not_told_and_gets_no_cursor() -> None:
    """R-W4 names a parent that exists: a deleted parent session gets no cursor."""
    session = child()
    assert notices.parent_to_check(session) == PARENT
    assert notices.audience(session, actor=None, parent_deleted=True) == []


def test_the_actor_is_skipped_and_its_cursor_untouched() -> None:
    """R-W5: the watcher whose key is the event's actor is not in the audience; its cursor
    stays where it was, while the others move."""
    session = child()
    _, mine = spawned(session)
    other = notices.register(session, OTHER, None, at=at(1))
    assert other is not None
    sequence = human_turn(session, 2, actor=PARENT)
    audience = notices.audience(session, actor=PARENT)
    assert audience == [OTHER]
    result = told(session, sequence, {OTHER: other}, 2)
    assert [o.watcher for o in result.opened] == [OTHER]
    assert positions(mine) == (1, 1, 1) and positions(other) == (1, 2, 2)


def test_a_parent_without_a_cursor_gets_one_at_zero() -> None:
    """R-W4: the parent without a cursor gets one created with L = 0, and is told."""
    session = child()
    sequence = human_turn(session, 2)
    result = told(session, sequence, {PARENT: None}, 2)
    assert len(result.started) == 1
    started = result.started[0]
    assert sequence == 1
    assert (started.watcher, started.target, positions(started)) == (PARENT, CHILD, (0, 1, 1))
    assert [o.watch for o in result.opened] == [started]
    assert started.notice is not None and started.notice.endswith("changesSince 0.")
    assert PARENT in session.watchers


def test_a_parent_whose_cursor_was_removed_restarts_at_zero() -> None:
    """R-W4 again after a removal: the old cursor restarts at L = 0; nothing new is created."""
    session = child()
    _, watch = spawned(session)
    watch.remove(RemovalReason.EXPIRED, at=at(2))
    session.remove_watcher(PARENT, at=at(2))
    sequence = human_turn(session, 3)
    result = told(session, sequence, {PARENT: watch}, 3)
    assert result.started == () and positions(watch) == (0, sequence, sequence) == (0, 2, 2)
    assert [o.watch for o in result.opened] == [watch]


def test_a_removed_cursor_of_a_non_parent_is_passed_over() -> None:
    """A holder whose cursor went (unwatched) gets no notice and no new cursor."""
    session = child(parent=None)
    watch = notices.register(session, OTHER, None, at=at(1))
    assert watch is not None
    watch.remove(RemovalReason.UNWATCHED, at=at(2))
    result = told(session, human_turn(session, 3), {OTHER: watch}, 3)
    assert result == notices.Told() and not watch.active


def test_a_cursor_ahead_of_the_target_is_a_stale_read() -> None:
    """A cursor at or past the event's sequence means the target copy is older than the
    store: the decision refuses, so the command runs again on fresh state."""
    session = child()
    _, watch = spawned(session)
    watch.observe(5, at=at(2))  # seen by a copy of the target that this one has not caught up to
    with pytest.raises(notices.StaleCursorError, match="ahead of"):
        told(session, human_turn(session, 3), {PARENT: watch}, 3)


def test_registration_starts_at_the_head_and_keeps_an_active_cursor() -> None:
    """R-W2: an explicit watch starts at T's current stateVersion; one already active (even
    pending) is left untouched."""
    session = child(parent=None)
    human_turn(session, 1)
    human_turn(session, 2)
    watch = notices.register(session, OTHER, None, at=at(3))
    assert watch is not None and positions(watch) == (2, 2, 2) and OTHER in session.watchers
    third = human_turn(session, 4)
    told(session, third, {OTHER: watch}, 4)
    assert notices.register(session, OTHER, watch, at=at(5)) is None
    assert positions(watch) == (2, third, third) == (2, 3, 3) and watch.pending


def test_registration_restarts_a_removed_cursor_at_the_head() -> None:
    session = child(parent=None)
    watch = notices.register(session, OTHER, None, at=at(1))
    assert watch is not None
    watch.remove(RemovalReason.UNWATCHED, at=at(2))
    human_turn(session, 3)
    again = notices.register(session, OTHER, watch, at=at(4))
    assert again is watch and watch.active and positions(watch) == (1, 1, 1)
    assert watch.collect_events()[-1].via == Via.WATCH.value  # type: ignore[attr-defined]


def test_a_human_turn_needs_a_parent_or_a_watcher() -> None:
    """R-L6: recorded only when the session has a parent or at least one watcher."""
    orphan = child(parent=None)
    assert not notices.has_audience(orphan)
    orphan.add_watcher(OTHER, at=at(1))
    assert notices.has_audience(orphan)
    assert notices.has_audience(child())


# -- M derived from the target (ADR 023) --------------------------------------------------


def goal_change(session: Session, second: int, actor: str | None) -> int:
    return session.record(
        SignalKind.GOAL_CHANGED, actor_type=ActorType.AGENT, summary="goal updated",
        occurred_at=0, at=at(second), actor_id=actor,
    )  # fmt: skip


def test_the_target_answers_m_for_any_watcher_without_its_own_events() -> None:
    """§4, R-W5: M is the newest notify-eligible event not caused by the watcher; the
    target keeps the newest and the newest by another actor, so it answers everyone."""
    session = child()
    assert session.material_for(PARENT) == 0
    goal_change(session, 2, OTHER)  # 1
    goal_change(session, 3, OTHER)  # 2
    assert (session.material_for(PARENT), session.material_for(OTHER)) == (2, 0)
    human_turn(session, 4)  # 3: no actor, material for everyone
    goal_change(session, 5, PARENT)  # 4
    goal_change(session, 6, PARENT)  # 5
    assert (session.material_for(PARENT), session.material_for(OTHER)) == (3, 5)
    assert session.material_time_for(PARENT) == at(4)
    goal_change(session, 7, OTHER)  # 6
    assert (session.material_for(PARENT), session.material_for(OTHER)) == (6, 5)
    assert session.material_for("agent:main:third") == 6


def test_log_only_and_spawn_events_are_no_material() -> None:
    """R-L1: only notify-eligible kinds move M; a spawn seeds the cursor at its own
    sequence, so M starts there (R-W1)."""
    session = child()
    _, watch = spawned(session)
    session.record(
        SignalKind.COMPACTED, actor_type=ActorType.SYSTEM, summary="session compacted",
        occurred_at=0, at=at(2),
    )  # fmt: skip
    assert session.material_for(PARENT) == 0
    assert notices.material(watch, session) == 1


def test_a_pending_cursors_own_events_leave_its_m_and_a_drain_uses_the_rest() -> None:
    """R-W5, R-N3: the watcher's own events are skipped; the drain reopens at the newest
    event by anyone else."""
    session = child(parent=None)
    session.add_watcher(OTHER, at=at(1))
    watch = Watch.start(OTHER, session.ref, via=Via.WATCH, at_sequence=0, at=at(1))
    for second, actor in ((2, None), (3, None), (4, OTHER), (5, OTHER)):
        sequence = goal_change(session, second, actor)
        watches = dict.fromkeys(notices.audience(session, actor=actor), watch)
        told(session, sequence, watches, second)
    assert positions(watch, session) == (0, 1, 2)
    assert watch.collect_events()[-1].__class__ is Watch.NoticeOpened  # nothing after it
    assert notices.acknowledge(watch, session, at=at(6)) is True
    assert positions(watch, session) == (1, 2, 2)
    assert notices.acknowledge(watch, session, at=at(7)) is False and watch.synced


def test_the_parents_cursor_at_zero_takes_m_from_the_target() -> None:
    """R-W4: the parent without a cursor gets one at L = 0 that opens at the event; later
    events by others move its M on the target alone."""
    session = child()
    one = goal_change(session, 1, OTHER)
    told_once = told(session, one, {PARENT: None}, 1)
    [watch] = told_once.started
    assert positions(watch, session) == (0, 1, 1)
    watch.collect_events()
    for second in (2, 3):
        told(session, goal_change(session, second, OTHER), {PARENT: watch}, second)
    goal_change(session, 4, PARENT)  # the parent's own: it is not in its audience
    assert watch.collect_events() == []
    assert positions(watch, session) == (0, 1, 3)
    assert notices.last_moved(watch, session) == at(3)


def test_a_spawn_overwrite_starts_m_again_at_the_spawn() -> None:
    """R-W1: the seeded cursor's M is the spawn's sequence even though older material
    exists on the target; newer events move it from there."""
    session = child()
    _, watch = spawned(session)
    told(session, human_turn(session, 2), {PARENT: watch}, 2)
    again = session.record(
        SignalKind.CHILD_SPAWNED, actor_type=ActorType.AGENT, summary="Child session spawned",
        occurred_at=0, at=at(3), actor_id=PARENT, run_id="r2",
    )  # fmt: skip
    notices.seed_spawn(session, PARENT, watch, again, at=at(3))
    assert positions(watch, session) == (3, 3, 3)
    told(session, human_turn(session, 4), {PARENT: watch}, 4)
    told(session, human_turn(session, 5), {PARENT: watch}, 5)
    assert positions(watch, session) == (3, 4, 5)


def test_an_old_material_advanced_event_still_replays() -> None:
    """Stores written before ADR 023 hold `MaterialAdvanced` events: replayed, they move M."""
    watch = Watch.start(PARENT, CHILD, via=Via.SPAWN, at_sequence=1, at=at(1))
    watch.observe(2, at=at(2))
    watch.trigger_event(Watch.MaterialAdvanced, timestamp=at(3), acknowledged=1, notified=2,
                        material=3)  # fmt: skip
    events = watch.collect_events()
    replayed = None
    for event in events:
        replayed = event.mutate(replayed)
    assert isinstance(replayed, Watch)
    assert positions(replayed) == (1, 2, 3)
