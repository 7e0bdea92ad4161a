"""Reconciliation: `session_status` with `changesSince` (R-S1–R-S5)."""

from __future__ import annotations

import math

import pytest

from session_awareness.application import (
    InvalidArgumentError,
    InvalidChangesSinceError,
    SessionAwareness,
    UnknownSessionError,
)
from tests.conftest import FakeClock
from tests.contract.helpers import CHILD, MANAGER, cursor, spawn


class TestStatus:
    def test_status_always_reports_the_state_version(self, svc: SessionAwareness) -> None:
        """R-S1: without changesSince only the head is reported; 0 for an empty log."""
        svc.open_session(MANAGER)
        assert svc.session_status(MANAGER) == {"sessionKey": MANAGER, "stateVersion": 0}
        spawn(svc)
        assert svc.session_status(CHILD) == {"sessionKey": CHILD, "stateVersion": 1}

    def test_changes_since_returns_the_exact_delta_in_the_documented_shape(
        self, svc: SessionAwareness
    ) -> None:
        """R-S1, R-S2: events after v, ascending, with only the documented fields."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram", occurred_at=1_764_460_800_000)
        svc.record_goal_changed(CHILD, summary="goal updated", actor_type="human", actor_id="u:7")
        svc.record_run_terminal(CHILD, run_id="run-1", outcome="timeout")
        status = svc.session_status(CHILD, changes_since=1)
        occurred = [event.pop("occurredAt") for event in status["stateChanges"]["events"]]
        assert all(isinstance(value, int) for value in occurred)
        assert status == {
            "sessionKey": CHILD,
            "stateVersion": 4,
            "stateChanges": {
                "events": [
                    {
                        "sequence": 2,
                        "kind": "human_direct_message",
                        "actorType": "human",
                        "summary": "human message via telegram",
                        "payload": {"channel": "telegram"},
                    },
                    {
                        "sequence": 3,
                        "kind": "goal_changed",
                        "actorType": "human",
                        "actorId": "u:7",
                        "summary": "goal updated",
                    },
                    {
                        "sequence": 4,
                        "kind": "run_failed",
                        "actorType": "system",
                        "runId": "run-1",
                        "summary": "child run timed out",
                        "payload": {"outcome": "timeout"},
                    },
                ],
                "truncated": False,
                "earliestAvailableSequence": 1,
                "historyGap": False,
            },
        }

    def test_the_spawn_event_names_its_parent_and_run(self, svc: SessionAwareness) -> None:
        """R-L5, R-S2: child_spawned has actorType agent, actorId = parent key, runId."""
        spawn(svc)
        (event,) = svc.session_status(CHILD, changes_since=0)["stateChanges"]["events"]
        assert event["kind"] == "child_spawned"
        assert (event["actorType"], event["actorId"], event["runId"]) == ("agent", MANAGER, "run-1")
        assert event["summary"] == "child session spawned"
        assert "payload" not in event

    def test_reconciling_never_moves_a_cursor(self, svc: SessionAwareness) -> None:
        """R-S1: session_status never advances any cursor."""
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal created")
        before = cursor(svc, MANAGER, CHILD)
        svc.session_status(CHILD, changes_since=0)
        svc.session_status(CHILD, changes_since=2)
        assert cursor(svc, MANAGER, CHILD) == before
        assert len(svc.pending_notices(MANAGER)) == 1

    def test_a_version_above_the_head_gives_an_empty_page_and_no_gap(
        self, svc: SessionAwareness
    ) -> None:
        """R-S3: v above the head gives an empty page and no gap."""
        spawn(svc)
        changes = svc.session_status(CHILD, changes_since=99)["stateChanges"]
        assert changes["events"] == []
        assert changes["historyGap"] is False
        assert changes["truncated"] is False

    def test_a_long_delta_comes_in_pages_of_two_hundred(self, svc: SessionAwareness) -> None:
        """R-S1, R-R3: at most 200 events per page; `truncated` says more exist."""
        spawn(svc)
        for _ in range(250):
            svc.record_goal_changed(CHILD, summary="goal updated")
        first = svc.session_status(CHILD, changes_since=0)["stateChanges"]
        assert [e["sequence"] for e in first["events"]] == list(range(1, 201))
        assert first["truncated"] is True
        rest = svc.session_status(CHILD, changes_since=200)["stateChanges"]
        assert [e["sequence"] for e in rest["events"]] == list(range(201, 252))
        assert rest["truncated"] is False
        exact = svc.session_status(CHILD, changes_since=51)["stateChanges"]
        assert len(exact["events"]) == 200
        assert exact["truncated"] is False

    def test_a_string_of_digits_is_accepted(self, svc: SessionAwareness) -> None:
        """R-S4: changesSince may be a string of digits such as "12"."""
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal created")
        events = svc.session_status(CHILD, changes_since="1")["stateChanges"]["events"]
        assert [e["sequence"] for e in events] == [2]


class TestBadInput:
    @pytest.mark.parametrize(
        "value",
        [
            -1,
            1.5,
            "abc",
            "-1",
            "1.5",
            "",
            " 1",
            True,
            False,
            math.nan,
            math.inf,
            -math.inf,
            2**53,
            "9007199254740992",
            "9" * 5000,
            object(),
            [1],
            {"v": 1},
        ],
    )
    def test_a_bad_changes_since_is_a_clear_typed_error(
        self, svc: SessionAwareness, value: object
    ) -> None:
        """R-S4: anything but a non-negative integer (or digit string) is refused."""
        spawn(svc)
        with pytest.raises(InvalidChangesSinceError) as raised:
            svc.session_status(CHILD, changes_since=value)
        assert str(raised.value) == "changesSince must be a non-negative integer"

    def test_the_largest_safe_integer_is_accepted(self, svc: SessionAwareness) -> None:
        """R-S4: numbers up to 2^53 − 1 are valid versions."""
        spawn(svc)
        status = svc.session_status(CHILD, changes_since=2**53 - 1)
        assert status["stateChanges"]["events"] == []

    def test_an_unknown_session_is_named_in_the_error(self, svc: SessionAwareness) -> None:
        """R-S4: an unknown session → `Unknown sessionKey: <key>`."""
        with pytest.raises(UnknownSessionError) as raised:
            svc.session_status("agent:main:ghost", changes_since=0)
        assert str(raised.value) == "Unknown sessionKey: agent:main:ghost"

    def test_a_deleted_session_is_unknown(self, svc: SessionAwareness) -> None:
        """R-S4: a deleted session → `Unknown sessionKey: <key>`."""
        spawn(svc)
        svc.delete_session(CHILD)
        with pytest.raises(UnknownSessionError, match=f"^Unknown sessionKey: {CHILD}$"):
            svc.session_status(CHILD)


class TestList:
    def test_rows_carry_the_state_version_only_when_positive(self, svc: SessionAwareness) -> None:
        """R-S5: sessions_list rows carry stateVersion only when it is > 0."""
        spawn(svc)
        rows = {row["sessionKey"]: row for row in svc.sessions_list()}
        assert "stateVersion" not in rows[MANAGER]
        assert rows[CHILD]["stateVersion"] == 1
        assert rows[CHILD]["parentSessionKey"] == MANAGER
        assert rows[CHILD]["kind"] == "subagent"

    def test_rows_can_be_filtered_by_agent_kind_label_and_limit(
        self, svc: SessionAwareness
    ) -> None:
        """R-T1: filters by agent id, kinds, label and limit."""
        svc.open_session(MANAGER, label="Manager")
        svc.open_session("agent:ops:cron", kind="cron")
        svc.open_session("global", agent_id="ops", kind="group")
        assert [r["sessionKey"] for r in svc.sessions_list(agent_id="ops")] == [
            "agent:ops:cron",
            "global",
        ]
        assert [r["sessionKey"] for r in svc.sessions_list(kinds=["cron"])] == ["agent:ops:cron"]
        assert [r["sessionKey"] for r in svc.sessions_list(label="Manager")] == [MANAGER]
        assert len(svc.sessions_list(limit=2)) == 2

    def test_an_offset_reads_a_page_further_down_in_the_same_order(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-O1: the registry rows behind a console page further down skip `offset` rows in
        the order of the first page (newest first), with a search too; an offset that is
        not a non-negative integer is refused, naming the field."""
        for n in range(6):
            svc.open_session(f"agent:main:s{n}", label="even" if n % 2 == 0 else "odd")
            clock.advance(seconds=1)
        everything = [row.key for row in svc.session_rows()]
        assert everything == [f"agent:main:s{n}" for n in range(5, -1, -1)]
        assert [row.key for row in svc.session_rows(limit=2, offset=3)] == everything[3:5]
        assert [row.key for row in svc.session_rows(offset=4)] == everything[4:]
        assert svc.session_rows(limit=3, offset=6) == []
        found = [row.key for row in svc.session_rows(search="S", limit=2, offset=1)]
        assert found == everything[1:3]
        for bad in (-1, True, 1.5, "2"):
            with pytest.raises(InvalidArgumentError) as refused:
                svc.session_rows(offset=bad)  # type: ignore[arg-type]
            assert refused.value.field == "offset"

    def test_active_minutes_keeps_recently_updated_sessions_newest_first(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-T1: activeMinutes filters on the last update; rows come newest first."""
        svc.open_session("agent:main:old")
        clock.advance(minutes=30)
        svc.open_session("agent:main:new")
        clock.advance(minutes=5)
        svc.open_session("agent:main:newest")
        assert [r["sessionKey"] for r in svc.sessions_list(active_minutes=10)] == [
            "agent:main:newest",
            "agent:main:new",
        ]
        assert len(svc.sessions_list()) == 3

    @pytest.mark.parametrize(
        ("field", "arguments"),
        [
            ("limit", {"limit": 0}),
            ("limit", {"limit": True}),
            ("activeMinutes", {"active_minutes": -1}),
        ],
    )
    def test_bad_list_arguments_name_the_field(
        self, svc: SessionAwareness, field: str, arguments: dict[str, object]
    ) -> None:
        """R-T1: invalid input is a typed error naming the field."""
        with pytest.raises(InvalidArgumentError) as raised:
            svc.sessions_list(**arguments)  # type: ignore[arg-type]
        assert raised.value.field == field

    def test_deleted_sessions_are_not_listed(self, svc: SessionAwareness) -> None:
        """R-W6: a deleted session disappears from sessions_list."""
        spawn(svc)
        svc.delete_session(CHILD)
        assert [r["sessionKey"] for r in svc.sessions_list()] == [MANAGER]


class TestKeysOnEntry:
    @pytest.mark.parametrize(
        "key", ['agent:main:"quoted"', "agent:main:tab\there", "agent:main:bell\x07", "", " x"]
    )
    def test_a_key_that_would_break_the_notice_text_is_refused_and_nothing_stored(
        self, svc: SessionAwareness, key: str
    ) -> None:
        """R-N1, R-K1: keys with a double quote or a control character are refused on entry."""
        with pytest.raises(InvalidArgumentError, match="sessionKey"):
            svc.open_session(key)
        assert svc.record_child_spawned(key, parent=MANAGER, run_id="r") is None
        assert svc.sessions_list() == []
