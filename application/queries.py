"""Queries: `session_status` with `changesSince` (R-S1–R-S5) and `sessions_list` (R-S5)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import timedelta
from typing import Any
from uuid import UUID

from session_awareness.application.errors import InvalidArgumentError, UnknownSessionError
from session_awareness.application.ports import Clock, ReadModel, SessionRow
from session_awareness.application.status import PAGE_SIZE, parse_changes_since, status_json
from session_awareness.domain.keys import SessionRef, agent_of
from session_awareness.domain.session import SESSION_KINDS
from session_awareness.domain.signals import MAX_SAFE_INTEGER, has_control, to_ms

#: `activeMinutes` beyond a century would overflow the clock arithmetic.
MAX_ACTIVE_MINUTES = 100 * 365 * 24 * 60


#: How a query finds the session a key names: `(ref, session id)`, or `UnknownSessionError`.
ResolveId = Callable[[str, str | None], tuple[SessionRef, UUID]]


class Queries:
    """Read-only answers from the read models; they never move a cursor."""

    def __init__(self, read_model: ReadModel, clock: Clock, resolve_id: ResolveId) -> None:
        self.read_model = read_model
        self.clock = clock
        self.resolve_id = resolve_id

    # -- queries (§6) --------------------------------------------------------------------------

    def session_status(
        self, key: str, *, changes_since: object = None, agent_id: str | None = None
    ) -> dict[str, Any]:
        """`{sessionKey, stateVersion, stateChanges?}`; never advances a cursor (R-S1)."""
        since = None if changes_since is None else parse_changes_since(changes_since)
        ref, session_id = self.resolve_id(key, agent_id)
        state = self.read_model.session_state(session_id, after=since, limit=PAGE_SIZE + 1)
        if state is None:
            raise UnknownSessionError(key)
        return status_json(ref.key, state, since)

    def resolve(self, key: str, agent_id: str | None = None) -> SessionRef:
        """The ref of the live session a key names (R-K1, R-W3); `UnknownSessionError` when
        it is unknown or deleted."""
        ref, session_id = self.resolve_id(key, agent_id)
        row = self.read_model.session(session_id)
        if row is None or row.deleted:
            raise UnknownSessionError(key)
        return ref

    def sessions_list(
        self,
        *,
        agent_id: str | None = None,
        kinds: Sequence[str] | None = None,
        label: str | None = None,
        search: str | None = None,
        active_minutes: int | float | None = None,
        limit: int | None = None,
        archived: bool = False,
    ) -> list[dict[str, Any]]:
        """Live sessions, most recently updated first, as the `sessions_list` tool's rows
        (`list_row`): the active ones, or with `archived=True` the archived ones."""
        rows = self.session_rows(
            agent_id=agent_id,
            kinds=kinds,
            label=label,
            search=search,
            active_minutes=active_minutes,
            limit=limit,
            archived=archived,
        )
        children = children_by_pair(self.read_model, [(row.agent_id, row.key) for row in rows])
        return [list_row(row, [key for _, key in children[row.agent_id, row.key]]) for row in rows]

    def session_rows(
        self,
        *,
        agent_id: str | None = None,
        kinds: Sequence[str] | None = None,
        label: str | None = None,
        search: str | None = None,
        active_minutes: int | float | None = None,
        limit: int | None = None,
        keys: Collection[str] | None = None,
        archived: bool | None = None,
        offset: int = 0,
    ) -> list[SessionRow]:
        """The registry rows behind `sessions_list`, for hosts and the session tools; `keys`
        restricts them (e.g. to what a caller may see), `archived` to the archived (True) or
        the active (False) ones; by default both. `offset` skips that many matching rows
        first (a page further down)."""
        check_kinds(kinds)
        if archived is not None and not isinstance(archived, bool):
            raise InvalidArgumentError("archived", "must be a boolean")
        for field, text in (("agentId", agent_id), ("label", label), ("search", search)):
            if text is not None and (not isinstance(text, str) or has_control(text)):
                raise InvalidArgumentError(field, "must be text without control characters")
        if limit is not None and (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MAX_SAFE_INTEGER
        ):
            raise InvalidArgumentError(
                "limit", f"must be a positive integer, at most {MAX_SAFE_INTEGER}"
            )
        if (
            isinstance(offset, bool)
            or not isinstance(offset, int)
            or not 0 <= offset <= MAX_SAFE_INTEGER
        ):
            raise InvalidArgumentError(
                "offset", f"must be a non-negative integer, at most {MAX_SAFE_INTEGER}"
            )
        if kinds is not None:
            if isinstance(kinds, str | bytes) or not isinstance(kinds, Sequence | set | frozenset):
                raise InvalidArgumentError("kinds", "must be a list of session kinds")
            kinds = list(kinds)
            for index, kind in enumerate(kinds):
                if not isinstance(kind, str) or kind not in SESSION_KINDS:
                    raise InvalidArgumentError(
                        f"kinds.{index}", f"must be one of {', '.join(sorted(SESSION_KINDS))}"
                    )
        updated_since = None
        if active_minutes is not None:
            if (
                isinstance(active_minutes, bool)
                or not isinstance(active_minutes, int | float)
                or not 0 < active_minutes <= MAX_ACTIVE_MINUTES
            ):
                raise InvalidArgumentError(
                    "activeMinutes", f"must be a positive number, at most {MAX_ACTIVE_MINUTES}"
                )
            updated_since = to_ms(self.clock() - timedelta(minutes=active_minutes))
        if keys is not None:
            keys = [key for key in keys if isinstance(key, str)]
        return self.read_model.list_sessions(
            agent_id=agent_id,
            kinds=kinds,
            label=label,
            updated_since=updated_since,
            limit=limit,
            search=search,
            keys=keys,
            archived=archived,
            offset=offset,
        )

    def children(
        self, parent_keys: Collection[str], *, agent_id: str | None = None
    ) -> dict[str, list[str]]:
        """The live child session keys of each parent key (spawn edges or `parent=`), sorted.
        A bare parent key names the session of `agent_id`, whose children are of that agent;
        without `agent_id`, the children of every agent's session of that key."""
        found = self.read_model.children_of(parent_keys)
        if agent_id is not None:
            parents = {key: (agent_of(key) or agent_id, key) for key in found}
            mine = children_by_pair(self.read_model, parents.values(), found)
            return {key: [kid for _, kid in mine[parents[key]]] for key in found}
        return {key: sorted({kid for _, kid in kids}) for key, kids in found.items()}

    def descendants(self, key: str, *, agent_id: str | None = None) -> set[str]:
        """Every live session spawned by `key`, transitively (visibility `tree`, R-T2); a bare
        key names the session of `agent_id`, else of every agent that has one."""
        agent = agent_of(key) or agent_id
        if agent is not None:
            roots = {(agent, key)}
        else:  # a parent never opened still has its children (R-T3)
            roots = {parent_of(kid, key) for kid, _ in self.read_model.children_of([key])[key]}
        return {kid for _, kid in subtree(self.read_model, roots) - roots}


