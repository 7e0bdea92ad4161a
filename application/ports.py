"""Ports the application owns; adapters live in infrastructure or in the host
(docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from session_awareness.domain.positions import notice_open
from session_awareness.domain.upstream import UpstreamLink

if TYPE_CHECKING:
    from eventsourcing.persistence import Notification

    from session_awareness.application.projection import RowChange

#: The service clock: returns an aware UTC datetime. Producer timestamps never replace it.
Clock = Callable[[], datetime]
#: Called after commit with the key of a watcher (not a sub-agent) for whom a notice opened.
Waker = Callable[[str], None]
#: The host's message delivery for `sessions_send`: (sender_key, target_key, message) -> the key
#: of the session that actually received it; raises when delivery fails. One that declares a
#: `timeout_seconds` keyword receives the call's timeout (None when not given) and may return
#: `{"sessionKey": …, "status": "accepted" | "ok" | "no_reply" | "timeout" | "error",
#: "reply": …}` instead (application/tools/sending.py).
Dispatcher = Callable[..., Any]
#: The host's `sessions_spawn`: (caller_key, request) -> (childSessionKey, runId). The request
#: is the validated tool input with camelCase keys (`task`, `runtime`, `context`, `sandbox`,
#: `thread`, and `label`, `model`, `thinking` when given); the host starts the child from it,
#: or raises to refuse.
Spawner = Callable[[str, dict[str, Any]], tuple[str, str]]
#: The host's `subagents` cancel: (caller_key, child_key, run_id) -> None; raises to refuse.
#: The run's end is recorded when the host reports it (`record_run_terminal`).
Canceller = Callable[[str, str, str], None]


#: The default clock, read by the application, never by the domain: the aware UTC reading
#: (`datetime.now(UTC)`, bound without a function of ours around it).
system_clock: Clock = partial(datetime.now, UTC)


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
    #: What the log knows: the channel of the latest human turn, and the latest run the
    #: session had as a child (`running`, or its outcome), with its start and end times.
    channel: str | None = None
    run_id: str | None = None
    run_status: str | None = None
    run_started_at: int | None = None
    run_ended_at: int | None = None
    #: The host's marks.
    pinned: bool = False
    archived: bool = False

    @property
    def last_run_aborted(self) -> bool | None:
        """Whether the latest run was cancelled or timed out (None: never ran as a child)."""
        if self.run_status is None:
            return None
        return self.run_status in ("cancelled", "timeout")


@dataclass(frozen=True, slots=True)
class Head:
    state_version: int
    pruned_watermark: int


#: One retained `changesSince` row as the read model returns it: (sequence, kind, actor_type,
#: actor_id, run_id, occurred_at, summary, payload as stored JSON text). A plain tuple: a
#: 200-event page builds no per-row object beyond the response's own (bench `changes`).
ChangeRow = tuple[int, str, str, str | None, str | None, int, str, str | None]


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
        return notice_open(self.acknowledged, self.notified)


#: One page of the live cursors a filter selects, as `cursor_page` returns it: (the page's
#: rows, how many cursors the filter selects, how many of those have a notice open, R-N1).
#: A plain tuple, as `ChangeRow`: importing the ports (the hook's start-up) builds no class.
CursorPage = tuple[list[CursorRow], int, int]


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
    #: The session's agent and key, as the registry has them, and the recording position of
    #: its last row the plan removes (a batch's plan gives them).
    agent_id: str | None = None
    key: str | None = None
    last_position: int = 0


@dataclass(frozen=True, slots=True)
class UpstreamLinkRow:
    """An adopted session's upstream link, with the session it belongs to (R-U1)."""

    session_id: UUID
    agent_id: str
    session_key: str
    link: UpstreamLink
    updated_at: int


