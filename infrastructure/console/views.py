"""What the overview and the health page show, and the helpers every page shares (R-O1);
the cursors' pages are `cursors`.

Every function here and there only reads: the service's queries (`session_rows`,
`session_status`, `history`, `prune_preview`, `health`), the read model's queries, and
aggregates loaded from the event store. None writes, and none holds SQL of its own: the
rules stay where they are kept.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from session_awareness.application import SessionAwareness
from session_awareness.application.errors import StoreUnavailableError
from session_awareness.application.ports import SessionRow
from session_awareness.application.retention import Retention
from session_awareness.application.unit_of_work import STORE_ERRORS, closed_error

#: Sessions on one page of the overview.
PAGE_SIZE = 50


def session_href(key: str, agent_id: str | None = None) -> str:
    """The URL of a session's page: the key percent-encoded as one path segment; a bare key
    (no agent in it) names its agent in `?agentId=`."""
    href = "/sessions/" + quote(key, safe="")
    if agent_id is not None and not key.startswith("agent:"):
        href += "?agentId=" + quote(agent_id, safe="")
    return href


def store_head(svc: SessionAwareness) -> int:
    """The newest notification id of the event store: every change any process records
    (signals, cursors, drains, pruning) appends an event, so a new head means new data.
    `StoreUnavailableError` when the store cannot be read, as the read model's queries."""
    if svc.closed:
        raise closed_error()
    try:
        return int(svc.store.recorder.max_notification_id() or 0)
    except STORE_ERRORS as error:
        raise StoreUnavailableError(f"cannot read the event store's head: {error}") from error


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
        limit=page_size + 1,
        archived=None,
        offset=page * page_size,
    )
    more = len(rows) > page_size
    rows = rows[:page_size]
    # One statement for the page's watchers, not every watcher with a notice in the store
    # and then one read per row (issue 39).
    waiting = svc.read_model.pending_of_watchers([row.key for row in rows])
    pending = {key: len(cursors) for key, cursors in waiting.items()}
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


# -- health -------------------------------------------------------------------------------------


def health(svc: SessionAwareness, retention: Retention) -> dict[str, Any]:
    """The service's own health report, the event store's head, and retention's figures:
    its limits and what a prune would remove now (R-R1)."""
    report = svc.health()
    report["head"] = store_head(svc)
    report["keptSignals"] = svc.kept_signals
    report["retention"] = {"days": retention.days, "rows": retention.rows}
    report["prunePreview"] = svc.prune_preview()
    report["pendingWatchers"] = svc.read_model.watchers_pending_count()
    report["cursors"] = svc.read_model.cursor_counts()[0]
    return report
