"""Visibility: which sessions a caller's tools may see (SPEC R-T2).

`self` is the caller, `tree` the caller and every session it spawned, transitively (the
default), `agent` every session of the caller's agent, `all` everything. Nothing here needs the
caller's own session to exist. Sessions are matched by key (and agent, for `agent`); a bare key
shared by several agents is admitted under each of them, and a lookup that then finds two
visible sessions is ambiguous rather than a guess.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from session_awareness.application.errors import StoreUnavailableError
from session_awareness.application.ports import SessionRow
from session_awareness.application.queries import Queries
from session_awareness.application.tools.errors import (
    AMBIGUOUS_TARGET,
    UNKNOWN_SESSION,
    ToolError,
    from_service,
    unknown_session,
)
from session_awareness.domain.keys import agent_of


@dataclass(frozen=True, slots=True)
class Visibility:
    """What one caller may see: a set of keys, an agent, or both unrestricted (`all`)."""

    mode: str
    caller: str
    keys: frozenset[str] | None = None
    agent_id: str | None = None

    @classmethod
    def of(cls, svc: Queries, mode: str, caller: str) -> Visibility:
        """The caller's view under the service's configured mode; an unreachable store is a
        `service_error`, as in every tool."""
        try:
            return cls._of(svc, mode, caller)
        except StoreUnavailableError as error:
            raise from_service(error) from None

    @classmethod
    def _of(cls, svc: Queries, mode: str, caller: str) -> Visibility:
        if mode == "all":
            return cls(mode, caller)
        if mode == "agent":
            agent = agent_of(caller) or _only_agent_of(svc, caller)
            if agent is not None:
                return cls(mode, caller, agent_id=agent)
            return cls(mode, caller, keys=frozenset({caller}))  # a bare key of no single agent
        if mode == "tree":
            return cls(mode, caller, keys=frozenset({caller, *svc.descendants(caller)}))
        return cls(mode, caller, keys=frozenset({caller}))

    def admits(self, row: SessionRow) -> bool:
        if self.keys is not None and row.key not in self.keys:
            return False
        return self.agent_id is None or row.agent_id == self.agent_id

    def find(self, svc: Queries, key: str, field: str = "sessionKey") -> SessionRow:
        """The one visible live session with this key; invisible reads as unknown (R-T2)."""
        rows = [row for row in svc.session_rows(keys=[key]) if self.admits(row)]
        if not rows:
            raise unknown_session(key, field)
        if len(rows) > 1:
            agents = ", ".join(row.agent_id for row in rows)
            raise ToolError(
                AMBIGUOUS_TARGET, f"Ambiguous sessionKey: {key} (visible under agents {agents})"
            )
        return rows[0]

    def find_by_label(self, svc: Queries, label: str) -> SessionRow:
        """The one visible live session with this label."""
        rows = [row for row in self.rows(svc, label=label) if self.admits(row)]
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
        svc: Queries,
        *,
        agent_id: str | None = None,
        kinds: Collection[str] | None = None,
        label: str | None = None,
        search: str | None = None,
        active_minutes: float | None = None,
        limit: int | None = None,
    ) -> list[SessionRow]:
        """The visible registry rows that pass the filters, most recently updated first."""
        if self.agent_id is not None and agent_id not in (None, self.agent_id):
            return []
        rows = svc.session_rows(
            agent_id=agent_id or self.agent_id,
            kinds=list(kinds) if kinds is not None else None,
            label=label,
            search=search,
            active_minutes=active_minutes,
            limit=limit,
            keys=self.keys,
        )
        return [row for row in rows if self.admits(row)]

    def visible_keys(self, svc: Queries, keys: Collection[str]) -> set[str]:
        """Those of `keys` that name a visible live session."""
        if not keys:
            return set()
        return {row.key for row in svc.session_rows(keys=list(keys)) if self.admits(row)}


def _only_agent_of(svc: Queries, key: str) -> str | None:
    agents = {row.agent_id for row in svc.session_rows(keys=[key])}
    return agents.pop() if len(agents) == 1 else None
