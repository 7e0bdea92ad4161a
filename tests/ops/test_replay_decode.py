"""The replay's event decoder gives the library mapper's domain events (R-R2, ADR 002)."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.compressor import ZlibCompressor
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import (
    Mapper,
    MapperDeserialisationError,
    Notification,
    StoredEvent,
)

from session_awareness.application import SessionAwareness, open_service
from session_awareness.application.replay import EventDecoder
from session_awareness.domain.session import Session
from session_awareness.domain.watch import Watch
from tests.conftest import FakeClock
from tests.ops.helpers import copied_store, mixed_workload

#: Written by tests/ops/fixtures/make_previous_cursors.py before M was derived (ADR 023).
PREVIOUS_CURSORS = Path(__file__).parent / "fixtures" / "previous-cursors.db"


@pytest.fixture
def app() -> Iterator[SessionAwareness]:
    svc = open_service("sqlite:///:memory:")
    yield svc
    svc.close()


def event_classes() -> list[type[Any]]:
    """Every event class of both aggregates, the never-stored bases included."""
    found = []
    for aggregate in (Session, Watch):
        for value in vars(aggregate).values():
            if isinstance(value, type) and issubclass(value, Aggregate.Event):
                found.append(value)
    return found


#: Field values by annotation: (one, another); the other is None for optional fields.
VALUES: dict[str, tuple[Any, Any]] = {
    "str": ("agent:main:subagent:c1", 'déjà vu \u2603 "quoted" \\ \n'),
    "int": (1, 2**53 - 1),
    "bool": (True, False),
    "UUID": (uuid.uuid4(), uuid.UUID(int=0)),
    "datetime": (
        datetime(2026, 11, 30, 4, 5, 6, 789012, tzinfo=UTC),
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=-5))),
    ),
    "str | None": ("run-7", None),
    "dict[str, Any] | None": ({"channel": "telegram", "turns": 3, "outcome": "error"}, None),
}


def events_of(cls: type[Any]) -> list[Any]:
    out = []
    for variant in (0, 1):
        values = {}
        for field in dataclasses.fields(cls):
            if field.name == "originator_topic":
                values[field.name] = "session_awareness:Session"
            else:
                values[field.name] = VALUES[str(field.type)][variant]
        out.append(cls(**values))
    return out


def same(left: Any, right: Any) -> bool:
    return type(left) is type(right) and vars(left) == vars(right) and left == right


def stored(mapper: Mapper[Any], event: Any, position: int = 1) -> Notification:
    record = mapper.to_stored_event(event)
    return Notification(
        id=position,
        originator_id=record.originator_id,
        originator_version=record.originator_version,
        topic=record.topic,
        state=record.state,
    )


def test_every_event_class_decodes_as_the_library_mapper_decodes_it(app: SessionAwareness) -> None:
    """R-R2: for every event class of both aggregates, with every field set and with the
    optional ones empty, the replay's decoder and the library's mapper give equal events of
    the same class (field values, their types and the originator id included)."""
    decode = EventDecoder(app.store.mapper)
    assert decode.fast
    classes = event_classes()
    assert {Session.HumanDirectMessage, Session.UpstreamLinked, Watch.Acknowledged} <= set(classes)
    for cls in classes:
        for event in events_of(cls):
            notification = stored(app.store.mapper, event)
            ours, theirs = decode(notification), app.store.mapper.to_domain_event(notification)
            assert same(ours, theirs), cls
            assert same(ours, event), cls
            assert type(ours.originator_id) is uuid.UUID
            assert type(ours.timestamp) is datetime


def test_a_stored_workload_decodes_as_the_library_mapper_decodes_it(
    app: SessionAwareness,
) -> None:
    """R-R2: every event a mixed workload stored, read back from the store, decodes to the
    library mapper's event; aggregate ids met again decode to equal ids."""
    mixed_workload(app, FakeClock())
    decode = EventDecoder(app.store.mapper)
    page = app.store.recorder.select_notifications(1, 10_000)
    assert len(page) > 25  # a pending cursor stores nothing when M moves (ADR 023)
    for notification in page:
        assert same(decode(notification), app.store.mapper.to_domain_event(notification))


def test_a_store_of_the_previous_version_decodes_as_the_library_mapper_decodes_it(
    tmp_path: Path,
) -> None:
    """R-R2: the events of a store written before M was derived (`MaterialAdvanced` ones
    among them) decode to the library mapper's events."""
    with open_service(copied_store(PREVIOUS_CURSORS, tmp_path)) as svc:
        decode = EventDecoder(svc.store.mapper)
        page = svc.store.recorder.select_notifications(1, 10_000)
        topics = {notification.topic for notification in page}
        assert Watch.MaterialAdvanced.TOPIC in topics
        for notification in page:
            assert same(decode(notification), svc.store.mapper.to_domain_event(notification))


def crafted(state: bytes) -> Notification:
    return Notification(
        id=1, originator_id=uuid.uuid4(), originator_version=3, topic=Session.Reset.TOPIC,
        state=state,
    )  # fmt: skip


