"""The store the console tests look at: a manager, a child with a hostile label and a
pending notice, a group its main session watches ambiently, and a bare-key session."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from session_awareness.application import SessionAwareness
from session_awareness.infrastructure.cli.common import open_store

MANAGER = "agent:main:main"
CHILD = "agent:main:subagent:child"
#: Keys and labels are host- or agent-chosen text: these would run if a page did not escape.
HOSTILE_KEY = "agent:main:subagent:<b>bold</b>&x"
HOSTILE_LABEL = "<script>window.__pwned = 1</script>"
HOSTILE_CHANNEL = '<img src=x onerror="window.__pwned = 2">'
GROUP = "agent:main:group:ops"
BARE = "global"


def notice(target: str, since: int) -> str:
    """The exact notice text of R-N1, written out independently of the implementation."""
    return (
        f'Session "{target}" changed (other actor). Reconcile before acting: '
        f'session_status sessionKey "{target}" changesSince {since}.'
    )


def build(svc: SessionAwareness) -> None:
    """The story: the manager spawns the child (its cursor at #1); a human messages the
    child over a hostile channel (#2, one notice) and changes its goal (#3, M moves, N
    frozen); a human turn on the group gives the main session an ambient cursor (R-W7)."""
    svc.open_session(MANAGER, label="the manager")
    svc.record_child_spawned(CHILD, parent=MANAGER, run_id="run-1")
    svc.open_session(CHILD, label=HOSTILE_LABEL)
    svc.record_human_direct_message(CHILD, channel=HOSTILE_CHANNEL)
    svc.record_goal_changed(CHILD, summary="goal updated", actor_type="human")
    svc.record_child_spawned(HOSTILE_KEY, parent=MANAGER, run_id="run-2")
    svc.record_run_terminal(HOSTILE_KEY, run_id="run-2", outcome="error")
    svc.open_session(GROUP, kind="group", label="ops room")
    svc.record_human_direct_message(GROUP, channel="slack")
    svc.open_session(BARE, agent_id="ops", kind="other", label="shared")


@contextmanager
def looking(database_url: str) -> Iterator[SessionAwareness]:
    """The service as the console opens it: as the CLI's looking commands do, not started."""
    with open_store(database_url, verbose=0) as svc:
        yield svc