class ReadModel(Protocol):
    """The queries the service asks of its read models (implemented by the recorders)."""

    def sessions_with_key(self, key: str, *, include_deleted: bool = False) -> list[SessionRow]:
        """Sessions whose key is `key`, across agents."""

    def gone_keys(self, keys: Collection[str]) -> set[str]:
        """Of `keys` (a bounded batch: one statement, the keys one bound parameter), those
        whose sessions are all deleted; a key no session has is not gone."""

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
        archived: bool | None = None,
        offset: int = 0,
    ) -> list[SessionRow]:
        """Live sessions, most recently updated first; `search` is a case-insensitive
        substring of the key or label; `keys` restricts the rows to those keys; `archived`
        to the archived (True) or the active (False) ones; `offset` skips that many of the
        matching rows first (a page further down, read in the registry's index order)."""

    def read_models_outdated(self) -> bool:
        """Whether the read models were written by an earlier version (a rebuild migrates)."""

    def store_version(self) -> int | None:
        """The store format version the store was last migrated to (`STORE_VERSION` of the
        newest version that opened it), or None when no version marked it yet."""

    def mark_store_version(self, version: int) -> None:
        """Raise the store's version mark to `version`; a lower one never replaces it."""

    def read_models_complete(self) -> int | None:
        """The read-model format a start or the maintenance last found complete in this store
        or rebuilt it to (ADR 044), or None when none did (every store an earlier version
        wrote)."""

    def mark_read_models_complete(self, read_format: int) -> None:
        """Set the read-models mark to `read_format` (set, not raised: ADR 044)."""

    def dedupe_key_seen(self, session_id: UUID, dedupe_key: str) -> bool:
        """Whether the session ever recorded this idempotency key (R-L5): exact for every
        key, read from the key index its signals wrote."""

    def children_of(self, parent_keys: Collection[str]) -> dict[str, list[tuple[str, str]]]:
        """The live sessions whose parent key is each of `parent_keys`, as (agent id, key)
        pairs sorted by key: every agent's, so a bare parent key's children of other agents
        are among them (`application.queries.children_by_pair` keeps a parent's own)."""

    def cursors_of_watcher(
        self, watcher_key: str, *, pending_only: bool, limit: int | None = None
    ) -> list[CursorRow]:
        """A watcher's cursors; pending ones come oldest notice first; at most `limit`."""

    def pending_to_drain(self, watcher_key: str) -> list[tuple[UUID, int]]:
        """A drain's read: each pending cursor of the watcher (oldest notice first) and its
        derived M, without the rest of its row."""

    def pending_of_watchers(
        self, watcher_keys: Collection[str]
    ) -> dict[str, list[tuple[UUID, int]]]:
        """`pending_to_drain` of each watcher of a bounded batch, in one statement; watchers
        without a pending cursor are left out."""

    def cursors_on_target(self, target_id: UUID, *, limit: int | None = None) -> list[CursorRow]:
        """The cursors on a session, by watcher key; at most `limit`."""

    def cursor_page(
        self,
        *,
        watcher_key: str | None = None,
        target_key: str | None = None,
        pending_only: bool = False,
        offset: int = 0,
        limit: int,
    ) -> CursorPage:
        """The live cursors of a watcher, on a target key (every agent's session with that
        key) and with a notice open, each filter when given: at most `limit` of them after
        the first `offset`, by watcher key, target key (both by code point) and target id,
        read in that order from an index or from one target's cursors; and how many the
        filters select, counted by the store (the console's cursor pages, issue 39)."""

    def cursors_updated_before(self, before: int) -> list[CursorRow]: ...

    def cursors_idle_before(
        self, before: int, *, after: tuple[int, UUID] | None = None, limit: int
    ) -> list[tuple[int, CursorRow]]:
        """A page of `cursors_updated_before(before)`, at most `limit` rows, each with its
        row's stored time, in the order of that time and the watch id, after `after` (the
        previous page's last stored time and watch id): the prune expires idle cursors a
        page at a time, with memory that does not grow with the store (ADR 038)."""

    def cursors_idle_count(self, before: int) -> int:
        """How many cursors `cursors_updated_before(before)` would list, counted by the
        store (a prune's preview)."""

    def cursor_counts(self) -> tuple[int, int]:
        """How many cursors are live, and how many of them have a notice open (R-N1): what
        an operator's figures show, counted by the store, without reading the rows."""

    def watchers_with_pending(self) -> list[str]: ...

    def watchers_pending_count(self) -> int:
        """How many watchers `watchers_with_pending` would list, counted by the store."""

    def newest_recorded(self, *, before: int) -> int | None:
        """The newest bookkeeping time (ms) of a retained row or a cursor earlier than
        `before`; None when there is none."""
        ...

    def prune_plan(
        self, *, recorded_before: int, keep_rows: int, limit: int | None = None, after: int = 0
    ) -> list[PrunePlan]:
        """Per session, what retention removes: rows older than the cutoff, then all but the
        newest `keep_rows` rows; always a per-session prefix, so the watermark is exact.
        With `limit`, only the oldest `limit` such rows recorded after position `after` are
        planned: one bounded batch, whose cost grows with the rows it removes, not the
        store (a pass gives each batch the last position the one before removed)."""

    def prune_preview_plan(self, *, recorded_before: int, keep_rows: int) -> list[PrunePlan]:
        """`prune_plan`'s whole plan narrowed to what a prune would raise now: the live
        sessions whose head's pruned watermark is below the plan's, each with its agent and
        key, in the plan's order; one statement, whatever the number of sessions."""

    def aggregate_versions(self, ids: Collection[UUID]) -> dict[UUID, int]:
        """The latest stored version of each aggregate of `ids` that has events (a bounded
        batch: one statement, its ids one bound parameter)."""

    def upstream_links(self, *, watched_only: bool = False) -> list[UpstreamLinkRow]:
        """Live sessions' upstream links by agent and key; with `watched_only`, only those
        whose session has at least one watcher's cursor (R-U2)."""

    def upstream_link(self, session_id: UUID) -> UpstreamLinkRow | None: ...


