"""Recovery from a short outage under steady traffic (issue 8.2; R-L8 Beyond)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from session_awareness.application import open_service
from session_awareness.testing.pgcluster import PostgresCluster
from tests.contract.helpers import CHILD, spawn
from tests.reliability.helpers import DEADLINE, wait_until

#: Steady traffic: a producer call every STEP seconds, for WINDOW seconds after the restart.
STEP, WINDOW = 0.05, 3.0


@pytest.fixture
def own_cluster() -> Iterator[PostgresCluster]:
    """A cluster of its own: this test stops and restarts it."""
    with PostgresCluster() as cluster:
        yield cluster


class TestRecoveryUnderLoad:
    def test_recording_resumes_while_producers_keep_calling(
        self, own_cluster: PostgresCluster
    ) -> None:
        """R-L8: after a short outage a steadily called producer records again within a
        few rest periods, without waiting for a pause in traffic."""
        url = f"{own_cluster.url}?schema=resume&connect_timeout=1"
        with open_service(url) as svc:
            spawn(svc)
            results: list[int | None] = []
            stop = threading.Event()

            def traffic() -> None:  # steady, from before the outage to after the restart
                while not stop.is_set():
                    results.append(svc.record_goal_changed(CHILD, summary="goal updated"))
                    stop.wait(STEP)

            caller = threading.Thread(target=traffic, daemon=True)
            caller.start()
            try:
                assert wait_until(lambda: len(results) > 2)
                own_cluster.stop(mode="immediate")
                assert wait_until(lambda: None in results)
                own_cluster.start()
                restarted = len(results)
                threading.Event().wait(WINDOW)  # traffic goes on; recording must resume in it
            finally:
                stop.set()
                caller.join(DEADLINE)
            assert any(result is not None for result in results[restarted:])
