"""A session's history: its whole audit trail from the event store (R-R2, docs/operations.md)."""

from __future__ import annotations

from typing import Any

import pytest

from session_awareness.application import (
    AmbiguousSessionError,
    SessionAwareness,
    UnknownSessionError,
)
from tests.conftest import FakeClock
from tests.contract.helpers import CHILD, MANAGER, PEER, notice, spawn


def cursor_steps(entries: list[dict[str, Any]], watcher: str) -> list[tuple[Any, ...]]:
    """(event, L, N, M, reopened?) of every cursor transition by `watcher`."""
    return [
        (e["event"], *e["cursor"].values(), e.get("reopened"))
        for e in entries
        if e.get("watcher") == watcher and "cursor" in e
    ]


class TestHistory:
    def test_history_keeps_the_signals_retention_pruned_from_changes_since(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-R1, R-R2: pruned rows are gone from changesSince but every signal stays in the
        history, marked pruned, with the prune that raised the watermark."""
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal created")
        svc.record_goal_changed(CHILD, summary="goal updated")
        clock.advance(days=31)
        svc.prune()
        assert svc.session_status(CHILD, changes_since=0)["stateChanges"]["events"] == []
        entries = svc.history(CHILD)
        signals = [
            (e["sequence"], e["kind"], e["pruned"]) for e in entries if e["event"] == "signal"
        ]
        assert signals == [
            (1, "child_spawned", True),
            (2, "goal_changed", True),
            (3, "goal_changed", True),
        ]
        [pruned] = [e for e in entries if e["event"] == "history_pruned"]
        assert pruned["watermark"] == 3

    def test_history_shows_every_cursor_transition_of_a_drain_and_reopen(
        self, svc: SessionAwareness
    ) -> None:
        """R-N2, R-N3: the worked example, step by step: seeded at 1, notice opened at N = 2,
        material advanced to 3 and 4 with N frozen, acknowledged and reopened, then synced."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2
        svc.record_goal_changed(CHILD, summary="goal updated", actor_type="human")  # 3
        svc.record_human_direct_message(CHILD, channel="telegram")  # 4
        svc.drain_notices(MANAGER)
        svc.drain_notices(MANAGER)
        entries = svc.history(CHILD)
        assert cursor_steps(entries, MANAGER) == [
            ("cursor_seeded", 1, 1, 1, None),
            ("notice_opened", 1, 2, 2, None),
            ("material_advanced", 1, 2, 3, None),
            ("material_advanced", 1, 2, 4, None),
            ("acknowledged", 2, 4, 4, True),
            ("acknowledged", 4, 4, 4, False),
        ]
        texts = [e["notice"] for e in entries if "notice" in e]
        assert texts == [notice(CHILD, 1), notice(CHILD, 2)]

    def test_history_interleaves_the_session_and_its_cursors_in_recording_order(
        self, svc: SessionAwareness
    ) -> None:
        """R-R2: entries are ordered by recording position; a notice follows its signal."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")
        entries = svc.history(CHILD)
        positions = [e["position"] for e in entries]
        assert positions == sorted(positions)
        events = [e["event"] for e in entries]
        assert events.index("notice_opened") == events.index("signal", 2) + 1
        assert events[0] == "opened"

    def test_removed_cursors_stay_in_the_history_with_why(self, svc: SessionAwareness) -> None:
        """R-W2, R-W6: an explicit watch, its removal by the watcher's reset, and the cursors
        removed by the target's deletion all remain in the deleted session's history."""
        spawn(svc)
        svc.open_session(PEER)
        assert svc.watch(PEER, CHILD)
        svc.reset_session(PEER)
        svc.delete_session(CHILD)
        entries = svc.history(CHILD)
        cursors = [(e["event"], e["watcher"], e.get("via"), e.get("reason"))
                   for e in entries if e["event"].startswith("cursor")]  # fmt: skip
        assert cursors == [
            ("cursor_seeded", MANAGER, "spawn", None),
            ("cursor_registered", PEER, "watch", None),
            ("cursor_removed", PEER, None, "reset"),
            ("cursor_removed", MANAGER, None, "deleted"),
        ]
        assert any(e["event"] == "deleted" for e in entries)

    def test_a_bare_key_is_found_under_its_only_agent(self, svc: SessionAwareness) -> None:
        """R-K1: a bare key names its session when exactly one agent has it."""
        svc.open_session("global", agent_id="ops")
        svc.record_goal_changed("global", summary="goal created", agent_id="ops")
        assert [e["event"] for e in svc.history("global")] == ["opened", "signal"]

    def test_a_bare_key_shared_by_agents_needs_the_agent_id(self, svc: SessionAwareness) -> None:
        """R-K1, R-W3: ambiguity is a typed error; the agent id settles it."""
        svc.open_session("global", agent_id="ops")
        svc.open_session("global", agent_id="dev")
        with pytest.raises(AmbiguousSessionError):
            svc.history("global")
        assert svc.history("global", agent_id="dev")[0]["event"] == "opened"

    def test_an_unknown_session_has_no_history(self, svc: SessionAwareness) -> None:
        """R-S4: an unknown key is `Unknown sessionKey: <key>`."""
        with pytest.raises(UnknownSessionError, match="Unknown sessionKey: agent:main:nobody"):
            svc.history("agent:main:nobody")
