"""Faults on both backends: commands racing over cursors, a clock that steps, PostgreSQL's
parameter limit, and the smaller promises."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import timedelta
from typing import Any

import pytest
from structlog.testing import capture_logs

from session_awareness.application import InvalidArgumentError, SessionAwareness
from tests.conftest import FakeClock, ServiceFactory
from tests.contract.helpers import CHILD, MANAGER, OTHER, PEER, cursor, notice, spawn
from tests.reliability.helpers import DEADLINE, all_events

WATCHER = "agent:main:watcher"
#: Rounds of resets and deletes raced against a watcher watching and unwatching (before
#: the fix, about one round in six raised on PostgreSQL, one in two hundred on SQLite).
ROUNDS, SLOW_ROUNDS = 60, 1000
#: The watcher's pause between calls, as a caller's turn would: a watcher writing the hot
#: aggregate more often than the other side's attempt lasts starves its optimistic retries
#: (another process, unlike a thread, is not slowed by this one's GIL).
PAUSE, PROCESS_PAUSE = 0.002, 0.02


def race_round(svc: SessionAwareness) -> None:
    """Reset the watcher (its cursors go), then delete and reopen the target (every cursor
    on it goes), while another thread or process watches and unwatches the pair."""
    svc.reset_session(WATCHER)
    svc.delete_session(OTHER)
    svc.open_session(OTHER, kind="subagent")


class TestCursorRaces:
    @pytest.mark.parametrize(
        "rounds", [ROUNDS, pytest.param(SLOW_ROUNDS, marks=pytest.mark.slow, id="long")]
    )
    def test_two_threads(self, svc: SessionAwareness, rounds: int) -> None:
        """A cursor removed between the read-model query and the load is skipped: no
        command raises, however the two threads interleave."""
        svc.open_session(WATCHER)
        svc.open_session(OTHER, kind="subagent")
        stop, errors = threading.Event(), []

        def watcher() -> None:
            while not stop.is_set():
                try:
                    svc.watch(WATCHER, OTHER)
                    svc.unwatch(WATCHER, OTHER)
                except Exception as error:  # noqa: BLE001 -- reported below
                    errors.append(error)
                stop.wait(PAUSE)

        thread = threading.Thread(target=watcher)
        thread.start()
        try:
            for _ in range(rounds):
                race_round(svc)
        finally:
            stop.set()
            thread.join(DEADLINE)
        assert errors == []
        assert cursor(svc, WATCHER, OTHER) in (None, (0, 0, 0))

    def test_a_command_that_keeps_losing_gets_its_turn(self, svc: SessionAwareness) -> None:
        """R-W6: the reset and the delete that remove the pair's cursors cannot be starved
        by a thread writing the hot aggregate without pause:
        after a few lost races a command holds the process's turn and the writer waits
        (before the turn, `delete_session` lost all its attempts on PostgreSQL)."""
        svc.open_session(WATCHER)
        svc.open_session(OTHER, kind="subagent")
        stop, errors, calls = threading.Event(), [], [0]

        def writer() -> None:
            while not stop.is_set():
                try:
                    svc.watch(WATCHER, OTHER)
                    svc.unwatch(WATCHER, OTHER)
                    calls[0] += 1
                except Exception as error:  # noqa: BLE001 -- reported below
                    errors.append(error)

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            for _ in range(30):
                race_round(svc)
        finally:
            stop.set()
            thread.join(DEADLINE)
        assert errors == []
        assert calls[0] > 0

    @pytest.mark.parametrize(
        "rounds", [ROUNDS, pytest.param(SLOW_ROUNDS, marks=pytest.mark.slow, id="long")]
    )
    def test_two_processes(self, svc: SessionAwareness, database_url: str, rounds: int) -> None:
        """The same race with the watcher in another process (on PostgreSQL, another
        pool; on SQLite, another connection to the file)."""
        svc.open_session(WATCHER)
        svc.open_session(OTHER, kind="subagent")
        command = [sys.executable, "-m", "tests.reliability.race_worker"]
        worker = subprocess.Popen(
            [*command, database_url, WATCHER, OTHER, str(PROCESS_PAUSE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert worker.stdout is not None and worker.stdin is not None
            assert json.loads(worker.stdout.readline()) == {"ready": True}
            for _ in range(rounds):
                race_round(svc)
            worker.stdin.close()
            report = json.loads(worker.stdout.readline())
        finally:
            if worker.poll() is None:
                worker.wait(DEADLINE)
        assert report["errors"] == []
        assert report["calls"] > 0


class TestClockSteps:
    def test_a_reading_far_ahead_removes_nothing_and_expires_nothing(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-R1, R-N4: one reading a year ahead records its signal but its prune refuses to
        remove rows or expire cursors (logged); the pending notice survives."""
        spawn(svc)
        svc.open_session(PEER)  # a watcher the service knows (R-L9)
        assert svc.watch(PEER, CHILD)
        svc.record_human_direct_message(CHILD, channel="telegram")
        clock.advance(days=365)
        with capture_logs() as logs:
            assert svc.record_goal_changed(CHILD, summary="goal updated") == 3
            svc.maintain()  # the maintenance's prune (ADR 038)
            result = svc.prune()
        assert result == {"removedRows": 0, "watermarks": [], "expiredCursors": 0}
        refusals = [e for e in logs if e["event"] == "history_prune_refused"]
        assert len(refusals) == 2  # the maintenance's and the one asked for
        assert [e["sequence"] for e in all_events(svc, CHILD)] == [1, 2, 3]
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 1)]
        assert svc.pending_notices(PEER) == [notice(CHILD, 1)]

    def test_a_wrong_reading_does_not_postpone_the_next_prune(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-R1: after a reading a year ahead, the first correct reading prunes at once,
        and retention then holds as usual."""
        spawn(svc)
        start = clock.now
        clock.advance(days=365)
        svc.record_goal_changed(CHILD, summary="goal created")
        svc.maintain()  # prunes (refused) a year ahead
        clock.now = start + timedelta(days=31)
        with capture_logs() as logs:
            svc.record_goal_changed(CHILD, summary="goal updated")
            svc.maintain()
        pruned = [e for e in logs if e["event"] == "history_pruned"]
        assert pruned and pruned[0]["removed_rows"] == 1  # the spawn, 31 days old
        assert svc.session_status(CHILD, changes_since=0)["stateChanges"]["historyGap"] is True

    def test_a_month_later_retention_still_applies(
        self, svc: SessionAwareness, clock: FakeClock
    ) -> None:
        """R-R1 unchanged: a reading 31 days after the newest row prunes it as before."""
        spawn(svc)
        clock.advance(days=31)
        assert svc.prune()["removedRows"] == 1


class TestParameterLimits:
    def test_seventy_thousand_keys_are_one_parameter(self, svc: SessionAwareness) -> None:
        """More visible sessions than PostgreSQL's 65,535 bind parameters (or SQLite's
        32,766): a list of keys is bound as one array, on both backends."""
        spawn(svc)
        keys = [f"agent:main:subagent:k{number}" for number in range(70_000)]
        rows = svc.session_rows(keys=[*keys, CHILD])
        assert [row.key for row in rows] == [CHILD]
        assert svc.children([*keys, MANAGER])[MANAGER] == [CHILD]
        listed = svc.session_rows(kinds=["subagent", "main"], keys=[*keys, CHILD, MANAGER])
        assert {row.key for row in listed} == {CHILD, MANAGER}


class TestSmallerPromises:
    @pytest.mark.parametrize(
        ("filters", "field"),
        [
            ({"limit": 2**63}, "limit"),
            ({"limit": 0}, "limit"),
            ({"active_minutes": float("inf")}, "activeMinutes"),
            ({"active_minutes": float("nan")}, "activeMinutes"),
            ({"kinds": "main"}, "kinds"),
            ({"kinds": ["main", "bogus"]}, "kinds.1"),
            ({"agent_id": 7}, "agentId"),
        ],
    )
    def test_sessions_list_validates_its_filters(
        self, svc: SessionAwareness, filters: dict[str, Any], field: str
    ) -> None:
        with pytest.raises(InvalidArgumentError) as raised:
            svc.sessions_list(**filters)
        assert raised.value.field == field

    def test_search_folds_case_beyond_ascii(self, open_svc: ServiceFactory) -> None:
        svc = open_svc(visibility="all")
        svc.open_session("agent:main:ÉQUIPE", label="Straße")
        svc.open_session("agent:main:other", label="elsewhere")
        found = svc.tools.call("sessions_list", {"search": "équipe"}, caller=MANAGER)
        assert [s["sessionKey"] for s in found["sessions"]] == ["agent:main:ÉQUIPE"]
        found = svc.tools.call("sessions_list", {"search": "STRASSE"}, caller=MANAGER)
        assert [s["sessionKey"] for s in found["sessions"]] == ["agent:main:ÉQUIPE"]
        assert [r.key for r in svc.session_rows(search="E", limit=1)] == ["agent:main:other"]
