"""Group commit on PostgreSQL (ADR 025): each save of a batch publishes its own wakes in the
batch's transaction (R-N7), a refused one none, and an ambient notice none (R-W7)."""

from __future__ import annotations

import pytest

from session_awareness.application import open_service
from tests.conftest import RecordingWaker, wait_until
from tests.contract.helpers import MANAGER, notice
from tests.contract.test_group_commit import (
    family,
    group,
    joined,
    record,
    spawned,
    started,
    write_lock_held,
)

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def test_a_batch_wakes_another_service_for_each_save_but_not_for_an_ambient_notice(
    pg_url: str,
) -> None:
    """One batch holds records on several children (each opens its manager's notice), two
    conflicting records on one child (the loser rolled back to its savepoint, then
    retried) and a record on a group that main watches ambiently and one watcher
    explicitly: another service is woken once for each explicit notice, never for main."""
    team, explicit = "agent:main:team", "agent:w0:main"
    quick = {"wake_coalesce_seconds": 0}  # every wake counted
    there = RecordingWaker()
    with open_service(pg_url, **quick) as a, open_service(pg_url, waker=there, **quick) as b:
        children = spawned(a, 4)
        a.open_session(team, kind="group")
        a.open_session(explicit)  # a watcher the service knows (R-L9)
        a.watch(explicit, team)
        commits = group(a)
        with write_lock_held(a) as release:
            first, results = started([record(a, children[0])])
            assert wait_until(commits.writing)
            bodies = [record(a, child) for child in children[1:]]
            bodies += [record(a, children[1]), record(a, team)]
            rest, more = started(bodies)
            assert wait_until(lambda: commits.queued() == len(bodies))
            release()
            joined(first + rest)
        assert commits.largest == len(bodies)
        assert sorted(s for got in [more[0], more[3]] for s in got) == [2, 3]  # type: ignore[attr-defined]
        managers = [family(number)[0] for number in range(4)]
        assert wait_until(lambda: set(there.woken) >= {*managers, explicit})
        assert sorted(there.woken) == sorted([*managers, explicit])
        assert MANAGER not in there.woken
        assert b.pending_notices(managers[1]) == [notice(children[1], 1)]
        assert b.pending_notices(MANAGER) == [notice(team, 0)]
        del results
