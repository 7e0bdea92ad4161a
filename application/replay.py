"""Replay of the event store through the projection, page by page (R-R2, ADR 002).

The event store is the audit trail; streaming it in notification order through the same
projection that runs inline rebuilds every read model exactly. `EventDecoder` turns the
stored events back into domain events for a replay, equal to the library mapper's.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, cast
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
