"""What opening a session does, decided by the domain alone (R-K2, R-K3, R-L4, R-T3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from session_awareness.domain.keys import SessionRef
from session_awareness.domain.session import (
    ParentRefusedError,
    Session,
    default_kind,
    ensure_open,
    open_or_describe,
)
from session_awareness.domain.signals import ActorType, SignalKind

MAIN = SessionRef.of("agent:main:main")
CHILD = SessionRef.of("agent:main:subagent:child")
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def opened(ref: SessionRef, **given: object) -> Session:
    defaults: dict[str, object] = {"kind": None, "label": None, "parent_key": None,
                                   "sandboxed": None, "at": T0}  # fmt: skip
    session, happened = open_or_describe(None, ref, **{**defaults, **given})  # type: ignore[arg-type]
    assert happened == "opened"
    return session


class TestOpenOrDescribe:
    def test_a_new_session_takes_its_kind_from_its_key_unless_given(self) -> None:
        assert opened(MAIN).kind == "main"
        assert opened(CHILD).kind == "subagent"
        assert opened(MAIN, kind="group").kind == "group"

    def test_a_new_sandboxed_session_is_opened_with_its_mark(self) -> None:
        session = opened(CHILD, sandboxed=True)
        assert session.sandboxed
        assert [type(e).__name__ for e in session.pending_events] == ["Opened", "SandboxSet"]

    def test_opening_an_open_session_again_with_nothing_new_changes_nothing(self) -> None:
        session = opened(MAIN, label="lead")
        session.collect_events()
        same, happened = open_or_describe(session, MAIN, kind=None, label=None,
                                          parent_key=None, sandboxed=None, at=at(1))  # fmt: skip
        assert (same, happened) == (session, None)
        assert session.pending_events == []
        assert session.label == "lead"  # what the host left out stays

    def test_what_differs_is_described_and_the_rest_stays(self) -> None:
        session = opened(MAIN, label="lead")
        session.collect_events()
        _, happened = open_or_describe(session, MAIN, kind="group", label=None,
                                       parent_key=None, sandboxed=False, at=at(1))  # fmt: skip
        assert happened == "described"
        assert (session.kind, session.label) == ("group", "lead")

    def test_a_deleted_session_is_opened_again_and_keeps_its_sequences(self) -> None:
        session = opened(CHILD)
        session.record(SignalKind.GOAL_CHANGED, actor_type=ActorType.SYSTEM, summary="goal updated",
                       occurred_at=1, at=at(1))  # fmt: skip
        session.delete(at=at(2))
        again, happened = open_or_describe(session, CHILD, kind=None, label=None,
                                           parent_key=None, sandboxed=None, at=at(3))  # fmt: skip
        assert (again, happened) == (session, "opened")
        assert not session.deleted and session.state_version == 1

    def test_a_second_parent_is_refused(self) -> None:
        session = opened(CHILD, parent_key="agent:main:main")
        with pytest.raises(ParentRefusedError):
            open_or_describe(session, CHILD, kind=None, label=None,
                             parent_key="agent:main:other", sandboxed=None, at=at(1))  # fmt: skip


class TestEnsureOpen:
    def test_the_default_kind_is_subagent_for_a_subagent_key_else_the_callers(self) -> None:
        assert default_kind(CHILD, otherwise="other") == "subagent"
        assert default_kind(MAIN, otherwise="other") == "other"

    def test_an_open_session_is_left_as_it_is(self) -> None:
        session = opened(CHILD)
        session.collect_events()
        assert (
            ensure_open(session, CHILD, kind="other", label=None, parent_key=None, at=at(1))
            is session
        )
        assert session.pending_events == []

    def test_none_becomes_a_new_session_of_the_given_kind(self) -> None:
        session = ensure_open(
            None, CHILD, kind="other", label=None, parent_key="agent:main:main", at=T0
        )
        assert (session.kind, session.parent_key) == ("other", "agent:main:main")
