"""Replay of the event store through the projection, page by page (R-R2, ADR 002).

The event store is the audit trail; streaming it in notification order through the same
projection that runs inline rebuilds every read model exactly. `EventDecoder` turns the
stored events back into domain events for a replay, equal to the library mapper's.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID

from eventsourcing.persistence import (
    JSONTranscoder,
    Mapper,
    MapperDeserialisationError,
    StoredEvent,
    find_id_convertor,
    pass_through_convertor,
)
from eventsourcing.utils import resolve_topic

from session_awareness.application.projection import RowChange, SignalAppended, SignalUnretained
from session_awareness.domain.session import Session

if TYPE_CHECKING:
    from eventsourcing.persistence import Notification

    from session_awareness.application.ports import LookAhead


class EventDecoder:
    """`Mapper.to_domain_event` for a replay of many stored events, with the same result.

    It does what the mapper does, with the library's own JSON decoder (its `object_hook`
    revives the transcoded values), minus the per-event overheads: each topic's class and
    id conversion are looked up once, and the state is scanned directly (a state with
    anything around its one JSON object goes through the transcoder's `decode`, which
    gives the library's answer, value or error). A mapper or transcoder of another kind
    is used as it is."""

    def __init__(self, mapper: Mapper[UUID]) -> None:
        self.mapper = mapper
        self.transcoder = transcoder = mapper.transcoder
        self.fast = type(mapper) is Mapper and type(transcoder) is JSONTranscoder
        # The C scanner behind `JSONDecoder.raw_decode`, with the transcoder's object hook.
        self.scan: Callable[[str, int], tuple[Any, int]] | None = (
            cast(Any, transcoder).decoder.scan_once if self.fast else None
        )
        #: Whether states are stored as they are (no cipher, no compressor), known once.
        self.plain = not mapper.cipher and not mapper.compressor
        #: Each (topic, id type)'s class, its id conversion (None: the id passes as it
        #: is) and its class version.
        self.classes: dict[tuple[str, type], tuple[type, Callable[[Any], Any] | None, int]] = {}

    def __call__(self, stored: StoredEvent) -> Any:
        scan = self.scan
        if scan is None:
            return self.mapper.to_domain_event(stored)
        originator_id = stored.originator_id
        try:
            cls, convert, class_version = self.classes[stored.topic, type(originator_id)]
        except KeyError:
            cls, convert, class_version = self._class(stored.topic, type(originator_id))
        state = stored.state
        try:
            if not self.plain:
                if self.mapper.cipher:
                    state = self.mapper.cipher.decrypt(state)
                if self.mapper.compressor:
                    state = self.mapper.compressor.decompress(state)
            text = state.decode("utf8")
            try:
                event_state, end = scan(text, 0)
            except StopIteration:
                end = -1
            if end != len(text):
                event_state = self.transcoder.decode(state)
        except Exception as error:
            msg = (
                f"Failed to deserialise state of stored event with topic '{stored.topic}', "
                f"originator_id '{originator_id}' and originator_version "
                f"{stored.originator_version}: {error}"
            )
            raise MapperDeserialisationError(msg) from error
        event_state["originator_id"] = originator_id if convert is None else convert(originator_id)
        event_state["originator_version"] = stored.originator_version
        from_version = event_state.pop("class_version", 1)
        while from_version < class_version:
            getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(event_state)
            from_version += 1
        event: Any = object.__new__(cls)
        object.__setattr__(event, "__dict__", event_state)
        return event

    def _class(self, topic: str, id_type: type) -> tuple[type, Callable[[Any], Any] | None, int]:
        cls = resolve_topic(topic)
        convert = find_id_convertor(cls, cast(Hashable, id_type))
        found = (
            cls,
            None if convert is pass_through_convertor else convert,
            getattr(cls, "class_version", 1),
        )
        self.classes[topic, id_type] = found
        return found


#: How many positions past a signal a replay looks for an event that deletes its retained
#: row. Under the row cap a row lives until that many newer rows are recorded (50,000 by
#: default) and the next prune: 50,000-90,000 positions in the bench's store, where 132,000
#: of 182,000 rows are deleted so (bench/PROPOSALS.md). Memory holds the deletions of one
#: window at most, whatever the store's size.
LOOK_AHEAD = 100_000
#: How many positions further than it must the look-ahead reads each time it moves: a query
#: on the topics' range every this many positions, not every page.
LOOK_STEP = 10_000
#: The events that delete a session's retained rows up to their watermark.
_DELETIONS = (Session.HistoryPruned, Session.Deleted)
DELETION_TOPICS: tuple[str, ...] = tuple(cls.TOPIC for cls in _DELETIONS)


class RowsAhead:
    """What a replay knows of the events ahead that delete retained rows: each session's
    deletions (position, watermark) stored in the window past the replay's page, read
    through a `LookAhead` and decoded as the page's events are (a cipher, a compressor).

    A signal's row that one of them deletes is not written (`SignalUnretained`): the
    rebuilt table ends as it would have, since every deletion seen is replayed too (it is
    past the signal and within what the target reads: a view never looks past its own last
    position). Nothing else changes: the signal's head and `updatedAt` move, the deletion
    runs, the invariants see every event, and the comparison with the live tables is the
    same, so a damaged live row is found as before."""

    def __init__(
        self, source: LookAhead, decode: Callable[[Notification], Any], window: int
    ) -> None:
        self.source, self.decode, self.window = source, decode, window
        #: Deletions at positions up to here are known.
        self.looked = 0
        #: Each session's known deletions, (position, watermark), in position order.
        self.ahead: dict[Any, list[tuple[int, int]]] = {}
        #: Signals replayed without their row.
        self.unretained = 0

    def reach(self, first: int, last: int) -> None:
        """Know the deletions up to `last` + the window, for a page of positions `first`
        to `last`; forget those at or before `first`, which no signal of it precedes."""
        if self.looked >= last + self.window:
            return
        if self.ahead:
            kept = {}
            for session, deletions in self.ahead.items():
                later = [d for d in deletions if d[0] > first]
                if later:
                    kept[session] = later
            self.ahead = kept
        after, self.looked = max(self.looked, first), last + self.window + LOOK_STEP
        decode, ahead = self.decode, self.ahead
        for notification in self.source.notifications_of(DELETION_TOPICS, after, self.looked):
            event = decode(notification)
            if isinstance(event, _DELETIONS):
                deletion = (notification.id, event.watermark)
                ahead.setdefault(event.originator_id, []).append(deletion)

    def retained(self, changes: list[RowChange]) -> list[RowChange]:
        """`changes`, each signal whose row a deletion within the window after it removes
        made a `SignalUnretained` (in place)."""
        ahead, window = self.ahead, self.window
        if not ahead:
            return changes
        # A page's signals come in runs of one session's: its deletions are looked up
        # again only when the session changes (an identity check; a UUID hashes in Python).
        signal, session, deletions = SignalAppended, None, None
        for index, change in enumerate(changes):
            if type(change) is not signal:
                continue
            if change[0] is not session:
                session = change[0]
                deletions = ahead.get(session)
            if deletions is None:
                continue
            position, sequence = change[1], change[2]
            for at, watermark in deletions:
                if position < at <= position + window and watermark >= sequence:
                    changes[index] = SignalUnretained(session, sequence, change[10])
                    self.unretained += 1
                    break
        return changes
