"""The world the tool tests share: a manager, its spawned tree, a peer and another agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from session_awareness.application import SessionAwareness, open_service
from tests.conftest import START, FakeClock

MAIN = "agent:main:main"
WORKER = "agent:main:subagent:worker"
HELPER = "agent:main:subagent:helper"
PEER = "agent:main:peer"
OPS = "agent:ops:main"
THREAD = "agent:main:discord:channel:c1:thread:t9"


def ms(minutes: int = 0) -> int:
    """Milliseconds since the epoch, `minutes` after the test clock's start."""
    return int(START.timestamp() * 1000) + minutes * 60_000


def build_world(svc: SessionAwareness, clock: FakeClock) -> None:
    """MAIN spawned WORKER (label "worker"), which spawned HELPER; PEER (a group, label "peer")
    and OPS (another agent) stand outside the tree. Each step is one minute after the last."""
    svc.open_session(MAIN)
    clock.advance(minutes=1)
    svc.open_session(WORKER, kind="subagent", label="worker", parent=MAIN)
    svc.record_child_spawned(WORKER, parent=MAIN, run_id="run-w")
    clock.advance(minutes=1)
    svc.open_session(HELPER, kind="subagent", label="helper", parent=WORKER)
    svc.record_child_spawned(HELPER, parent=WORKER, run_id="run-h")
    clock.advance(minutes=1)
    svc.open_session(PEER, kind="group", label="peer")
    clock.advance(minutes=1)
    svc.open_session(OPS)
    clock.advance(minutes=1)


def read_only_world(folder: Path, clock: FakeClock, **options: Any) -> SessionAwareness:
    """The world built in a SQLite file under `folder`, then opened again read-only (with
    `options`): reads answer, every write fails as an unavailable store."""
    url = f"sqlite:///{folder / 'sessions.db'}"
    with open_service(url, clock=clock) as svc:
        build_world(svc, clock)
    return open_service(f"{url}?mode=ro", clock=clock, **options)


def error(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    """The exact error a tool call returns."""
    body: dict[str, Any] = {"code": code}
    if field is not None:
        body["field"] = field
    body["message"] = message
    return {"error": body}


def unknown(key: str, field: str = "sessionKey") -> dict[str, Any]:
    return error("unknown_session", f"Unknown sessionKey: {key}", field)


def invalid(field: str, message: str) -> dict[str, Any]:
    return error("invalid_input", message, field)


#: `sessions_list`'s visibility metadata per restricted mode, written out (R-T2).
WARNINGS = {
    "self": "Results may be scope-limited: visibility is self, so only the current session "
    "is listed.",
    "tree": "Results may be scope-limited: visibility is tree, so only the current session, "
    "the sessions it spawned and the same-agent groups it watches are listed.",
    "agent": "Results may be scope-limited: visibility is agent, so only the current "
    "agent's sessions are listed.",
}


def note(mode: str) -> dict[str, str]:
    """The `visibility` metadata of a `sessions_list` under a restricted mode."""
    return {"mode": mode, "warning": WARNINGS[mode]}
