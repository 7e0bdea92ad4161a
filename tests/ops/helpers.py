"""Stories and tampering shared by the operations tests."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from session_awareness.application import SessionAwareness
from session_awareness.domain.keys import SessionRef, watch_id
from tests.conftest import FakeClock
from tests.contract.helpers import CHILD, MANAGER, OTHER, PEER


def mixed_workload(svc: SessionAwareness, clock: FakeClock) -> None:
    """Spawns, messages, a watch, drains with a reopen, log-only signals, a prune, an idle
    cursor expiring, a reset, a delete and a re-open: every kind of stored event."""
    svc.open_session(MANAGER, label="manager")
    svc.open_session(PEER)
    svc.record_child_spawned(CHILD, parent=MANAGER, run_id="run-1")
    svc.record_child_spawned(OTHER, parent=MANAGER, run_id="run-2")
    assert svc.watch(PEER, CHILD)
    svc.record_human_direct_message(CHILD, channel="telegram")
    svc.record_goal_changed(CHILD, summary="goal created", actor_type="human")
    svc.drain_notices(MANAGER)  # acknowledged and reopened
    svc.record_run_terminal(OTHER, run_id="run-2", outcome="timeout")
    svc.record_compacted(CHILD, operation_id="op-1")
    clock.advance(days=31)
    svc.record_human_direct_message(CHILD, channel="slack")
    svc.drain_notices(MANAGER)
    svc.prune()  # old rows go, watermarks rise; OTHER's idle cursor expires
    svc.drain_notices(PEER)
    svc.reset_session(PEER)
    svc.delete_session(OTHER)
    svc.open_session(OTHER, kind="subagent")
    svc.record_goal_changed(OTHER, summary="goal created")


def session_id(key: str) -> Any:
    return SessionRef.of(key).session_id


def cursor_id(watcher: str, target: str) -> Any:
    return watch_id(watcher, session_id(target))


def tamper(svc: SessionAwareness, template: str, *params: Any) -> None:
    """Change the live read models behind the service's back (`{s}` is the schema prefix;
    UUID parameters are bound the way the backend stores them)."""
    recorder: Any = svc.store.recorder.read_models
    bound = [recorder.dialect.bind_id(p) if hasattr(p, "hex") and not isinstance(p, str) else p
             for p in params]  # fmt: skip
    with recorder.datastore.transaction(commit=True) as c:
        c.execute(recorder.sql(template), bound)


def drop_stored_event(svc: SessionAwareness, position: int) -> None:
    """Delete one stored event from the event store (never done by the service)."""
    recorder: Any = svc.store.recorder.read_models
    column = "rowid" if recorder.dialect.placeholder == "?" else "notification_id"
    table = f'{{s}}"{recorder.events_table_name}"'
    tamper(svc, f"DELETE FROM {table} WHERE {column} = ?", position)  # noqa: S608 -- test SQL


def copied_store(fixture: Path, tmp_path: Path) -> str:
    """The URL of a copy of a committed fixture store: a test never changes the fixture."""
    path = tmp_path / fixture.name
    shutil.copy(fixture, path)
    return f"sqlite:///{path}"


def unmark_read_models(svc: SessionAwareness) -> None:
    """Drop the store's read-models mark (ADR 044): the store then looks like one an earlier
    version wrote, or one whose migration did not finish, which the start checks itself."""
    recorder: Any = svc.store.recorder.read_models
    with recorder.datastore.transaction(commit=True) as c:
        c.execute(
            recorder.sql("DELETE FROM {s}session_awareness_marks WHERE name = ?"),
            ("read_models_complete",),
        )