#: An (agent id, key) pair: what names one session.
Pair = tuple[str, str]


def parent_of(child_agent: str, parent_key: str) -> Pair:
    """The session a child's parent key names: a qualified key its own agent, a bare key the
    child's agent (a spawn never reaches across agents by a bare key, R-T3)."""
    return (agent_of(parent_key) or child_agent, parent_key)


def children_by_pair(
    read_model: ReadModel,
    parents: Collection[Pair],
    found: dict[str, list[Pair]] | None = None,
) -> dict[Pair, list[Pair]]:
    """The live children of each parent session, as (agent id, key) pairs sorted by key:
    matched by (agent, key), never by key alone, so another agent's session of the same bare
    key neither adds children nor hides any (R-T2). `found`: the read model's answer for
    these parents' keys, when already asked."""
    out: dict[Pair, list[Pair]] = {parent: [] for parent in parents}
    if found is None:
        found = read_model.children_of({key for _, key in out}) if out else {}
    for parent_key, kids in found.items():
        for kid in kids:
            parent = parent_of(kid[0], parent_key)
            if parent in out:
                out[parent].append(kid)
    return out


def subtree(read_model: ReadModel, roots: Collection[Pair]) -> set[Pair]:
    """`roots` and every live session they spawned, transitively, matched by (agent, key)."""
    found, frontier = set(roots), set(roots)
    while frontier:
        children = children_by_pair(read_model, frontier)
        frontier = {kid for kids in children.values() for kid in kids} - found
        found |= frontier
    return found


def check_kinds(kinds: object) -> None:
    """Refuse what is not a list of session kinds (R-K3), naming the item as the tools do."""
    if kinds is None:
        return
    known = ", ".join(sorted(SESSION_KINDS))
    if isinstance(kinds, str | bytes) or not isinstance(kinds, Sequence | set | frozenset):
        raise InvalidArgumentError("kinds", f"must be a list of: {known}")
    for index, kind in enumerate(kinds):
        if not isinstance(kind, str) or kind not in SESSION_KINDS:
            raise InvalidArgumentError(f"kinds.{index}", f"must be one of: {known}")


def list_row(row: SessionRow, children: list[str]) -> dict[str, Any]:
    """One `sessions_list` row, as every surface shows it: `{sessionKey, agentId, kind, label,
    parentSessionKey, childSessionKeys, updatedAt, stateVersion?, channel?, pinned, archived,
    runStatus?, lastRunAborted?}`; `stateVersion` only when > 0 (R-S5), `channel` when a
    human turn's is known, the run fields when the session ran as a child (R-T1)."""
    item: dict[str, Any] = {
        "sessionKey": row.key,
        "agentId": row.agent_id,
        "kind": row.kind,
        "label": row.label,
        "parentSessionKey": row.parent_key,
        "childSessionKeys": children,
        "updatedAt": row.updated_at,
    }
    if row.state_version > 0:
        item["stateVersion"] = row.state_version
    if row.channel is not None:
        item["channel"] = row.channel
    item["pinned"], item["archived"] = row.pinned, row.archived
    if row.run_status is not None:
        item["runStatus"] = row.run_status
        item["lastRunAborted"] = row.last_run_aborted
    return item
