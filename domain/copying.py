"""Copying an aggregate for a command: what a command may change is copied, the rest shared."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")


class GrowOnlySet:
    """A set of texts that only grows, copied in time proportional to its recent additions.

    Copies share a frozen base and keep their own small overlay of additions; the overlay is
    merged into a new base once it passes `MERGE` items, so an addition costs O(1) amortised
    over O(n / MERGE). A session's idempotency keys are this: a long session holds tens of
    thousands, and every command works on a copy of the session (bench `history`)."""

    __slots__ = ("_added", "_base")
    MERGE = 256

    def __init__(self, base: frozenset[str] = frozenset(), added: set[str] | None = None) -> None:
        self._base = base
        self._added: set[str] = set() if added is None else added

    def __contains__(self, item: object) -> bool:
        return item in self._added or item in self._base

    def add(self, item: str) -> None:
        if item in self._base:
            return
        self._added.add(item)
        if len(self._added) > self.MERGE:
            self._base, self._added = self._base | self._added, set()

    def copy(self) -> GrowOnlySet:
        return GrowOnlySet(self._base, set(self._added))

    def __len__(self) -> int:
        return len(self._base) + len(self._added)

    def __iter__(self) -> Iterator[str]:
        yield from self._base
        yield from self._added

    def __eq__(self, other: object) -> bool:
        if isinstance(other, GrowOnlySet):
            return set(self) == set(other)
        if isinstance(other, set | frozenset):
            return set(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"GrowOnlySet({sorted(self)!r})"


def copy_state(aggregate: T) -> T:
    """A new aggregate whose containers (dicts, lists, sets, grow-only sets) are copied one
    level deep and whose other attributes are shared. Sound while every value kept in the
    aggregate's containers is immutable (keys, positions, flags, frozen events and value
    objects); a mutable value added later must be copied here too."""
    new = object.__new__(type(aggregate))
    new.__dict__.update(
        {
            name: value.copy() if isinstance(value, dict | list | set | GrowOnlySet) else value
            for name, value in vars(aggregate).items()
        }
    )
    return new
