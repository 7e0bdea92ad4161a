"""The projection's row changes are named tuples (application/projection.py, ADR 021): they
must behave as the frozen dataclasses they replaced, values equal only to a change of their
own class, immutable and hashable, whatever their fields hold."""

from __future__ import annotations

import typing
from uuid import uuid4

import pytest

from session_awareness.application import projection as p

SESSION = uuid4()
CLASSES = list(typing.get_args(p.RowChange))


def test_every_row_change_is_a_named_tuple() -> None:
    assert len(CLASSES) == 21
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
