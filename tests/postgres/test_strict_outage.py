"""A strict service is strict about the caller's mistakes, never about the store (R-L9, R-L8)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from session_awareness.application import open_service
from session_awareness.testing.pgcluster import PostgresCluster
from tests.conftest import wait_until
from tests.contract.helpers import CHILD, spawn

NO_HANG = 20.0


@pytest.fixture
def own_cluster() -> Iterator[PostgresCluster]:
    """A cluster of its own: this test stops and restarts it."""
    with PostgresCluster() as cluster:
        yield cluster


def test_a_strict_producer_never_raises_for_a_stopped_server(
    own_cluster: PostgresCluster,
) -> None:
    """R-L9, R-L8: with PostgreSQL stopped, a strict service's producer returns None (the
    signal is kept) instead of raising, and the signal lands once the server is back."""
    url = own_cluster.url + "?schema=strict_outage&connect_timeout=1"
    with open_service(url, strict=True) as svc:
        spawn(svc)
        own_cluster.stop(mode="immediate")
        assert svc.record_goal_changed(CHILD, summary="goal updated") is None
        own_cluster.start()
        assert wait_until(svc.flush_signals, timeout=NO_HANG)
        events = svc.session_status(CHILD, changes_since=1)["stateChanges"]["events"]
        assert [(e["sequence"], e["kind"]) for e in events] == [(2, "goal_changed")]
