"""`ToolHost`: what the session tools use of the service, and nothing more.

The tools depend on this port, not on the service module, so the service can build its tools
without the two importing each other.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from session_awareness.application.ports import (
    Canceller,
    Clock,
    Dispatcher,
    ReadModel,
    SessionRow,
    Spawner,
)

if TYPE_CHECKING:
    from session_awareness.application.watching import Handover


class ToolHost(Protocol):
    """The service as the session tools see it (R-T1–R-T3)."""

    @property
    def visibility(self) -> str: ...

    @property
    def dispatcher(self) -> Dispatcher | None: ...

    @property
    def spawner(self) -> Spawner | None: ...

    @property
    def canceller(self) -> Canceller | None: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def read_model(self) -> ReadModel: ...

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
    ) -> list[SessionRow]: ...

    def is_sandboxed(self, key: str, *, agent_id: str | None = None) -> bool: ...

    def open_session(
        self,
        key: str,
        *,
        agent_id: str | None = None,
        kind: str | None = None,
        label: str | None = None,
        parent: str | None = None,
        sandboxed: bool | None = None,
    ) -> None: ...

    def record_child_spawned(
        self, child_key: str, *, parent: str, run_id: str, agent_id: str | None = None
    ) -> int | None: ...

    def watch(self, watcher: str, target: str, *, target_agent_id: str | None = None) -> bool: ...

    def unwatch(self, watcher: str, target: str, *, target_agent_id: str | None = None) -> bool: ...

    def pending_notices(self, watcher: str) -> list[str]: ...

    def drain_notices(self, watcher: str) -> list[str]: ...

    def hand_over_notices(self, watcher: str) -> Handover: ...

    def session_status(
        self, key: str, *, changes_since: object = None, agent_id: str | None = None
    ) -> dict[str, Any]: ...

    def sessions_history(
        self,
        key: str,
        *,
        limit: int | None = None,
        offset: int | None = None,
        include_tools: bool = False,
        agent_id: str | None = None,
        before: str | None = None,
    ) -> dict[str, Any]: ...
