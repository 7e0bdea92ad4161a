"""A cursor's material: the one home of self-suppression (R-W5) and derived M (ADR 023).

A target keeps two marks of its notify-eligible events: the newest (its sequence, actor and
time) and the newest whose actor is not the newest's. From those two every cursor on it
derives its M, "the newest material not caused by its watcher", and when that arrived.

The `Session` keeps the marks with these functions; the read model keeps the same marks in
`session_material` and derives M with the SQL of `infrastructure/readmodel/tables.py`, which
`tests/contract/test_material_rule.py` pins against these functions on both backends. Times
are whatever the keeper uses (a datetime on the aggregate, epoch ms in the read model).
"""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")

#: The newest notify-eligible event: (sequence, actor, time); (0, None, None) before any.
Newest = tuple[int, str | None, T]
#: A material mark without its actor: (sequence, time).
Mark = tuple[int, T]


def caused_by(actor: str | None, watcher: str) -> bool:
    """Whether an event by `actor` was caused by `watcher`, so is not its material and does
    not tell it (R-W5). An event without an actor is nobody's."""
    return actor is not None and actor == watcher


def reached(newest: Newest[T], other: Mark[T], watcher: str | None) -> Mark[T]:
    """The newest material not caused by `watcher`, from the target's two marks."""
    sequence, actor, at = newest
    return other if watcher is not None and caused_by(actor, watcher) else (sequence, at)


def moved(
    newest: Newest[T], other: Mark[T], sequence: int, actor: str | None, at: T
) -> tuple[Newest[T], Mark[T]]:
    """The two marks after a notify-eligible event at `sequence` by `actor`: it is the
    newest, and the newest by another actor is the newest the event's actor did not cause."""
    return (sequence, actor, at), reached(newest, other, actor)


def derived(stored: int, newest: Newest[T], other: Mark[T], watcher: str) -> int:
    """A cursor's M: the newest material not caused by its watcher, never below the position
    the cursor stored (it started there, or was told there)."""
    return max(stored, reached(newest, other, watcher)[0])
