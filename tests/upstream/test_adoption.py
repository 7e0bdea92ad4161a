"""Adoption: the `adopted` event and the upstream link written with it (R-U1, R-L5)."""

from __future__ import annotations

from structlog.testing import capture_logs

from session_awareness.application import SessionAwareness
from session_awareness.application.upstream.provider_ports import UpstreamActivity
from tests.contract.helpers import CHILD, MANAGER, spawn
from tests.upstream.fakes import CATALOG, ScriptedProvider, adopt, adopted_child, events, marker


class TestAdoption:
    def test_adopting_records_adopted_by_a_human_and_writes_the_link(
        self, usvc: SessionAwareness
    ) -> None:
        """R-U1, R-L3, R-L5: `adopted from <catalogId>` by a human, with the link beside it."""
        spawn(usvc)
        assert adopt(usvc) == 2
        event = events(usvc, since=1)[0]
        assert event["kind"] == "adopted"
        assert event["actorType"] == "human"
        assert event["summary"] == f"adopted from {CATALOG}"
        assert "payload" not in event
        link = usvc.upstream_link(CHILD)
        assert link is not None
        assert (link["catalogId"], link["threadId"], link["marker"]) == (CATALOG, "thread-1", "m0")
        assert link["generation"] == 1

    def test_adopted_is_log_only(self, usvc: SessionAwareness) -> None:
        """R-L1: `adopted` never notifies the watchers."""
        adopted_child(usvc)
        assert usvc.pending_notices(MANAGER) == []

    def test_adopted_is_recorded_once_per_session(self, usvc: SessionAwareness) -> None:
        """R-L5: adopting again records nothing new but refreshes the link."""
        adopted_child(usvc)
        assert adopt(usvc) is None
        assert [e["kind"] for e in events(usvc)] == ["child_spawned", "adopted"]
        link = usvc.upstream_link(CHILD)
        assert link is not None and link["generation"] == 2

    def test_adopting_the_same_source_again_keeps_the_marker(
        self, usvc: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U1: re-adopting with the same source keeps the scan marker."""
        adopted_child(usvc)
        provider.answers[CHILD] = UpstreamActivity(0, "m7")
        usvc.scan_upstream_once()
        adopt(usvc, marker="other")
        assert marker(usvc) == "m7"

    def test_a_changed_source_rebases_the_marker(
        self, usvc: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U1: a changed source starts from the marker given with it."""
        adopted_child(usvc)
        provider.answers[CHILD] = UpstreamActivity(0, "m7")
        usvc.scan_upstream_once()
        adopt(usvc, thread_id="thread-2", upstream_ref="threads/thread-2", marker=None)
        link = usvc.upstream_link(CHILD)
        assert link is not None
        assert (link["threadId"], link["marker"], link["generation"]) == ("thread-2", None, 2)

    def test_adopting_an_unknown_session_records_nothing(self, usvc: SessionAwareness) -> None:
        """R-L8: an unknown session is not an error; nothing is recorded or linked."""
        with capture_logs() as logs:
            assert adopt(usvc, key="agent:main:nobody") is None
        assert any(e["event"] == "signal_skipped" for e in logs)

    def test_an_invalid_source_is_refused_without_raising(self, usvc: SessionAwareness) -> None:
        """R-L8: a blank catalog id is logged as rejected and nothing is written."""
        spawn(usvc)
        with capture_logs() as logs:
            assert adopt(usvc, catalog_id=" ") is None
        assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["signal_rejected"]
        assert usvc.upstream_link(CHILD) is None

    def test_deleting_the_session_removes_its_link(self, usvc: SessionAwareness) -> None:
        """R-W6: deleting a session removes its upstream link."""
        adopted_child(usvc)
        usvc.delete_session(CHILD)
        assert usvc.read_model.upstream_links() == []
        usvc.open_session(CHILD)
        assert usvc.upstream_link(CHILD) is None
