"""Copying an aggregate for a command: what a command may change is copied, the rest shared."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def copy_state(aggregate: T) -> T:
    """A new aggregate whose containers (dicts, lists, sets) are copied one
    level deep and whose other attributes are shared. Sound while every value kept in the
    aggregate's containers is immutable (keys, positions, flags, frozen events and value
    objects); a mutable value added later must be copied here too."""
    new = object.__new__(type(aggregate))
    new.__dict__.update(
        {
            name: value.copy() if isinstance(value, dict | list | set) else value
            for name, value in vars(aggregate).items()
        }
    )
    return new