# -- audits (R-R2): replay into scratch read models and compare them with the live ones ------


class ReplayTarget(Protocol):
    """Where an audit reads stored events from and writes the replayed row changes to."""

    def notifications(self, after: int, limit: int) -> Sequence[Notification]:
        """Stored events with notification id > `after`, in order, at most `limit`."""

    def apply(self, changes: Sequence[RowChange]) -> None:
        """Write row changes to the scratch read models."""


class LookAhead(Protocol):
    """Stored events of a few topics ahead of a replay's page, read without the others:
    what lets a replay skip the rows a later event deletes (`application/replay.py`)."""

    def notifications_of(
        self, topics: Collection[str], after: int, upto: int
    ) -> Sequence[Notification]:
        """Stored events with one of `topics` and a notification id in (`after`, `upto`],
        in order; never one past what the target's own `notifications` would read."""


class AuditView(ReplayTarget, LookAhead, Protocol):
    """The live read models and the scratch copy in one transaction on the live store, which
    holds still meanwhile: a snapshot for an audit, the writers' lock for a rebuild."""

    #: The newest notification id the view sees; `notifications` stops there.
    last_id: int

    def tables(self) -> dict[str, tuple[str, ...]]:
        """Each read-model table and its key columns."""

    def row_counts(self, table: str) -> tuple[int, int]:
        """(live rows, rebuilt rows)."""

    def differences(
        self, table: str
    ) -> Iterator[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
        """(live row, rebuilt row) for every key whose rows differ, a side None when that
        copy lacks the key; values backend-neutral (ids as hex); in key order."""

    def replace_live(self) -> None:
        """Make the live read models a copy of the scratch ones (committed with the view)."""


class Scratch(ReplayTarget, LookAhead, Protocol):
    """A throwaway copy of the read-model tables (a temp database or a temp schema)."""

    def against_live(self, *, lock: bool) -> AbstractContextManager[AuditView]: ...


class AuditStore(Protocol):
    """What an audit and a session's history need from the store, beyond `ReadModel`."""

    def last_notification_id(self) -> int: ...

    def scratch(self) -> AbstractContextManager[Scratch]:
        """Empty scratch read models, dropped on exit."""

    def streams(self, originator_ids: Collection[UUID]) -> Sequence[Notification]:
        """Every stored event of these aggregates, in recording (notification) order."""
