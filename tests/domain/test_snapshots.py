"""Snapshots of sessions and cursors through the JSON transcoder, and the bounded keys a
session keeps itself (R-L5; ADR 022)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from eventsourcing.persistence import DatetimeAsISO, JSONTranscoder, Mapper, UUIDAsHex

from session_awareness.domain.keys import SessionRef
from session_awareness.domain.session import RECENT_KEYS, Session
from session_awareness.domain.signals import ActorType, SignalKind
from session_awareness.domain.snapshots import SnapshotShapeError
from session_awareness.domain.upstream import UpstreamSource
from session_awareness.domain.watch import Via, Watch

AT = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
CHILD = SessionRef.of("agent:main:subagent:child")


def mapper() -> Mapper[Any]:
    transcoder = JSONTranscoder()
    for transcoding in (UUIDAsHex(), DatetimeAsISO()):
        transcoder.register(transcoding)
    return Mapper(transcoder=transcoder)


def stored_and_back(snapshot: Any) -> Any:
    """The snapshot as a store returns it: encoded, then decoded."""
    codec = mapper()
    return codec.to_domain_event(codec.to_stored_event(snapshot))


def human(session: Session, key: str | None) -> int:
    return session.record(
        SignalKind.HUMAN_DIRECT_MESSAGE, actor_type=ActorType.HUMAN, summary="human message",
        occurred_at=1, at=AT, dedupe_key=key,
    )  # fmt: skip


def a_session_with_everything() -> Session:
    session = Session.open(CHILD, kind="subagent", label="child", parent_key=None, at=AT)
    session.add_watcher("agent:main:main", at=AT)
    session.pin(True, at=AT)
    session.note_transcript("claude-code", "transcripts/child.jsonl", at=AT)
    source = UpstreamSource("cat", "host", "thread", "chat", "ref")
    session.link_upstream(source, marker="m1", at=AT)
    for number in range(3):
        human(session, f"human:{number}")
    session.collect_events()
    return session


class TestSnapshots:
    def test_a_session_comes_back_from_its_stored_snapshot_as_it_was(self) -> None:
        session = a_session_with_everything()
        restored = stored_and_back(Session.Snapshot.take(session)).mutate(None)
        assert type(restored) is Session
        assert (restored.id, restored.version) == (session.id, session.version)
        assert vars(restored) == vars(session)
        assert restored.transcript == ("claude-code", "transcripts/child.jsonl")  # a tuple
        assert restored.upstream == session.upstream
        assert restored.has_seen("human:2")
        assert human(restored, "human:3") == session.state_version + 1

    def test_a_cursor_comes_back_from_its_stored_snapshot_as_it_was(self) -> None:
        watch = Watch.start("agent:main:main", CHILD, via=Via.SPAWN, at_sequence=1, at=AT)
        watch.observe(2, at=AT)
        watch.collect_events()
        restored = stored_and_back(Watch.Snapshot.take(watch)).mutate(None)
        assert vars(restored) == vars(watch)
        assert restored.target == CHILD and restored.pending
        assert restored.notice == watch.notice

    def test_a_snapshot_is_stamped_with_the_last_event_not_a_clock(self) -> None:
        session = a_session_with_everything()
        assert Session.Snapshot.take(session).timestamp == session.modified_on

    def test_a_snapshot_of_a_shape_this_version_does_not_know_is_refused(self) -> None:
        snapshot = Session.Snapshot.take(a_session_with_everything())
        snapshot.state["shape"] = Session.SNAPSHOT_SHAPE + 1
        with pytest.raises(SnapshotShapeError):
            snapshot.mutate(None)


class TestTheKeysASessionKeeps:
    def test_a_session_keeps_at_most_its_latest_keys(self) -> None:
        """R-L5: the keys a session holds stay bounded however many it records; the latest
        is always among them (every key ever recorded is the read model's to answer)."""
        session = Session.open(CHILD, kind="subagent", label=None, parent_key=None, at=AT)
        for number in range(3 * RECENT_KEYS + 5):
            human(session, f"human:{number}")
            assert len(session.seen) <= RECENT_KEYS
            assert session.has_seen(f"human:{number}")
        assert not session.has_seen("human:0")
