"""The cursors as the console shows them: the watches page and a session's page (R-O1).

Read-only, as `views`: the service's queries and read model, and cursor aggregates loaded
from the event store to tell an ambient cursor (R-W7) from an explicit one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from session_awareness.application import SessionAwareness, UnknownSessionError
from session_awareness.application.ports import CursorRow, SessionRow
from session_awareness.domain.keys import agent_of
from session_awareness.domain.watch import notice_text
from session_awareness.infrastructure.cli.history_lines import describe
from session_awareness.infrastructure.console.views import session_href

#: Cursors on one page of the watches.
EDGES_PAGE = 100
#: Timeline rows on one page of a session (the size of a `changesSince` page, R-R3).
TIMELINE_PAGE = 200
#: Cursor transitions a session page shows, the newest.
TRANSITIONS_SHOWN = 200


@dataclass(frozen=True)
class Edge:
    """A cursor as the console shows it: the pair, L, N, M, its state and its notice."""

    watcher: str
    target: str
    target_agent: str | None
    acknowledged: int
    notified: int
    material: int
    state: str  # "synced", "pending" or "ambient" (an ambient one may be pending too)
    pending: bool
    notice: str | None
    updated_at: int

    @property
    def target_href(self) -> str:
        return session_href(self.target, self.target_agent)

    @property
    def watcher_href(self) -> str:
        return session_href(self.watcher)


def edges(svc: SessionAwareness, cursors: list[CursorRow]) -> list[Edge]:
    """The cursors as edges; whether one is ambient (R-W7) is the cursor aggregate's to say."""
    out = []
    for c in cursors:
        ambient = _ambient(svc, c)
        agent = agent_of(c.target_key)
        if agent is None:  # a bare key: its agent is its session's
            target = svc.read_model.session(c.target_id)
            agent = target.agent_id if target is not None else None
        state = "ambient" if ambient else "pending" if c.pending else "synced"
        out.append(
            Edge(
                watcher=c.watcher_key,
                target=c.target_key,
                target_agent=agent,
                acknowledged=c.acknowledged,
                notified=c.notified,
                material=c.material,
                state=state,
                pending=c.pending,
                notice=notice_text(c.target_key, c.acknowledged) if c.pending else None,
                updated_at=c.updated_at,
            )
        )
    return out


def _ambient(svc: SessionAwareness, cursor: CursorRow) -> bool:
    watch: Any = svc.store.repository.get(cursor.watch_id)
    return bool(getattr(watch, "ambient", False))


@dataclass
class Watches:
    edges: list[Edge]
    total: int
    pending: int
    page: int
    more: bool


def watches(
    svc: SessionAwareness,
    *,
    watcher: str | None = None,
    target: str | None = None,
    pending_only: bool = False,
    page: int = 0,
    page_size: int = EDGES_PAGE,
) -> Watches:
    """One page of the live cursors, by watcher then target; `watcher`, `target` (keys) and
    `pending_only` narrow them. The store reads the page and counts the rest (issue 39): a
    page costs one page of rows, whatever the number of cursors. `ValueError` for a page
    before the first."""
    if page < 0:
        raise ValueError(f"page must be 0 or more, not {page}")
    rows, total, pending = svc.read_model.cursor_page(
        watcher_key=watcher,
        target_key=target,
        pending_only=pending_only,
        offset=page * page_size,
        limit=page_size,
    )
    more = total > (page + 1) * page_size
    return Watches(edges(svc, rows), total, pending, page, more)


# -- a session ----------------------------------------------------------------------------------


@dataclass
class SessionPage:
    row: SessionRow
    status: dict[str, Any]
    since: int
    watermark: int
    watchers: list[Edge]
    watching: list[Edge]
    transitions: list[dict[str, Any]]
    transitions_total: int
    #: Whether more cursors are on it, or of it, than `watchers` and `watching` show (each
    #: at most `EDGES_PAGE`; the watches page lists them all, a page at a time).
    more_watchers: bool = False
    more_watching: bool = False


def session_page(
    svc: SessionAwareness, key: str, agent_id: str | None, since: int | None
) -> SessionPage:
    """A session's timeline after `since` (default: its newest page), its cursors both
    ways, and the cursor transitions of its history; `UnknownSessionError` for a key that
    names no live session."""
    ref = svc.resolve(key, agent_id)
    _, session_id = svc.resolve_id(ref.key, ref.agent_id)
    head = svc.session_status(ref.key, agent_id=ref.agent_id)["stateVersion"]
    if since is None:
        since = max(0, head - TIMELINE_PAGE)
    status = svc.session_status(ref.key, changes_since=since, agent_id=ref.agent_id)
    state = svc.read_model.session_state(session_id, after=None, limit=0)
    row = svc.read_model.session(session_id)
    if row is None or state is None:  # deleted since resolve() found it live
        raise UnknownSessionError(key)
    on_it = svc.read_model.cursors_on_target(session_id, limit=EDGES_PAGE + 1)
    of_it = (
        svc.read_model.cursors_of_watcher(ref.key, pending_only=False, limit=EDGES_PAGE + 1)
        if ref.key.startswith("agent:")
        else []
    )
    watchers, watching = edges(svc, on_it[:EDGES_PAGE]), edges(svc, of_it[:EDGES_PAGE])
    steps = [
        {**entry, "by": by, "what": what, "details": details}
        for entry in svc.history(ref.key, agent_id=ref.agent_id)
        if entry["event"] != "signal" and ("cursor" in entry or "watcher" in entry)
        for by, what, details in [describe(entry)]
    ]
    return SessionPage(
        row, status, since, state.head.pruned_watermark, watchers, watching,
        steps[-TRANSITIONS_SHOWN:], len(steps), len(on_it) > EDGES_PAGE,
        len(of_it) > EDGES_PAGE,
    )  # fmt: skip
