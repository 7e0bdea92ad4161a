"""A vanished upstream: three missing scans in a row give one `upstream_missing` (R-U4)."""

from __future__ import annotations

from session_awareness.application import SessionAwareness
from session_awareness.application.upstream.provider_ports import UpstreamActivity, UpstreamMissing
from tests.conftest import RecordingWaker
from tests.contract.helpers import CHILD, MANAGER, notice
from tests.upstream.fakes import ScriptedProvider, adopt, adopted_child, events, kinds

MISSING = UpstreamMissing()


def scan(svc: SessionAwareness, provider: ScriptedProvider, *answers: object) -> list[str]:
    """One scan per answer; the outcomes of the child's link, in order."""
    seen: list[str] = []
    for answer in answers:
        provider.answers[CHILD] = answer  # type: ignore[assignment]
        found = svc.scan_upstream_once()
        assert found is not None
        seen.extend(o.outcome for o in found)
    return seen


class TestMissingStreak:
    def test_three_missing_scans_record_one_event_and_remove_the_link(
        self, usvc: SessionAwareness, provider: ScriptedProvider, waker: RecordingWaker
    ) -> None:
        """R-U4: the third consecutive miss records `upstream_missing` by the system, tells
        the watcher, and removes the link; later scans find nothing to probe."""
        adopted_child(usvc)
        outcomes = scan(usvc, provider, MISSING, MISSING, MISSING)
        assert outcomes == ["missing", "missing", "missing_recorded"]
        event = events(usvc)[-1]
        assert event["kind"] == "upstream_missing"
        assert event["actorType"] == "system"
        assert event["summary"] == "upstream missing via fake"
        assert event["payload"] == {"channel": "fake"}
        assert usvc.upstream_link(CHILD) is None
        assert usvc.pending_notices(MANAGER) == [notice(CHILD, 1)]
        assert waker.woken == [MANAGER]
        assert scan(usvc, provider, MISSING) == []
        assert kinds(usvc).count("upstream_missing") == 1

    def test_activity_breaks_the_streak(
        self, usvc: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U4: a scan with human turns starts the count again."""
        adopted_child(usvc)
        scan(usvc, provider, MISSING, MISSING, UpstreamActivity(1, "m1", position="p"))
        assert scan(usvc, provider, MISSING, MISSING) == ["missing", "missing"]
        assert "upstream_missing" not in kinds(usvc)
        assert scan(usvc, provider, MISSING) == ["missing_recorded"]

    def test_an_empty_successful_scan_breaks_the_streak(
        self, usvc: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U4: a successful scan without a missing result starts the count again."""
        adopted_child(usvc)
        scan(usvc, provider, MISSING, MISSING, UpstreamActivity(0, "m0"))
        assert scan(usvc, provider, MISSING, MISSING) == ["missing", "missing"]
        assert "upstream_missing" not in kinds(usvc)

    def test_a_refreshed_link_breaks_the_streak(
        self, usvc: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U4: adopting the session again (a refreshed link) starts the count again."""
        adopted_child(usvc)
        scan(usvc, provider, MISSING, MISSING)
        adopt(usvc)
        assert scan(usvc, provider, MISSING, MISSING) == ["missing", "missing"]
        assert "upstream_missing" not in kinds(usvc)
        assert scan(usvc, provider, MISSING) == ["missing_recorded"]

    def test_leaving_the_watched_set_breaks_the_streak(
        self, usvc: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U4: a link that stops being watched loses its count."""
        adopted_child(usvc)
        scan(usvc, provider, MISSING, MISSING)
        assert usvc.unwatch(MANAGER, CHILD)
        assert scan(usvc, provider, MISSING) == []
        assert usvc.watch(MANAGER, CHILD)
        assert scan(usvc, provider, MISSING, MISSING) == ["missing", "missing"]
        assert "upstream_missing" not in kinds(usvc)

    def test_a_successful_scan_that_finds_nothing_for_the_link_breaks_the_streak(
        self, usvc: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U4: the provider answered and did not say missing (no activity, say an unreadable
        transcript): the count starts again, the link stays, nothing is recorded."""
        adopted_child(usvc)
        assert scan(usvc, provider, MISSING, None, MISSING, MISSING) == [
            "missing", "nothing", "missing", "missing",
        ]  # fmt: skip
        assert "upstream_missing" not in kinds(usvc)
        assert usvc.upstream_link(CHILD) is not None
        assert scan(usvc, provider, MISSING) == ["missing_recorded"]

    def test_a_failing_provider_neither_counts_nor_breaks_the_streak(
        self, usvc: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U2, R-U4: a provider that raises answered nothing: the streak is kept as is."""
        adopted_child(usvc)
        scan(usvc, provider, MISSING, MISSING)
        provider.error = RuntimeError("catalog down")
        assert scan(usvc, provider, MISSING) == ["failed"]
        provider.error = None
        assert scan(usvc, provider, MISSING) == ["missing_recorded"]

    def test_adopting_again_after_missing_creates_a_new_link(
        self, usvc: SessionAwareness, provider: ScriptedProvider
    ) -> None:
        """R-U4: continuing the session from the catalog again links it anew."""
        adopted_child(usvc)
        scan(usvc, provider, MISSING, MISSING, MISSING)
        assert adopt(usvc) is None  # `adopted` stays once per session (R-L5)
        link = usvc.upstream_link(CHILD)
        assert link is not None and (link["generation"], link["marker"]) == (2, "m0")
        assert scan(usvc, provider, MISSING, MISSING) == ["missing", "missing"]
