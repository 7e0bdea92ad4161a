"""Ports the application owns; adapters live in infrastructure or in the host (DESIGN D3)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import UUID

#: The service clock: returns an aware UTC datetime. Producer timestamps never replace it.
Clock = Callable[[], datetime]
#: Called after commit with the key of a watcher (not a sub-agent) for whom a notice opened.
Waker = Callable[[str], None]
#: The host's message delivery for `sessions_send`: (sender_key, target_key, message) -> the key
#: of the session that actually received it; raises when delivery fails.
Dispatcher = Callable[[str, str, str], str]


def system_clock() -> datetime:
    """The default clock, read by the application, never by the domain."""
    return datetime.now(UTC)


class WakeListener(Protocol):
    """A running feed of wakes published by other processes (PostgreSQL LISTEN, R-N7)."""

    state: str  # "connected" or "reconnecting"

    def start(self) -> None: ...

    def wait_connected(self, timeout: float) -> bool: ...

    def stop(self) -> None: ...


class WakeFeed(Protocol):
    """A store that can tell this process about notices other processes opened."""

    def wake_listener(
        self, on_wake: Callable[[str], None], on_reconnect: Callable[[], None]
    ) -> WakeListener: ...


@dataclass(frozen=True, slots=True)
class SessionRow:
    session_id: UUID
    agent_id: str
    key: str
    kind: str
    label: str | None
    parent_key: str | None
    updated_at: int
    state_version: int
    deleted: bool


@dataclass(frozen=True, slots=True)
class Head:
    state_version: int
    pruned_watermark: int


@dataclass(frozen=True, slots=True)
class ChangeRow:
    sequence: int
    kind: str
    actor_type: str
    actor_id: str | None
    run_id: str | None
    occurred_at: int
    summary: str
    payload: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class CursorRow:
    watch_id: UUID
    watcher_key: str
    target_id: UUID
    target_key: str
    acknowledged: int
    notified: int
    material: int
    notice_order: int | None
    updated_at: int

    @property
    def pending(self) -> bool:
        return self.notified > self.acknowledged


@dataclass(frozen=True, slots=True)
class SessionState:
    head: Head
    changes: list[ChangeRow]
    earliest_retained: int | None


@dataclass(frozen=True, slots=True)
class PrunePlan:
    """For one session: the highest sequence retention removes, and how many rows go."""

    session_id: UUID
    watermark: int
    rows: int


class ReadModel(Protocol):
    """The queries the service asks of its read models (implemented by the recorders)."""

    def sessions_with_key(self, key: str, *, include_deleted: bool = False) -> list[SessionRow]:
        """Sessions whose key is `key`, across agents."""

    def session(self, session_id: UUID) -> SessionRow | None: ...

    def session_state(
        self, session_id: UUID, *, after: int | None, limit: int
    ) -> SessionState | None:
        """One consistent read of a live session's head and, when `after` is given, its
        retained rows with sequence > `after` (ascending, at most `limit`)."""

    def list_sessions(
        self,
        *,
        agent_id: str | None,
        kinds: Sequence[str] | None,
        label: str | None,
        updated_since: int | None,
        limit: int | None,
        search: str | None = None,
        keys: Collection[str] | None = None,
    ) -> list[SessionRow]:
        """Live sessions, most recently updated first; `search` is a case-insensitive
        substring of the key or label; `keys` restricts the rows to those keys."""

    def children_of(self, parent_keys: Collection[str]) -> dict[str, list[str]]:
        """The live sessions whose parent is each of `parent_keys`, keys sorted."""

    def cursors_of_watcher(self, watcher_key: str, *, pending_only: bool) -> list[CursorRow]:
        """A watcher's cursors; pending ones come oldest notice first."""

    def cursors_on_target(self, target_id: UUID) -> list[CursorRow]: ...

    def cursors_updated_before(self, before: int) -> list[CursorRow]: ...

    def watchers_with_pending(self) -> list[str]: ...

    def prune_plan(self, *, recorded_before: int, keep_rows: int) -> list[PrunePlan]:
        """Per session, what retention removes: rows older than the cutoff, then all but the
        newest `keep_rows` rows; always a per-session prefix, so the watermark is exact."""
