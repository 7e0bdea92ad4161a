"""What each console page shows, read from the service's queries and read model (R-O1).

Every function here only reads: the service's queries (`session_rows`, `session_status`,
`history`, `prune_preview`, `health`), the read model's cursor queries, and cursor aggregates
loaded from the event store to tell an ambient cursor from an explicit one. None writes, and
none holds SQL of its own: the rules stay where they are kept.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from session_awareness.application import SessionAwareness, UnknownSessionError
from session_awareness.application.ports import CursorRow, SessionRow
from session_awareness.application.retention import Retention
from session_awareness.domain.keys import agent_of
from session_awareness.domain.watch import notice_text
from session_awareness.infrastructure.cli.history import describe

#: Later than any stored time: `cursors_updated_before(EVERY)` lists every cursor.
EVERY = 2**62
#: Sessions on one page of the overview.
PAGE_SIZE = 50
#: Cursors on one page of the watches.
EDGES_PAGE = 100
#: Timeline rows on one page of a session (the size of a `changesSince` page, R-R3).
TIMELINE_PAGE = 200
#: Cursor transitions a session page shows, the newest.
TRANSITIONS_SHOWN = 200


def session_href(key: str, agent_id: str | None = None) -> str:
    """The URL of a session's page: the key percent-encoded as one path segment; a bare key
    (no agent in it) names its agent in `?agentId=`."""
    href = "/sessions/" + quote(key, safe="")
    if agent_id is not None and not key.startswith("agent:"):
        href += "?agentId=" + quote(agent_id, safe="")
    return href


def store_head(svc: SessionAwareness) -> int:
    """The newest notification id of the event store: every change any process records
    (signals, cursors, drains, pruning) appends an event, so a new head means new data."""
    return int(svc.store.recorder.max_notification_id() or 0)


# -- overview -----------------------------------------------------------------------------------


@dataclass
class TreeNode:
    row: SessionRow
    pending: int
    href: str
    children: list[TreeNode] = field(default_factory=list)
    #: The parent's key when the parent is not on this page (or not live).
    orphan_of: str | None = None


@dataclass
class Overview:
    agents: list[tuple[str, list[TreeNode]]]
    shown: int
    page: int
    more: bool


def overview(
    svc: SessionAwareness,
    *,
    agent_id: str | None = None,
    kinds: list[str] | None = None,
    label: str | None = None,
    active_minutes: float | None = None,
    page: int = 0,
    page_size: int = PAGE_SIZE,
) -> Overview:
    """One page of live sessions, most recently updated first, grouped by agent into their
    trees (parent → children on the page), each with its pending notices as a watcher."""
    rows = svc.session_rows(
        agent_id=agent_id,
        kinds=kinds,
        label=label,
        active_minutes=active_minutes,
        limit=(page + 1) * page_size + 1,
        archived=None,
    )
    more = len(rows) > (page + 1) * page_size
    rows = rows[page * page_size : (page + 1) * page_size]
    waiting = set(svc.read_model.watchers_with_pending())
    pending = {
        row.key: len(svc.read_model.cursors_of_watcher(row.key, pending_only=True))
        for row in rows
        if row.key in waiting
    }
    by_agent: dict[str, list[SessionRow]] = defaultdict(list)
    for row in rows:
        by_agent[row.agent_id].append(row)
    agents = [(agent, _trees(by_agent[agent], pending)) for agent in sorted(by_agent)]
    return Overview(agents, len(rows), page, more)


def _trees(rows: list[SessionRow], pending: dict[str, int]) -> list[TreeNode]:
    """One agent's rows as trees: a session whose parent is on the page hangs under it."""
    nodes = {
        row.key: TreeNode(row, pending.get(row.key, 0), session_href(row.key, row.agent_id))
        for row in rows
    }
    roots = []
    for row in rows:
        node = nodes[row.key]
        parent = nodes.get(row.parent_key) if row.parent_key is not None else None
        if parent is not None and parent is not node and not _under(parent, node, nodes):
            parent.children.append(node)
        else:
            node.orphan_of = row.parent_key
            roots.append(node)
    return roots


def _under(node: TreeNode, ancestor: TreeNode, nodes: dict[str, TreeNode]) -> bool:
    """Whether `node` already descends from `ancestor` (the domain forbids cycles, R-T3;
    the page never loops even if a store held one)."""
    seen: set[str] = set()
    key = node.row.parent_key
    while key is not None and key not in seen:
        if key == ancestor.row.key:
            return True
        seen.add(key)
        parent = nodes.get(key)
        key = parent.row.parent_key if parent is not None else None
    return False


# -- watches ------------------------------------------------------------------------------------


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
    `pending_only` narrow them."""
    cursors = [
        c
        for c in svc.read_model.cursors_updated_before(EVERY)
        if (watcher is None or c.watcher_key == watcher)
        and (target is None or c.target_key == target)
        and (c.pending or not pending_only)
    ]
    cursors.sort(key=lambda c: (c.watcher_key, c.target_key, c.target_id))
    shown = cursors[page * page_size : (page + 1) * page_size]
    return Watches(
        edges(svc, shown),
        len(cursors),
        sum(c.pending for c in cursors),
        page,
        len(cursors) > (page + 1) * page_size,
    )


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
    watchers = edges(svc, svc.read_model.cursors_on_target(session_id))
    watching = (
        edges(svc, svc.read_model.cursors_of_watcher(ref.key, pending_only=False))
        if ref.key.startswith("agent:")
        else []
    )
    steps = [
        {**entry, "by": by, "what": what, "details": details}
        for entry in svc.history(ref.key, agent_id=ref.agent_id)
        if entry["event"] != "signal" and ("cursor" in entry or "watcher" in entry)
        for by, what, details in [describe(entry)]
    ]
    return SessionPage(
        row, status, since, state.head.pruned_watermark, watchers, watching,
        steps[-TRANSITIONS_SHOWN:], len(steps),
    )  # fmt: skip


# -- health -------------------------------------------------------------------------------------


def health(svc: SessionAwareness, retention: Retention) -> dict[str, Any]:
    """The service's own health report, the event store's head, and retention's figures:
    its limits and what a prune would remove now (R-R1)."""
    report = svc.health()
    report["head"] = store_head(svc)
    report["keptSignals"] = svc.kept_signals
    report["retention"] = {"days": retention.days, "rows": retention.rows}
    report["prunePreview"] = svc.prune_preview()
    report["pendingWatchers"] = len(svc.read_model.watchers_with_pending())
    report["cursors"] = len(svc.read_model.cursors_updated_before(EVERY))
    return report
