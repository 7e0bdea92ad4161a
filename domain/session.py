"""The Session aggregate: one per (agentId, sessionKey); its signal events are the signal log.

`state_version` counts signal events only (R-L4); the aggregate version counts every event.
The session also keeps the index of who watches it, so the record path needs no query (D2).
Of its idempotency keys it keeps only the most recent (`RECENT_KEYS`): every key it ever
recorded is in the read model's key index, which the producers consult (R-L5, ADR 022).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any, ClassVar
from uuid import UUID

from eventsourcing.domain import Aggregate

from session_awareness.domain import material as rule
from session_awareness.domain.copying import copy_state
from session_awareness.domain.keys import SessionRef, is_subagent
from session_awareness.domain.signals import (
    MAX_SUMMARY_LENGTH,
    ActorType,
    InvalidSignalError,
    Payload,
    SignalKind,
    one_line,
)
from session_awareness.domain.snapshots import StateSnapshot, snapshot_attributes
from session_awareness.domain.upstream import (
    UpstreamChangedError,
    UpstreamLink,
    UpstreamSource,
    check_marker,
)

#: The newest notify-eligible event: its sequence, its actor, when it was recorded.
Material = rule.Newest[datetime | None]
SESSION_KINDS = frozenset({"main", "group", "cron", "hook", "node", "subagent", "other"})
T = "session_awareness:Session"
#: How far up a parent's ancestry a spawn edge is checked for a cycle (R-T3).
MAX_LINEAGE = 256
#: The idempotency keys a session keeps itself: its latest, in generations of at most this
#: many (a full generation is dropped when the next key arrives). The exact answer for every
#: key ever recorded is the read model's (ADR 022).
RECENT_KEYS = 128


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
            aggregate.pinned = aggregate.archived = False  # a new life starts unmarked

    class Described(Event):
        """The host opened an open session again with a changed kind, label or first parent:
        the host is authoritative, so the change is applied, not ignored (R-K3)."""

        TOPIC = f"{T}.Described"
        kind: str
        label: str | None
        parent_key: str | None

        def apply(self, aggregate: Session) -> None:
            aggregate.kind, aggregate.label = self.kind, self.label
            aggregate.parent_key = self.parent_key

    class SandboxSet(Event):
        """The host marked the session sandboxed, or lifted the mark: a sandboxed session's
        tool calls see at most its tree (R-T2)."""

        TOPIC = f"{T}.SandboxSet"
        sandboxed: bool

        def apply(self, aggregate: Session) -> None:
            aggregate.sandboxed = self.sandboxed

    class PinSet(Event):
        """The host pinned the session, or unpinned it (a mark its `sessions_list` row shows)."""

        TOPIC = f"{T}.PinSet"
        pinned: bool

        def apply(self, aggregate: Session) -> None:
            aggregate.pinned = self.pinned

    class ArchiveSet(Event):
        """The host archived the session, or brought it back: an archived session keeps its
        log and cursors and is listed only when archived sessions are asked for."""

        TOPIC = f"{T}.ArchiveSet"
        archived: bool

        def apply(self, aggregate: Session) -> None:
            aggregate.archived = self.archived

    class TranscriptNoted(Event):
        """Where the session's transcript can be read (`source` names its format, `ref`
        locates it, e.g. a Claude Code JSONL path); the content itself is never stored."""

        TOPIC = f"{T}.TranscriptNoted"
        source: str
        ref: str

        def apply(self, aggregate: Session) -> None:
            aggregate.transcript = (self.source, self.ref)

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
                if len(aggregate.seen) >= RECENT_KEYS:
                    aggregate.seen = set()
                aggregate.seen.add(self.dedupe_key)
            if self.KIND.notifies:
                aggregate.material_moved(self.sequence, self.actor_id, self.timestamp)

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
            aggregate.upstream = None  # the link goes with the session (R-W6)
            aggregate.transcript = None
            aggregate.pruned_watermark = max(aggregate.pruned_watermark, self.watermark)

    class UpstreamLinked(Event):
        """The session was linked to an upstream source, or its link refreshed (R-U1)."""

        TOPIC = f"{T}.UpstreamLinked"
        catalog_id: str
        host_id: str
        thread_id: str
        upstream_kind: str
        upstream_ref: str
        marker: str | None
        position: str | None
        generation: int

        @property
        def source(self) -> UpstreamSource:
            return UpstreamSource(
                self.catalog_id, self.host_id, self.thread_id, self.upstream_kind, self.upstream_ref
            )

        def apply(self, aggregate: Session) -> None:
            aggregate.upstream = UpstreamLink(
                self.source, self.generation, self.marker, self.position
            )
            aggregate.link_generation = self.generation

    class UpstreamAdvanced(Event):
        """The monitor read the upstream up to `marker` (R-U3)."""

        TOPIC = f"{T}.UpstreamAdvanced"
        marker: str | None
        position: str | None

        def apply(self, aggregate: Session) -> None:
            link = aggregate.upstream
            if link is not None:
                aggregate.upstream = UpstreamLink(
                    link.source, link.generation, self.marker, self.position or link.position
                )

    class UpstreamUnlinked(Event):
        """The upstream link was removed (`missing`: its source disappeared, R-U4)."""

        TOPIC = f"{T}.UpstreamUnlinked"
        reason: str

        def apply(self, aggregate: Session) -> None:
            aggregate.upstream = None

    class Snapshot(StateSnapshot):
        """The session's state at a version (ADR 022)."""

        TOPIC = f"{T}.Snapshot"

    SIGNAL_CLASSES: ClassVar[dict[SignalKind, type[Session.Signal]]]
    #: The form of `snapshot_state`; a change of it is a new shape, read by `restore_state`.
    SNAPSHOT_SHAPE: ClassVar[int] = 1
    #: Whether the host marked the session sandboxed; a class default, so a session stored
    #: before the mark existed reads as not sandboxed.
    sandboxed: bool = False
    #: The host's pin and archive marks; class defaults for the same reason.
    pinned: bool = False
    archived: bool = False
    #: The transcript's (source, ref), when the host noted one; a class default, so a session
    #: stored before transcripts were noted reads as having none.
    transcript: tuple[str, str] | None = None
    #: The newest notify-eligible event (its sequence, actor and time) and the newest one
    #: whose actor is not that one: what every cursor's M is derived from (`material_for`).
    material: Material = (0, None, None)
    material_other: tuple[int, datetime | None] = (0, None)

    def __deepcopy__(self, memo: dict[int, object]) -> Session:
        """The repository hands out a copy of each cached aggregate (so a failed save never
        corrupts the cache). Containers are copied one level deep, everything else shared:
        every value kept in them is immutable. `copy.deepcopy` walked each of a long session's
        idempotency keys on every load (bench/PROPOSALS.md, P4)."""
        return copy_state(self)

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
        self.seen: set[str] = set()  # the latest idempotency keys recorded (R-L5)
        self.upstream: UpstreamLink | None = None
        self.link_generation = 0

    def snapshot_state(self) -> dict[str, Any]:
        """The session's attributes in JSON's types (`Session.Snapshot`)."""
        state = snapshot_attributes(self)
        state["seen"] = sorted(self.seen)
        if self.transcript is not None:
            state["transcript"] = list(self.transcript)
        link = self.upstream
        state["upstream"] = None if link is None else {
            "catalog_id": link.source.catalog_id, "host_id": link.source.host_id,
            "thread_id": link.source.thread_id, "upstream_kind": link.source.upstream_kind,
            "upstream_ref": link.source.upstream_ref, "generation": link.generation,
            "marker": link.marker, "position": link.position,
        }  # fmt: skip
        return state

    @classmethod
    def restore_state(cls, state: dict[str, Any]) -> dict[str, Any]:
        """The attributes `snapshot_state` wrote, as the session keeps them."""
        attributes = dict(state)
        attributes["seen"] = set(state["seen"])
        for name in ("material", "material_other"):  # tuples, stored as JSON's lists
            if name in state:
                attributes[name] = tuple(state[name])
        if state.get("transcript") is not None:
            source, ref = state["transcript"]
            attributes["transcript"] = (source, ref)
        link = state.get("upstream")
        if link is not None:
            source = UpstreamSource(
                link["catalog_id"], link["host_id"], link["thread_id"], link["upstream_kind"],
                link["upstream_ref"],
            )  # fmt: skip
            attributes["upstream"] = UpstreamLink(
                source, link["generation"], link["marker"], link["position"]
            )
        return attributes

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
        lineage: Collection[str] = (),
    ) -> Session:
        """Open a new session for `ref`; `lineage` is the parent's ancestry, the parent
        first (a session is never its own ancestor, R-T3)."""
        check_kind(kind)
        check_no_cycle(ref.key, parent_key, lineage)
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

    def reopen(
        self,
        *,
        kind: str,
        label: str | None,
        parent_key: str | None,
        at: datetime,
        lineage: Collection[str] = (),
    ) -> None:
        """Open a deleted session's key again: a new life, which may have a new parent."""
        check_kind(kind)
        if not self.deleted:
            raise SessionStateError(f"session {self.key!r} is open")
        check_no_cycle(self.key, parent_key, lineage)
        self.trigger_event(
            self.Reopened, timestamp=at, kind=kind, label=label, parent_key=parent_key
        )

    def describe(
        self,
        *,
        kind: str,
        label: str | None,
        parent_key: str | None,
        at: datetime,
        lineage: Collection[str] = (),
    ) -> bool:
        """Apply the host's kind, label and parent to an open session; True when anything
        changed. A parent is only ever given once: a different one is refused (R-T3)."""
        self.check_open()
        check_kind(kind)
        parent_key = parent_key or self.parent_key
        self.check_parent(parent_key, lineage)
        if (kind, label, parent_key) == (self.kind, self.label, self.parent_key):
            return False
        self.trigger_event(
            self.Described, timestamp=at, kind=kind, label=label, parent_key=parent_key
        )
        return True

    def mark_sandboxed(self, sandboxed: bool, *, at: datetime) -> bool:
        """Set or lift the sandbox mark; True when it changed."""
        return self._mark(self.SandboxSet, "sandboxed", sandboxed, at=at)

    def pin(self, pinned: bool, *, at: datetime) -> bool:
        """Pin or unpin the session; True when the mark changed."""
        self.check_open()
        return self._mark(self.PinSet, "pinned", pinned, at=at)

    def archive(self, archived: bool, *, at: datetime) -> bool:
        """Archive the session or bring it back; True when the mark changed."""
        self.check_open()
        return self._mark(self.ArchiveSet, "archived", archived, at=at)

    def _mark(self, event: type[Session.Event], name: str, value: bool, *, at: datetime) -> bool:
        """Record a host's mark (an event carrying the one field `name`) when it changes."""
        if getattr(self, name) == value:
            return False
        self.trigger_event(event, timestamp=at, **{name: value})
        return True

    def note_transcript(self, source: str, ref: str, *, at: datetime) -> bool:
        """Remember where the session's transcript is; True when that changed."""
        self.check_open()
        if not source or not ref:
            raise SessionStateError("a transcript needs a source and a reference")
        if (source, ref) == self.transcript:
            return False
        self.trigger_event(self.TranscriptNoted, timestamp=at, source=source, ref=ref)
        return True

    def check_parent(self, parent_key: str | None, lineage: Collection[str]) -> None:
        """A spawn edge from `parent_key` (whose ancestry is `lineage`, the parent first) is
        refused when it would make the session its own ancestor, or replace the parent it
        already has (R-T3). The same parent again is fine (R-W1's overwrite)."""
        check_no_cycle(self.key, parent_key, lineage)
        if self.parent_key not in (None, parent_key):
            raise ParentRefusedError(
                "reparent",
                f"session {self.key!r} already has parent {self.parent_key!r}, not {parent_key!r}",
            )

    def reset(self, *, at: datetime) -> None:
        self.check_open()
        self.trigger_event(self.Reset, timestamp=at)

    def delete(self, *, at: datetime) -> None:
        self.check_open()
        self.trigger_event(self.Deleted, timestamp=at, watermark=self.state_version)

    # -- the signal log --------------------------------------------------------------------

    def has_seen(self, dedupe_key: str | None) -> bool:
        """Whether an idempotent producer recorded this key lately (R-L5): among the latest
        `RECENT_KEYS`; whether it ever did is the read model's to say."""
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
        lineage: Collection[str] = (),
    ) -> int:
        """Append one signal as the next sequence (R-L4) and return that sequence. A spawn
        edge (`child_spawned`, its actor the parent; `lineage` the parent's ancestry) is
        refused when it would make a cycle or re-parent the session (R-T3)."""
        self.check_open()
        if one_line(summary, limit=MAX_SUMMARY_LENGTH) != summary or not summary:
            raise InvalidSignalError("a summary is one non-blank line (R-L2)")
        if self.has_seen(dedupe_key):
            raise DuplicateSignalError(f"{kind.value} {dedupe_key!r} already recorded")
        if kind is SignalKind.CHILD_SPAWNED:
            self.check_parent(actor_id, lineage)
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

    @classmethod
    def history_pruned(
        cls, session_id: UUID, *, version: int, watermark: int, at: datetime
    ) -> Session.HistoryPruned:
        """The `HistoryPruned` that follows `version` of the session `session_id`, built
        without loading it (retention's batches, ADR 038). `watermark` is the highest
        sequence of retained rows being removed, so it is at most the head and above the
        pruned watermark: what `prune_history` checks on a loaded session (R-R1). A stream
        that moved past `version` meanwhile makes the save a conflict."""
        return cls.HistoryPruned(  # type: ignore[call-arg]
            originator_id=session_id,
            originator_version=version + 1,
            timestamp=at,
            watermark=watermark,
        )

    def prune_history(self, watermark: int, *, at: datetime) -> None:
        """Raise the pruned watermark; it never goes down nor past the head (R-R1)."""
        if watermark > self.state_version:
            raise SessionStateError("cannot prune past the head")
        if watermark > self.pruned_watermark:
            self.trigger_event(self.HistoryPruned, timestamp=at, watermark=watermark)

    def material_moved(self, sequence: int, actor: str | None, at: datetime) -> None:
        """A notify-eligible event was appended: the two marks move (`material.moved`)."""
        self.material, self.material_other = rule.moved(
            self.material, self.material_other, sequence, actor, at
        )

    def material_for(self, watcher: str) -> int:
        """M for `watcher`'s cursor as the log defines it: the newest notify-eligible
        sequence not caused by the watcher (R-W5), 0 when there is none. A cursor's own
        positions bound it from below (it never counts events before the cursor started)."""
        return rule.reached(self.material, self.material_other, watcher)[0]

    def material_time_for(self, watcher: str) -> datetime | None:
        """When the newest notify-eligible event not caused by `watcher` was recorded."""
        return rule.reached(self.material, self.material_other, watcher)[1]

    # -- the watcher index -----------------------------------------------------------------

    def add_watcher(self, watcher: str, *, at: datetime) -> None:
        self.check_open()
        if watcher not in self.watchers:
            self.trigger_event(self.WatcherAdded, timestamp=at, watcher=watcher)

    def remove_watcher(self, watcher: str, *, at: datetime) -> None:
        if watcher in self.watchers:
            self.trigger_event(self.WatcherRemoved, timestamp=at, watcher=watcher)

    # -- the upstream link (R-U1–R-U5) -------------------------------------------------------

    def link_upstream(self, source: UpstreamSource, *, marker: str | None, at: datetime) -> None:
        """Link (or refresh the link to) `source`: the same source keeps its marker, a changed
        source starts from `marker` (R-U1). Every linking is a new generation (R-U4)."""
        self.check_open()
        marker = check_marker(marker)
        position = None
        if self.upstream is not None and self.upstream.source == source:
            marker, position = self.upstream.marker, self.upstream.position
        self.trigger_event(
            self.UpstreamLinked,
            timestamp=at,
            catalog_id=source.catalog_id,
            host_id=source.host_id,
            thread_id=source.thread_id,
            upstream_kind=source.upstream_kind,
            upstream_ref=source.upstream_ref,
            marker=marker,
            position=position,
            generation=self.link_generation + 1,
        )

    def advance_upstream(
        self, expected: UpstreamLink, *, marker: str | None, position: str | None, at: datetime
    ) -> None:
        """Move the scan marker of the link a scan read; nothing when it does not move."""
        self.check_upstream(expected)
        marker, position = check_marker(marker), check_marker(position, "position")
        if marker != expected.marker or (position and position != expected.position):
            self.trigger_event(
                self.UpstreamAdvanced, timestamp=at, marker=marker, position=position
            )

    def unlink_upstream(self, expected: UpstreamLink, *, reason: str, at: datetime) -> None:
        """Remove the link a scan read (R-U4)."""
        self.check_upstream(expected)
        self.trigger_event(self.UpstreamUnlinked, timestamp=at, reason=reason)

    def check_upstream(self, expected: UpstreamLink) -> None:
        """Refuse to write over a link that is not the one a scan read (refreshed, advanced,
        removed, or the session deleted meanwhile)."""
        self.check_open()
        if self.upstream != expected:
            raise UpstreamChangedError(f"the upstream link of {self.key!r} changed")

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


