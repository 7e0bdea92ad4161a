"""session_awareness.testing: the doubles and the pytest plugin a host's tests use, run the way
a host runs them (pytest on a test file of its own, the plugin found by its entry point)."""

from __future__ import annotations

import importlib.metadata
import re
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from session_awareness.testing import START, FakeClock, RecordingWaker, wait_until

HOST_TESTS = """
from datetime import timedelta

MANAGER, WORKER = "agent:main:main", "agent:main:subagent:worker"


def story(svc, waker):
    svc.open_session(MANAGER)
    svc.record_child_spawned(WORKER, parent=MANAGER, run_id="run-1")
    svc.record_human_direct_message(WORKER, channel="telegram")
    assert waker.woken == [MANAGER]
    [notice] = svc.drain_notices(MANAGER)
    assert notice.endswith("changesSince 1.")


def test_on_sqlite(awareness_service, awareness_waker, awareness_clock, tmp_path):
    story(awareness_service, awareness_waker)
    assert (tmp_path / "session-awareness.db").is_file()
    before = awareness_service.sessions_list()[0]["updatedAt"]
    awareness_clock.advance(minutes=5)
    awareness_service.record_goal_changed(WORKER, summary="goal updated")
    assert awareness_service.sessions_list()[0]["updatedAt"] == before + 300_000


def test_each_test_gets_a_fresh_store(awareness_service):
    assert awareness_service.sessions_list() == []
"""

POSTGRES_TESTS = """
def test_on_postgres(awareness_postgres_service, awareness_waker):
    svc = awareness_postgres_service
    svc.open_session("agent:main:main")
    svc.record_child_spawned("agent:main:subagent:w", parent="agent:main:main", run_id="r")
    svc.record_human_direct_message("agent:main:subagent:w", channel="telegram")
    assert svc.health()["backend"] == "postgresql"
    assert awareness_waker.woken == ["agent:main:main"]
"""


class TestDoubles:
    def test_the_fake_clock_moves_only_when_told(self) -> None:
        """It starts at START (or the time given) and `advance` returns the new time."""
        clock = FakeClock()
        assert clock() == START
        assert clock.advance(seconds=20) == START + timedelta(seconds=20)
        assert clock() == START + timedelta(seconds=20)

    def test_the_fake_clock_refuses_a_naive_start(self) -> None:
        """The service clock is aware UTC; a naive datetime is a mistake in the test."""
        with pytest.raises(ValueError, match="aware"):
            FakeClock(START.replace(tzinfo=None))

    def test_the_recording_waker_keeps_the_order(self) -> None:
        """Every wake is kept, repeats included, oldest first."""
        waker = RecordingWaker()
        for key in ("a", "b", "a"):
            waker(key)
        assert waker.woken == ["a", "b", "a"]

    def test_wait_until_answers_once_the_condition_holds(self) -> None:
        """Asked until it holds (here on the third asking, another thread's work), and no
        more after that."""
        asked: list[int] = []

        def third_time() -> bool:
            asked.append(len(asked))
            return len(asked) == 3

        assert wait_until(third_time, timeout=30, interval=0)
        assert asked == [0, 1, 2]
        done = threading.Event()
        threading.Timer(0.01, done.set).start()
        assert wait_until(done.is_set, timeout=30)

    def test_wait_until_gives_up_at_the_deadline(self) -> None:
        """False once the deadline has passed and one last asking still says no."""
        asked: list[float] = []

        def never() -> bool:
            asked.append(time.monotonic())
            return False

        started = time.monotonic()
        assert not wait_until(never, timeout=0.05, interval=0.01)
        assert asked[-1] - started >= 0.05
        assert len(asked) >= 2


class TestPlugin:
    def test_the_plugin_is_registered_as_a_pytest11_entry_point(self) -> None:
        """Installing the package is enough: pytest finds the plugin by its entry point."""
        points = importlib.metadata.entry_points(group="pytest11")
        [point] = [p for p in points if p.name == "session_awareness"]
        assert point.value == "session_awareness.testing.plugin"

    def test_a_hosts_tests_run_on_a_temporary_sqlite_service(
        self, pytester: pytest.Pytester
    ) -> None:
        """`awareness_service` is a service on a new SQLite file per test, on the plugin's
        clock and waker."""
        pytester.makepyfile(test_host=HOST_TESTS)
        result = pytester.runpytest("-p", "no:cacheprovider")
        result.assert_outcomes(passed=2)

    def test_a_hosts_tests_run_on_a_throwaway_postgresql_server(
        self, pytester: pytest.Pytester
    ) -> None:
        """`awareness_postgres_service` is a service in a schema of its own on a server the
        plugin starts (here found the way the suite finds it) and removes."""
        pytester.makepyfile(test_host_pg=POSTGRES_TESTS)
        result = pytester.runpytest("-p", "no:cacheprovider")
        result.assert_outcomes(passed=1)

    def test_the_docs_example_passes(self, pytester: pytest.Pytester) -> None:
        """The test docs/api.md shows for hosts runs green as written."""
        readme = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()
        section = readme.split("## Testing a host's integration", 1)[1]
        [example] = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.S)
        pytester.makepyfile(test_readme=example)
        result = pytester.runpytest("-p", "no:cacheprovider")
        result.assert_outcomes(passed=1)
