"""Visibility: which sessions a caller's tools may see (R-T2).

`self` is the caller, `tree` the caller and every session it spawned, transitively (the
default), and for reads also the same-agent `group` sessions it watches; `agent` every session
of the caller's agent, `all` everything. A session the host marked sandboxed is clamped to
`tree`. Nothing here needs the caller's own session to exist.

Sessions are matched by (agent, key), never by key alone: a bare key (`global`) names the
session of the caller's agent unless the tool is given an agent id, so the same bare key of
another agent is neither reached nor confused with it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from functools import cached_property, partial
from typing import TYPE_CHECKING

from session_awareness.application.errors import StoreUnavailableError
from session_awareness.application.ports import SessionRow
from session_awareness.application.queries import Pair, subtree
from session_awareness.application.tools.outputs import VisibilityNote
from session_awareness.application.tools.tool_errors import (
    AMBIGUOUS_TARGET,
    UNKNOWN_SESSION,
    ToolError,
    from_service,
    unknown_session,
)
from session_awareness.domain.keys import DEFAULT_AGENT_ID, agent_of

if TYPE_CHECKING:
    from session_awareness.application.tools.host import ToolHost

#: The documents' warning on a restricted `sessions_list` (R-T2), per effective mode.
WARNINGS = {
    "self": "Results may be scope-limited: visibility is self, so only the current session "
    "is listed.",
    "tree": "Results may be scope-limited: visibility is tree, so only the current session, "
    "the sessions it spawned and the same-agent groups it watches are listed.",
    "agent": "Results may be scope-limited: visibility is agent, so only the current "
    "agent's sessions are listed.",
}
#: The modes a sandboxed session is clamped to: at most `tree`.
CLAMPED = {"agent": "tree", "all": "tree"}


class Visibility:
    """What one caller may see: a set of sessions (`self`, `tree`), an agent, or all."""

    def __init__(
        self,
        mode: str,
        caller: str,
        agent_id: str,
        *,
        pairs: frozenset[Pair] | None = None,
        read_pairs: Callable[[], frozenset[Pair]] | None = None,
        scope_agent: str | None = None,
    ) -> None:
        self.mode, self.caller = mode, caller
        self.agent_id = agent_id  # the caller's agent: where a bare key resolves
        self.pairs, self.scope_agent = pairs, scope_agent
        self._read_pairs = read_pairs

    @cached_property
    def read_pairs(self) -> frozenset[Pair]:
        """What reads add to `pairs` (the watched groups of `tree`), asked for on first use."""
        return self._read_pairs() if self._read_pairs is not None else frozenset()

    @classmethod
    def of(cls, svc: ToolHost, mode: str, caller: str) -> Visibility:
        """The caller's view under the service's configured mode, clamped when sandboxed; an
        unreachable store is a `service_error`, as in every tool."""
        try:
            return cls._of(svc, mode, caller)
        except StoreUnavailableError as error:
            raise from_service(error) from None

    @classmethod
    def _of(cls, svc: ToolHost, mode: str, caller: str) -> Visibility:
        agent = agent_of(caller) or _only_agent_of(svc, caller) or DEFAULT_AGENT_ID
        if mode in CLAMPED and svc.is_sandboxed(caller, agent_id=agent):
            mode = CLAMPED[mode]
        me = (agent, caller)
        if mode == "all":
            return cls(mode, caller, agent)
        if mode == "agent":
            return cls(mode, caller, agent, scope_agent=agent)
        if mode == "tree":
            groups = partial(_watched_groups, svc, caller, agent)
            return cls(mode, caller, agent, pairs=frozenset(tree_of(svc, me)), read_pairs=groups)
        return cls(mode, caller, agent, pairs=frozenset({me}))

    @property
    def note(self) -> VisibilityNote | None:
        """`sessions_list`'s visibility metadata when the view is restricted."""
        if self.mode not in WARNINGS:
            return None
        return VisibilityNote.model_validate({"mode": self.mode, "warning": WARNINGS[self.mode]})

    def admits(self, row: SessionRow, *, read: bool = True) -> bool:
        """Whether the caller may see the session; `read=False` for what a tool does to it
        (a send), which the watched groups of `tree` do not widen."""
        pair = (row.agent_id, row.key)
        if self.pairs is not None:
            return pair in self.pairs or (read and pair in self.read_pairs)
        return self.scope_agent is None or row.agent_id == self.scope_agent

    def pair(self, key: str, agent_id: str | None = None) -> Pair | None:
        """The session a key names for this caller: a qualified key names its agent (an agent
        id contradicting it names nothing); a bare key the given agent, else the caller's."""
        qualified = agent_of(key)
        if qualified is not None:
            return (qualified, key) if agent_id in (None, qualified) else None
        return (agent_id or self.agent_id, key)

    def find(
        self,
        svc: ToolHost,
        key: str,
        field: str = "sessionKey",
        *,
        agent_id: str | None = None,
        read: bool = True,
    ) -> SessionRow:
        """The visible live session a key names; invisible reads as unknown (R-T2)."""
        named = self.pair(key, agent_id)
        if named is not None:
            for row in svc.session_rows(keys=[key], agent_id=named[0]):
                if row.key == key and self.admits(row, read=read):
                    return row
        raise unknown_session(key, field)

    def find_by_label(self, svc: ToolHost, label: str, *, read: bool = True) -> SessionRow:
        """The one visible live session with this label."""
        rows = [row for row in self.rows(svc, label=label) if self.admits(row, read=read)]
        if not rows:
            raise ToolError(UNKNOWN_SESSION, f"Unknown label: {label}", "label")
        if len(rows) > 1:
            raise ToolError(
                AMBIGUOUS_TARGET,
                f"Ambiguous label: {label} ({len(rows)} visible sessions have it; pass sessionKey)",
                "label",
            )
        return rows[0]

    def rows(
        self,
        svc: ToolHost,
        *,
        agent_id: str | None = None,
        kinds: Collection[str] | None = None,
        label: str | None = None,
        search: str | None = None,
        active_minutes: float | None = None,
        limit: int | None = None,
        archived: bool | None = None,
    ) -> list[SessionRow]:
        """The visible registry rows that pass the filters, most recently updated first."""
        if self.scope_agent is not None and agent_id not in (None, self.scope_agent):
            return []
        keys = None
        if self.pairs is not None:
            keys = {key for _, key in self.pairs | self.read_pairs}
        rows = svc.session_rows(
            agent_id=agent_id or self.scope_agent,
            kinds=list(kinds) if kinds is not None else None,
            label=label,
            search=search,
            active_minutes=active_minutes,
            limit=limit if keys is None else None,  # a set of pairs is filtered here
            keys=keys,
            archived=archived,
        )
        visible = [row for row in rows if self.admits(row)]
        return visible[:limit] if limit is not None else visible

    def visible_pairs(self, svc: ToolHost, pairs: Collection[Pair]) -> set[Pair]:
        """Those of `pairs` that name a visible live session."""
        if not pairs:
            return set()
        rows = svc.session_rows(keys=list({key for _, key in pairs}))
        return {(row.agent_id, row.key) for row in rows if self.admits(row)} & set(pairs)


def tree_of(svc: ToolHost, root: Pair) -> set[Pair]:
    """`root` and every live session it spawned, transitively, matched by (agent, key)."""
    return subtree(svc.read_model, {root})


def _watched_groups(svc: ToolHost, caller: str, agent: str) -> frozenset[Pair]:
    """The same-agent `group` sessions the caller holds a cursor on ("reads include watched
    same-agent groups")."""
    if agent_of(caller) is None:
        return frozenset()  # a bare key never watches (R-W3)
    cursors = svc.read_model.cursors_of_watcher(caller, pending_only=False)
    targets = {row.target_id for row in cursors}
    if not targets:
        return frozenset()
    keys = list({row.target_key for row in cursors})
    rows = svc.session_rows(keys=keys, agent_id=agent, kinds=["group"])
    return frozenset((row.agent_id, row.key) for row in rows if row.session_id in targets)


def _only_agent_of(svc: ToolHost, key: str) -> str | None:
    agents = {row.agent_id for row in svc.session_rows(keys=[key])}
    return agents.pop() if len(agents) == 1 else None
