"""Small story helpers shared by the contract tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from session_awareness.application import SessionAwareness

MANAGER = "agent:main:main"
CHILD = "agent:main:subagent:child"
OTHER = "agent:main:subagent:other"
PEER = "agent:ops:main"


def notice(target: str, since: int) -> str:
    """The exact notice text of R-N1, written out independently of the implementation."""
    return (
        f'Session "{target}" changed (other actor). Reconcile before acting: '
        f'session_status sessionKey "{target}" changesSince {since}.'
    )


def spawn(
    svc: SessionAwareness, child: str = CHILD, parent: str = MANAGER, run: str = "run-1"
) -> int:
    """The manager opens and spawns a child; returns the spawn's sequence."""
    svc.open_session(parent)
    sequence = svc.record_child_spawned(child, parent=parent, run_id=run)
    assert sequence is not None
    return sequence


def cursor(svc: SessionAwareness, watcher: str, target: str) -> tuple[int, int, int] | None:
    """(L, N, M) of the pair, from the cursor read model."""
    for row in svc.read_model.cursors_of_watcher(watcher, pending_only=False):
        if row.target_key == target:
            return (row.acknowledged, row.notified, row.material)
    return None


def sequences(svc: SessionAwareness, key: str, since: int = 0, **kwargs: object) -> list[int]:
    status = svc.session_status(key, changes_since=since, **kwargs)  # type: ignore[arg-type]
    return [event["sequence"] for event in status["stateChanges"]["events"]]


def restart(open_svc: Callable[..., SessionAwareness], **options: object) -> SessionAwareness:
    """A restart: the service opened again on the same store, and its start-up maintenance
    (the sweep, R-N6; the prune, R-R1) run to its end. A host's service runs it on a thread
    of its own (ADR 038); a test runs it itself, so it never races the test."""
    svc = open_svc(**options)
    svc.maintain()
    return svc


def has_index(svc: SessionAwareness, index: str) -> bool:
    """Whether the store's read models have the index named `index` (either backend)."""
    recorder: Any = svc.store.recorder
    models = recorder.read_models
    if models.dialect.placeholder == "?":  # SQLite
        template = "SELECT count(*) AS n FROM sqlite_master WHERE type = 'index' AND name = ?"
        name = index
    else:
        template, name = "SELECT count(to_regclass(?)) AS n", models.sql("{s}" + index)
    with recorder.datastore.transaction(commit=False) as c:
        c.execute(models.sql(template), (name,))
        row = c.fetchone()
        return bool(row["n"] if isinstance(row, dict) else row[0])
