"""What a PostgreSQL save does while it holds the events table's lock (ADR 013 "Amended"):
the lock keeps notification ids in commit order, so every writer process queues for it, and
the client's own work inside it lengthens every queued save. A save's rows are projected and
bound before it asks for the lock; inside it, only the statements that carry a notification
id are bound."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from session_awareness.application import open_service
from session_awareness.application.service import SessionAwareness
from tests.conftest import FakeClock, RecordingWaker
from tests.contract.helpers import sequences

PARENT, CHILD = "agent:main:main", "agent:main:subagent:worker"


class UnderTheLock:
    """The values the client binds into statements while the events table's lock is held:
    from sending the query that takes it (`LOCK TABLE`) to sending the one that commits."""

    def __init__(self) -> None:
        self.held = False
        self.bound: list[list[Any]] = []

    def executed(self, query: str) -> None:
        if "LOCK TABLE" in query:
            self.held = True
            self.bound.clear()
        elif query.rstrip().endswith("COMMIT"):
            self.held = False


@pytest.fixture
def under_the_lock(monkeypatch: pytest.MonkeyPatch) -> Iterator[UnderTheLock]:
    seen = UnderTheLock()
    execute, mogrify = psycopg.Cursor.execute, psycopg.ClientCursor.mogrify

    def executed(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(query, str):
            seen.executed(query)
        return execute(self, query, *args, **kwargs)

    def bound(self: Any, query: Any, params: Any = None) -> str:
        if seen.held:
            seen.bound.append(list(params or ()))
        return mogrify(self, query, params)

    monkeypatch.setattr(psycopg.Cursor, "execute", executed)
    monkeypatch.setattr(psycopg.ClientCursor, "mogrify", bound)
    yield seen


@pytest.fixture
def svc(pg_url: str) -> Iterator[SessionAwareness]:
    with open_service(pg_url, clock=FakeClock(), waker=RecordingWaker()) as service:
        service.open_session(PARENT)
        service.record_child_spawned(CHILD, parent=PARENT, run_id="r1")
        yield service


def last_notification_id(svc: SessionAwareness) -> int:
    recorder: Any = svc.store.recorder
    return int(recorder.max_notification_id())


class TestWorkUnderTheLock:
    def test_a_record_binds_only_the_statements_that_carry_its_ids_while_it_holds_the_lock(
        self, svc: SessionAwareness, under_the_lock: UnderTheLock
    ) -> None:
        """R-S1, R-N5: a record's head, registry, activity and material rows and the save's
        checks are bound before the lock is asked for; inside it, the client binds only the
        statements that carry the event's notification id (its retained row; the parent's
        ambient cursor's notice order). The record is stored as before."""
        for _ in range(2):  # the second save runs its statements prepared (ADR 029)
            before = last_notification_id(svc)
            svc.record_human_direct_message(CHILD, channel="chat")
            stored = set(range(before + 1, last_notification_id(svc) + 1))  # the save's ids
            assert under_the_lock.bound  # the retained row at least
            assert all(stored & set(values) for values in under_the_lock.bound)
        assert sequences(svc, CHILD) == [1, 2, 3]
