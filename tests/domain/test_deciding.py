"""One decision per command (issue 35): a record and a drain each ask the domain once, and its
answer says who is told and who is woken (R-W4, R-W5, R-W7, R-N2, R-N3, R-N5, R-L6).

Given: a target and the cursors its audience holds. When: `notices.needs`, then
`notices.record` or `notices.drain`. Then: what the answer says, with no store.
"""

from __future__ import annotations

import random

from session_awareness.domain import intake as produce
from session_awareness.domain import material, notices
from session_awareness.domain.keys import SessionRef
from session_awareness.domain.positions import RemovalReason, Via
from session_awareness.domain.session import Session
from session_awareness.domain.watch import Watch
from tests.domain.test_notices import PARENT, at, child, spawned

GROUP = SessionRef.of("agent:main:group:room")
MAIN = "agent:main:main"
WATCHER = "agent:main:watcher"


def turn(second: int, actor: str | None = None) -> produce.SignalRequest:
    return produce.human_direct_message(
        channel="api", actor_id=actor, run_id=None, occurred_at=None, idempotency_key=None,
        turns=None, now=at(second),
    )  # fmt: skip


def goal(second: int, actor: str | None) -> produce.SignalRequest:
    return produce.goal_changed(
        summary="goal updated", actor_type="agent", actor_id=actor, now=at(second)
    )


def needs(session: Session, request: produce.SignalRequest) -> notices.Needs:
    return notices.needs(
        session.ref, kind=session.kind, parent=session.parent_key, watchers=session.watchers,
        signal=request.kind, main_key=notices.DEFAULT_MAIN_KEY,
    )  # fmt: skip


def record(
    session: Session, request: produce.SignalRequest, cursors: dict[str, Watch | None], second: int
) -> notices.Recorded:
    wanted = needs(session, request)
    assert set(wanted.cursors) <= set(cursors)
    return notices.record(
        session, request, cursors=cursors, parent=None, main_session=None, main=wanted.main,
        at=at(second),
    )  # fmt: skip


class TestARecord:
    def test_a_human_turn_on_a_group_grants_main_a_quiet_cursor(self) -> None:
        """R-W7: the main session gets an ambient cursor at the group's head, its notice
        opens and is quiet: nobody is woken."""
        group = Session.open(GROUP, kind="group", label=None, parent_key=None, at=at(0))
        request = turn(1)
        assert needs(group, request) == notices.Needs(None, MAIN, (MAIN,))
        recorded = record(group, request, {MAIN: None}, 1)
        assert recorded.sequence == 1 and recorded.granted == MAIN and recorded.head == 0
        (started,) = recorded.started
        assert started.ambient and started.pending
        assert recorded.opened == (notices.Notice(MAIN, wakes=False),)
        assert recorded.wakes == () and recorded.quiet == (started.id,)

    def test_the_actor_is_not_told_and_the_other_watcher_is_woken(self) -> None:
        """R-W5, R-N5: of two synced watchers, the event's actor is passed over and the
        other's notice opens and wakes it."""
        session = child()
        _, parent = spawned(session)
        held = notices.register(session, WATCHER, None, at=at(2))
        assert held is not None
        recorded = record(session, goal(3, WATCHER), {PARENT: parent, WATCHER: held}, 3)
        assert recorded.wakes == (PARENT,) and recorded.quiet == ()
        assert not held.pending and parent.pending
        assert material.caused_by(WATCHER, WATCHER) and not material.caused_by(None, WATCHER)

    def test_a_turn_nobody_would_hear_is_skipped(self) -> None:
        """R-L6: a human turn on a session without a parent or a watcher records nothing."""
        orphan = child(parent=None)
        recorded = record(orphan, turn(1), {}, 1)
        assert recorded == notices.Recorded(None, "no_parent_or_watcher")
        assert orphan.state_version == 0


class TestADrain:
    def test_a_reopened_ambient_notice_is_quiet_and_wakes_nobody(self) -> None:
        """R-N3, R-W7: draining an ambient cursor with newer material reopens its notice,
        which publishes no wake."""
        group = Session.open(GROUP, kind="group", label=None, parent_key=None, at=at(0))
        (cursor,) = record(group, turn(1), {MAIN: None}, 1).started
        record(group, turn(2), {MAIN: cursor}, 2)
        drained = notices.drain(None, MAIN, [(cursor, group.material_for(MAIN))], at=at(3))
        assert drained.drains is not None and drained.reopened == 1
        assert drained.texts == (cursor.notice,)
        assert not drained.wakes and drained.quiet == (cursor.id,)

    def test_nothing_pending_is_nothing_to_save(self) -> None:
        """A cursor gone or synced since the read model named it is passed over."""
        session = child()
        _, parent = spawned(session)
        assert notices.drain(None, PARENT, [(None, 3), (parent, 1)], at=at(2)) == notices.Drained()

    def test_a_drain_decides_each_pair_as_the_cursors_own_acknowledgement_does(self) -> None:
        """R-N3, R-N5, R-W7, ADR 024: over generated cursors (pending, synced, removed, gone,
        ambient, shown with an earlier drain's positions, the target's M behind, at or past
        N), the drain's one pass (`Watch.drain_entry`) answers what the cursor's own
        `acknowledgement` answers for each pending one, in order: the text, the stored
        entry, the reopening, the wake and the quiet cursors; the stored event holds the
        entries exactly."""
        rng = random.Random(39)  # noqa: S311 -- seeded cursors, not secrets
        for case in range(200):
            cursors: list[tuple[Watch | None, int]] = []
            for number in range(rng.randrange(0, 8)):
                if rng.random() < 0.1:
                    cursors.append((None, rng.randrange(0, 9)))
                    continue
                target = SessionRef.of(f"agent:main:subagent:c{case}-{number}")
                via = rng.choice([Via.SPAWN, Via.WATCH, Via.AMBIENT])
                start = rng.randrange(0, 4)
                watch = Watch.start(MAIN, target, via=via, at_sequence=start, at=at(1))
                if rng.random() < 0.8:
                    watch.observe(start + rng.randrange(1, 3), at=at(2))
                    if rng.random() < 0.3:  # shown with an earlier drain's positions
                        watch.overlay(watch.acknowledgement(material=watch.notified + 1, at=at(3)))
                if rng.random() < 0.1:
                    watch.remove(RemovalReason.UNWATCHED, at=at(4))
                cursors.append((watch, rng.randrange(0, start + 5)))
            drained = notices.drain(None, MAIN, cursors, at=at(5))
            pending = [(w, m) for w, m in cursors if w is not None and w.pending]
            expected = [w.acknowledgement(material=m, at=at(5)) for w, m in pending]
            reopened = [w for (w, _), a in zip(pending, expected, strict=True) if a.reopened]
            assert drained.texts == tuple(w.notice for w, _ in pending)
            assert drained.acknowledged == tuple(expected)
            assert drained.entries == tuple(a.stored() for a in expected)
            assert drained.reopened == len(reopened)
            assert drained.wakes == any(not w.ambient for w in reopened)
            assert drained.quiet == tuple(w.id for w in reopened if w.ambient)
            if not pending:
                assert drained == notices.Drained()
                continue
            assert drained.drains is not None
            [started] = drained.drains.collect_events()
            assert started.entries == [a.stored() for a in expected]
