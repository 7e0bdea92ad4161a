"""The Session aggregate: one per (agentId, sessionKey); its signal events are the signal log.

`state_version` counts signal events only (R-L4); the aggregate version counts every event.
The session also keeps the index of who watches it, so the record path needs no query (D2).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from eventsourcing.domain import Aggregate

from session_awareness.domain.keys import SessionRef
from session_awareness.domain.signals import (
    MAX_SUMMARY_LENGTH,
    ActorType,
    InvalidSignalError,
    Payload,
    SignalKind,
    one_line,
)

SESSION_KINDS = frozenset({"main", "group", "cron", "hook", "node", "subagent", "other"})
T = "session_awareness:Session"


class Session(Aggregate):
    """A session's lifecycle, its contiguous signal log, its watchers and its pruned watermark."""

    TOPIC = T

    class Event(Aggregate.Event):
        TOPIC = f"{T}.Event"

    class Created(Event, Aggregate.Created):
        TOPIC = f"{T}.Created"

    class Opened(Created):
        """The session was opened for the first time."""

        TOPIC = f"{T}.Opened"
        agent_id: str
        key: str
        kind: str
        label: str | None
        parent_key: str | None

    class Reopened(Event):
        """A deleted session's key was opened again; its sequences continue (R-L4)."""

        TOPIC = f"{T}.Reopened"
        kind: str
        label: str | None
        parent_key: str | None

        def apply(self, aggregate: Session) -> None:
            aggregate.deleted = False
            aggregate.kind, aggregate.label = self.kind, self.label
            aggregate.parent_key = self.parent_key

    class Signal(Event):
        """Base of the signal events; never stored itself."""

        TOPIC = f"{T}.Signal"
        KIND: ClassVar[SignalKind]
        sequence: int
        actor_type: str
        actor_id: str | None
        run_id: str | None
        occurred_at: int
        summary: str
        payload: dict[str, Any] | None
        dedupe_key: str | None

        def apply(self, aggregate: Session) -> None:
            aggregate.state_version = self.sequence
            if self.dedupe_key is not None:
                aggregate.seen[self.dedupe_key] = self.sequence

    class HumanDirectMessage(Signal):
        TOPIC = f"{T}.HumanDirectMessage"
        KIND = SignalKind.HUMAN_DIRECT_MESSAGE

    class UpstreamMissing(Signal):
        TOPIC = f"{T}.UpstreamMissing"
        KIND = SignalKind.UPSTREAM_MISSING

    class GoalChanged(Signal):
        TOPIC = f"{T}.GoalChanged"
        KIND = SignalKind.GOAL_CHANGED

    class ChildSpawned(Signal):
        """A spawn edge: the actor (the parent) becomes the session's parent."""

        TOPIC = f"{T}.ChildSpawned"
        KIND = SignalKind.CHILD_SPAWNED

        def apply(self, aggregate: Session) -> None:
            super().apply(aggregate)
            aggregate.parent_key = self.actor_id

    class RunCompleted(Signal):
        TOPIC = f"{T}.RunCompleted"
        KIND = SignalKind.RUN_COMPLETED

    class RunFailed(Signal):
        TOPIC = f"{T}.RunFailed"
        KIND = SignalKind.RUN_FAILED

    class Compacted(Signal):
        TOPIC = f"{T}.Compacted"
        KIND = SignalKind.COMPACTED

    class Adopted(Signal):
        TOPIC = f"{T}.Adopted"
        KIND = SignalKind.ADOPTED

    class WatcherAdded(Event):
        TOPIC = f"{T}.WatcherAdded"
        watcher: str

        def apply(self, aggregate: Session) -> None:
            aggregate.watchers[self.watcher] = True

    class WatcherRemoved(Event):
        TOPIC = f"{T}.WatcherRemoved"
        watcher: str

        def apply(self, aggregate: Session) -> None:
            aggregate.watchers.pop(self.watcher, None)

    class HistoryPruned(Event):
        """Retention removed the retained rows up to `watermark` (R-R1, R-S3)."""

        TOPIC = f"{T}.HistoryPruned"
        watermark: int

        def apply(self, aggregate: Session) -> None:
            aggregate.pruned_watermark = max(aggregate.pruned_watermark, self.watermark)

    class Reset(Event):
        """The session was reset: its history is kept, the cursors it held are removed."""

        TOPIC = f"{T}.Reset"

    class Deleted(Event):
        """The session was deleted: its retained rows go, up to `watermark` (its head)."""

        TOPIC = f"{T}.Deleted"
        watermark: int

        def apply(self, aggregate: Session) -> None:
            aggregate.deleted = True
            aggregate.watchers.clear()
            aggregate.pruned_watermark = max(aggregate.pruned_watermark, self.watermark)

    SIGNAL_CLASSES: ClassVar[dict[SignalKind, type[Session.Signal]]]

    def __init__(
        self, agent_id: str, key: str, kind: str, label: str | None, parent_key: str | None
    ) -> None:
        self.agent_id = agent_id
        self.key = key
        self.kind = kind
        self.label = label
        self.parent_key = parent_key
        self.state_version = 0
        self.pruned_watermark = 0
        self.deleted = False
        self.watchers: dict[str, bool] = {}
        self.seen: dict[str, int] = {}

    # -- lifecycle -------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        ref: SessionRef,
        *,
        kind: str,
        label: str | None,
        parent_key: str | None,
        at: datetime,
    ) -> Session:
        """Open a new session for `ref`."""
        check_kind(kind)
        return cls._create(
            cls.Opened,
            id=ref.session_id,
            timestamp=at,
            agent_id=ref.agent_id,
            key=ref.key,
            kind=kind,
            label=label,
            parent_key=parent_key,
        )

    @property
    def ref(self) -> SessionRef:
        return SessionRef(self.agent_id, self.key)

    def reopen(self, *, kind: str, label: str | None, parent_key: str | None, at: datetime) -> None:
        """Open a deleted session's key again."""
        check_kind(kind)
        if not self.deleted:
            raise SessionStateError(f"session {self.key!r} is open")
        self.trigger_event(
            self.Reopened, timestamp=at, kind=kind, label=label, parent_key=parent_key
        )

    def reset(self, *, at: datetime) -> None:
        self.check_open()
        self.trigger_event(self.Reset, timestamp=at)

    def delete(self, *, at: datetime) -> None:
        self.check_open()
        self.trigger_event(self.Deleted, timestamp=at, watermark=self.state_version)

    # -- the signal log --------------------------------------------------------------------

    def has_seen(self, dedupe_key: str | None) -> bool:
        """Whether an idempotent producer already recorded this key (R-L5)."""
        return dedupe_key is not None and dedupe_key in self.seen

    def record(
        self,
        kind: SignalKind,
        *,
        actor_type: ActorType,
        summary: str,
        occurred_at: int,
        at: datetime,
        actor_id: str | None = None,
        run_id: str | None = None,
        payload: Payload | None = None,
        dedupe_key: str | None = None,
    ) -> int:
        """Append one signal as the next sequence (R-L4) and return that sequence."""
        self.check_open()
        if one_line(summary, limit=MAX_SUMMARY_LENGTH) != summary or not summary:
            raise InvalidSignalError("a summary is one non-blank line (R-L2)")
        if self.has_seen(dedupe_key):
            raise DuplicateSignalError(f"{kind.value} {dedupe_key!r} already recorded")
        sequence = self.state_version + 1
        self.trigger_event(
            self.SIGNAL_CLASSES[kind],
            timestamp=at,
            sequence=sequence,
            actor_type=actor_type.value,
            actor_id=actor_id,
            run_id=run_id,
            occurred_at=occurred_at,
            summary=summary,
            payload=payload.as_dict() if payload else None,
            dedupe_key=dedupe_key,
        )
        return sequence

    def prune_history(self, watermark: int, *, at: datetime) -> None:
        """Raise the pruned watermark; it never goes down nor past the head (R-R1)."""
        if watermark > self.state_version:
            raise SessionStateError("cannot prune past the head")
        if watermark > self.pruned_watermark:
            self.trigger_event(self.HistoryPruned, timestamp=at, watermark=watermark)

    # -- the watcher index -----------------------------------------------------------------

    def add_watcher(self, watcher: str, *, at: datetime) -> None:
        self.check_open()
        if watcher not in self.watchers:
            self.trigger_event(self.WatcherAdded, timestamp=at, watcher=watcher)

    def remove_watcher(self, watcher: str, *, at: datetime) -> None:
        if watcher in self.watchers:
            self.trigger_event(self.WatcherRemoved, timestamp=at, watcher=watcher)

    def check_open(self) -> None:
        if self.deleted:
            raise SessionStateError(f"session {self.key!r} is deleted")


Session.SIGNAL_CLASSES = {
    cls.KIND: cls
    for cls in (
        Session.HumanDirectMessage,
        Session.UpstreamMissing,
        Session.GoalChanged,
        Session.ChildSpawned,
        Session.RunCompleted,
        Session.RunFailed,
        Session.Compacted,
        Session.Adopted,
    )
}


def check_kind(kind: str) -> None:
    if kind not in SESSION_KINDS:
        raise SessionStateError(
            f"invalid session kind {kind!r}; expected one of {', '.join(sorted(SESSION_KINDS))}"
        )


class SessionStateError(Exception):
    """A lifecycle command that the session's current state does not allow."""


class DuplicateSignalError(SessionStateError):
    """An idempotent producer repeated a key the session has already recorded."""


__all__ = ["SESSION_KINDS", "DuplicateSignalError", "Session", "SessionStateError"]