def check_no_cycle(key: str, parent_key: str | None, lineage: Collection[str]) -> None:
    """Refuse a parent that is the session itself or one of its descendants: the session
    would then be in its parent's ancestry (R-T3)."""
    if parent_key is not None and (parent_key == key or key in lineage):
        raise ParentRefusedError(
            "parent_cycle", f"session {key!r} cannot be a child of itself or its descendant"
        )


def check_kind(kind: str) -> None:
    if kind not in SESSION_KINDS:
        raise SessionStateError(
            f"invalid session kind {kind!r}; expected one of {', '.join(sorted(SESSION_KINDS))}"
        )


class SessionStateError(Exception):
    """A lifecycle command that the session's current state does not allow."""


class DuplicateSignalError(SessionStateError):
    """An idempotent producer repeated a key the session has already recorded."""


class ParentRefusedError(SessionStateError, ValueError):
    """A spawn edge or parent that would make a cycle or replace an established parent;
    `reason` is `parent_cycle` or `reparent` (R-T3)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


__all__ = [
    "MAX_LINEAGE",
    "RECENT_KEYS",
    "SESSION_KINDS",
    "DuplicateSignalError",
    "ParentRefusedError",
    "Session",
    "SessionStateError",
]


# -- opening -------------------------------------------------------------------------------


def default_kind(ref: SessionRef, *, otherwise: str) -> str:
    """The kind a session opens with when nobody names one: `subagent` for a key with a
    `:subagent:` segment, else `otherwise` (`main` for the host's open, `other` for a spawn's
    child, R-K2)."""
    return "subagent" if is_subagent(ref.key) else otherwise


def ensure_open(
    session: Session | None,
    ref: SessionRef,
    *,
    kind: str,
    label: str | None,
    parent_key: str | None,
    at: datetime,
    lineage: Collection[str] = (),
) -> Session:
    """`ref`'s session, open: a new one when there is none, a deleted one's key reopened (a new
    life, R-L4), else `session` as it is. The caller adds a new one to its unit of work."""
    if session is None:
        return Session.open(
            ref, kind=kind, label=label, parent_key=parent_key, at=at, lineage=lineage
        )
    if session.deleted:
        session.reopen(kind=kind, label=label, parent_key=parent_key, at=at, lineage=lineage)
    return session


def open_or_describe(
    session: Session | None,
    ref: SessionRef,
    *,
    kind: str | None,
    label: str | None,
    parent_key: str | None,
    sandboxed: bool | None,
    at: datetime,
    lineage: Collection[str] = (),
) -> tuple[Session, str | None]:
    """What the host's `open_session` does (R-K2, R-K3, R-T3): open `ref` anew (without a
    `kind`, a `subagent` for a `:subagent:` key, else `main`), or apply to the open session
    what the host gives that differs (kind, label, a first parent, the sandbox mark); what
    it leaves out stays. Returns the session and what happened: `"opened"`, `"described"`,
    or None when nothing changed. A refused parent raises `ParentRefusedError`."""
    if session is not None and not session.deleted:
        changed = session.describe(
            kind=kind or session.kind,
            label=session.label if label is None else label,
            parent_key=parent_key,
            at=at,
            lineage=lineage,
        )
        if sandboxed is not None:
            changed = session.mark_sandboxed(sandboxed, at=at) or changed
        return session, "described" if changed else None
    first_kind = kind or default_kind(ref, otherwise="main")
    session = ensure_open(
        session, ref, kind=first_kind, label=label, parent_key=parent_key, at=at, lineage=lineage
    )
    if sandboxed is not None:
        session.mark_sandboxed(sandboxed, at=at)
    return session, "opened"
