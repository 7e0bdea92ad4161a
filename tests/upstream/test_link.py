"""The upstream link on the Session aggregate (R-U1, R-U4) and the thread scheduler."""

from __future__ import annotations

import threading

import pytest

from session_awareness.application.upstream.scheduler import ThreadScheduler
from session_awareness.domain.keys import SessionRef
from session_awareness.domain.session import Session
from session_awareness.domain.upstream import (
    InvalidUpstreamError,
    UpstreamChangedError,
    UpstreamSource,
)
from tests.conftest import START

SOURCE = UpstreamSource("fake", "local", "thread-1", "test-thread", "threads/thread-1")


def linked(marker: str | None = "m0") -> Session:
    session = Session.open(
        SessionRef.of("agent:main:main"), kind="main", label=None, parent_key=None, at=START
    )
    session.link_upstream(SOURCE, marker=marker, at=START)
    return session


class TestUpstreamLink:
    def test_linking_again_to_the_same_source_keeps_marker_and_position(self) -> None:
        """R-U1: the same source keeps its place; the generation moves on."""
        session = linked()
        link = session.upstream
        assert link is not None
        session.advance_upstream(link, marker="m5", position="p5", at=START)
        session.link_upstream(SOURCE, marker="ignored", at=START)
        assert session.upstream is not None
        assert (session.upstream.marker, session.upstream.position) == ("m5", "p5")
        assert session.upstream.generation == 2

    def test_writing_over_a_link_that_changed_is_refused(self) -> None:
        """R-U3: a scan's write needs the link it read, not a refreshed one."""
        session = linked()
        read = session.upstream
        assert read is not None
        session.link_upstream(SOURCE, marker=None, at=START)
        with pytest.raises(UpstreamChangedError):
            session.advance_upstream(read, marker="m1", position=None, at=START)
        with pytest.raises(UpstreamChangedError):
            session.unlink_upstream(read, reason="missing", at=START)

    def test_an_unmoved_marker_triggers_no_event(self) -> None:
        """R-U3: advancing to where the link already is records nothing."""
        session = linked()
        assert session.upstream is not None
        before = len(session.pending_events)
        session.advance_upstream(session.upstream, marker="m0", position=None, at=START)
        assert len(session.pending_events) == before

    def test_a_deleted_session_loses_its_link(self) -> None:
        """R-W6: deleting the session removes the link."""
        session = linked()
        session.delete(at=START)
        assert session.upstream is None

    @pytest.mark.parametrize(
        "fields",
        [("", "h", "t", "k", "r"), ("c", "h\n", "t", "k", "r"), ("c", "h", "t", "k", " r")],
    )
    def test_a_source_with_a_blank_or_multi_line_field_is_refused(
        self, fields: tuple[str, str, str, str, str]
    ) -> None:
        """R-U1: every source field is one non-blank line."""
        with pytest.raises(InvalidUpstreamError):
            UpstreamSource(*fields)


class TestThreadScheduler:
    def test_a_call_runs_on_a_timer_thread(self) -> None:
        """R-U2: hosts get a real scheduler; its calls run off the caller's thread."""
        ran = threading.Event()
        ThreadScheduler().call_later(0, ran.set)
        assert ran.wait(timeout=5)

    def test_a_cancelled_call_does_not_run(self) -> None:
        """R-U2: stopping the monitor cancels the pending call."""
        ran = threading.Event()
        ThreadScheduler().call_later(30, ran.set).cancel()
        assert not ran.is_set()
