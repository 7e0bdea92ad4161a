"""The projection's row changes are named tuples (application/projection.py, ADR 021): they
must behave as the frozen dataclasses they replaced, values equal only to a change of their
own class, immutable and hashable, whatever their fields hold."""

from __future__ import annotations

import typing
from datetime import UTC, datetime
from uuid import uuid4

import pytest

from session_awareness.application import projection as p
from session_awareness.domain.drains import Acknowledgement, Drains
from session_awareness.domain.signals import to_ms

SESSION = uuid4()
CLASSES = list(typing.get_args(p.RowChange))


def test_every_row_change_is_a_named_tuple() -> None:
    assert len(CLASSES) == 22
    for cls in CLASSES:
        assert issubclass(cls, tuple)
        assert cls.__eq__ is not tuple.__eq__, cls


class TestEquality:
    def test_equal_fields_of_one_class_are_equal_and_hash_alike(self) -> None:
        first, second = p.SessionTouched(SESSION, 5), p.SessionTouched(SESSION, 5)
        assert first == second
        assert not first != second  # noqa: SIM202 -- the `!=` operator itself is checked
        assert hash(first) == hash(second)
        assert len({first, second}) == 1

    def test_changes_of_two_classes_with_the_same_fields_differ(self) -> None:
        """As tuples they would be equal: a history pruned at 5 is not a touch at 5."""
        touched, pruned = p.SessionTouched(SESSION, 5), p.HistoryPruned(SESSION, 5)
        assert tuple(touched) == tuple(pruned)
        assert touched != pruned
        assert not touched == pruned  # noqa: SIM201 -- the `==` operator itself is checked
        assert pruned != touched

    def test_a_change_is_not_equal_to_a_plain_tuple_of_its_fields(self) -> None:
        touched = p.SessionTouched(SESSION, 5)
        assert touched != (SESSION, 5)
        assert (SESSION, 5) != touched  # noqa: SIM300 -- the reflected comparison is checked

    def test_different_fields_differ(self) -> None:
        assert p.SessionTouched(SESSION, 5) != p.SessionTouched(SESSION, 6)
        moved = p.CursorMoved(SESSION, 1, 2, 3, None, 9)
        assert moved != moved._replace(reopened=True)
        assert moved.reopened is False  # the default, as the dataclass had


def test_a_row_change_is_immutable() -> None:
    touched = p.SessionTouched(SESSION, 5)
    with pytest.raises(AttributeError):
        touched.at = 6  # type: ignore[misc]
    assert touched.at == 5


class TestADrainsRows:
    def test_a_drain_is_one_row_change_for_all_of_its_pairs_with_its_entries_as_stored(
        self,
    ) -> None:
        """R-N3, ADR 024: a drain of a thousand pairs projects to ONE change holding the
        entries as its event stores them (no object per pair); it names the cursors whose
        notice it reopened, and is hashable like every row change."""
        at = datetime(2026, 12, 5, tzinfo=UTC)
        cursors = [uuid4() for _ in range(1_000)]
        drained = [
            Acknowledgement(wid, 2, 2, 3 if number % 2 else 2, 3 if number % 2 else 2, at)
            for number, wid in enumerate(cursors)
        ]
        drains = Drains.record(None, "agent:main:main", [a.stored() for a in drained], at=at)
        [event] = drains.collect_events()
        [change] = p.project([(7, event)])
        assert type(change) is p.CursorsAcknowledged
        assert change.entries == tuple(tuple(a.stored()) for a in drained)
        assert (change.updated_at, change.position, change.reopens) == (to_ms(at), 7, True)
        assert change.reopened() == cursors[1::2]
        assert hash(change) == hash(p.project([(7, event)])[0])

    def test_a_re_delivery_reopens_nothing(self) -> None:
        """R-N6, ADR 034: a sweep's re-delivery moves N to M and publishes no wake."""
        at = datetime(2026, 12, 5, tzinfo=UTC)
        entry = Acknowledgement(uuid4(), 2, 1, 3, 3, at)
        drains = Drains.redeliver(None, "agent:main:main", [entry], at=at)
        [_, event] = drains.collect_events()
        [change] = p.project([(9, event)])
        assert change.entries == (tuple(entry.stored()),)
        assert change.reopens is False
        assert change.reopened() == []