def test_nested_transcoded_values_and_lookalike_objects_decode_as_the_mapper_does(
    app: SessionAwareness,
) -> None:
    """Only an object of exactly `_type_` and `_data_` is a transcoded value, inner ones
    first, in lists too; whitespace around the state is the transcoder's to judge."""
    an_id, when = uuid.uuid4(), datetime(2026, 5, 6, tzinfo=UTC)
    state = {
        "timestamp": {"_type_": "datetime_iso", "_data_": when.isoformat()},
        "a": {"_type_": "uuid_hex", "_data_": an_id.hex},
        "b": [1, {"_type_": "datetime_iso", "_data_": when.isoformat()}, [{"x": None}]],
        "c": {"_type_": "uuid_hex"},
        "d": {"_type_": "uuid_hex", "_data_": an_id.hex, "more": 1},
        "e": {"deep": {"deeper": [{"_type_": "decimal_str", "_data_": "1.50"}]}},
        "f": {"_data_": 1, "_type_x": 2},
    }
    decode = EventDecoder(app.store.mapper)
    text = json.dumps(state)
    for variant in (text, f"  {text}", f"{text}\n ", json.dumps(state, indent=2)):
        notification = crafted(variant.encode())
        ours = decode(notification)
        assert same(ours, app.store.mapper.to_domain_event(notification))
        assert ours.a == an_id
        assert ours.timestamp == when


@pytest.mark.parametrize("state", [b"", b"  ", b"{} {}", b'{"a": 1', b"[1]x", b"\xff{}"])
def test_a_state_that_is_not_one_json_object_fails_as_the_mapper_fails(
    app: SessionAwareness, state: bytes
) -> None:
    notification = crafted(state)
    with pytest.raises(MapperDeserialisationError) as theirs:
        app.store.mapper.to_domain_event(notification)
    with pytest.raises(MapperDeserialisationError) as ours:
        EventDecoder(app.store.mapper)(notification)
    assert str(ours.value) == str(theirs.value)


def test_an_unregistered_transcoding_fails_as_the_library_fails(app: SessionAwareness) -> None:
    """A stored value of an unknown kind is refused with the mapper's error."""
    notification = Notification(
        id=1,
        originator_id=uuid.uuid4(),
        originator_version=1,
        topic=Session.Reset.TOPIC,
        state=b'{"timestamp":{"_type_":"nope","_data_":"x"}}',
    )
    with pytest.raises(MapperDeserialisationError, match="nope"):
        app.store.mapper.to_domain_event(notification)
    with pytest.raises(MapperDeserialisationError, match="nope"):
        EventDecoder(app.store.mapper)(notification)


def test_a_compressed_store_decodes_and_another_mapper_is_used_as_it_is(
    app: SessionAwareness,
) -> None:
    """With a compressor the state is decompressed first; a mapper or transcoder the
    decoder does not know is called as it is."""
    compressed = Mapper(app.store.mapper.transcoder, compressor=ZlibCompressor())
    event = events_of(Session.GoalChanged)[0]
    notification = stored(compressed, event)
    assert same(EventDecoder(compressed)(notification), event)

    class Counting(Mapper[Any]):
        calls = 0

        def to_domain_event(self, stored_event: StoredEvent) -> Any:
            Counting.calls += 1
            return super().to_domain_event(stored_event)

    other = EventDecoder(Counting(app.store.mapper.transcoder))
    assert not other.fast
    assert same(other(stored(app.store.mapper, event)), event)
    assert Counting.calls == 1


def test_the_audit_reads_the_notifications_the_library_reads(
    svc: SessionAwareness, clock: FakeClock
) -> None:
    """The audit's own event-log reads (ids decoded once each, rows built directly) give
    notifications equal to the library's `select_notifications`, page after page."""
    mixed_workload(svc, clock)
    store = svc.store.audit_store()
    theirs = list(svc.store.recorder.select_notifications(1, 10_000))
    ours = [*store.notifications(0, 7), *store.notifications(7, 10_000)]
    assert len(theirs) > 30
    assert ours == theirs
    assert [type(n) for n in ours] == [type(n) for n in theirs]
    assert all(type(n.originator_id) is uuid.UUID and type(n.state) is bytes for n in ours)


def test_an_id_stored_as_text_decodes_to_the_mappers_uuid(app: SessionAwareness) -> None:
    """R-R2: a store that hands ids back as text (the library's own SQLite reads do) gets
    them converted as the mapper converts them; an id already a UUID passes as it is."""
    mapper = app.store.mapper
    event = events_of(Session.GoalChanged)[0]
    as_uuid = stored(mapper, event)
    as_text = dataclasses.replace(as_uuid, originator_id=str(as_uuid.originator_id))
    decode = EventDecoder(mapper)
    for notification in (as_uuid, as_text, as_uuid):
        decoded = decode(notification)
        assert isinstance(decoded.originator_id, uuid.UUID)
        assert same(decoded, mapper.to_domain_event(notification))
