"""What is said of a cursor without its aggregates: the words, the notice, the positions.

`Watch` (domain/watch.py) is the cursor and `Drains` (domain/drains.py) a watcher's drains;
their event classes are many, each made a frozen dataclass by the library when its module is
imported. A process that records a turn on a session nobody watches builds neither, yet it
names how a cursor came to be (`Via`), why one went (`RemovalReason`), when a notice is open
(`notice_open`) and what it says (`notice_text`). Those live here, so such a process does not
import the two aggregates' modules (issue 39, ADR 039); both modules still export them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

#: The topics of the two aggregates' classes (their events' topics start with them): a stored
#: event or snapshot names its class by topic, so its module need not be imported to tell it.
WATCH_TOPIC = "session_awareness:Watch"
DRAINS_TOPIC = "session_awareness:Drains"


class Via(StrEnum):
    """How a cursor came to exist."""

    SPAWN = "spawn"  # the spawn edge seeds the parent's cursor (R-W1)
    WATCH = "watch"  # an explicit watch, e.g. sessions_send watch: true (R-W2)
    PARENT = "parent"  # a parent without a cursor, on a notify-eligible event (R-W4)
    AMBIENT = "ambient"  # a main session on its agent's group, on a human turn (R-W7)


class RemovalReason(StrEnum):
    RESET = "reset"
    DELETED = "deleted"
    EXPIRED = "expired"
    UNWATCHED = "unwatched"


def notice_open(acknowledged: int, notified: int) -> bool:
    """Whether a cursor at these positions has a notice open: N > L (pending, R-N1; after an
    acknowledgement, a fresh notice reopened, R-N3). The one Python spelling; the SQL's is
    `tables.PENDING`."""
    return notified > acknowledged


def notice_text(target_key: str, since: int) -> str:
    """The notice line, byte-stable while pending (R-N1)."""
    return (
        f'Session "{target_key}" changed (other actor). Reconcile before acting: '
        f'session_status sessionKey "{target_key}" changesSince {since}.'
    )


@dataclass(frozen=True, slots=True)
class Acknowledgement:
    """One drained pair: the cursor, the `Watch` version the drain read, and the positions
    it left (L = the old N; N = M = the target's M, R-N3), at the drain's time."""

    watch_id: UUID
    version: int
    acknowledged: int
    notified: int
    material: int
    at: datetime | None = None

    @property
    def reopened(self) -> bool:
        """Whether a fresh notice opened for material newer than the drained notice."""
        return notice_open(self.acknowledged, self.notified)

    def stored(self) -> list[Any]:
        """The entry as a `Drained` event stores it (JSON's types; the time is the event's)."""
        return [self.watch_id.hex, self.version, self.acknowledged, self.notified, self.material]

    @classmethod
    def of(cls, entry: list[Any], at: datetime | None) -> Acknowledgement:
        wid, version, acknowledged, notified, material = entry
        # `UUID(int=…)`: half the time of parsing the hex (a drain reads one per pair).
        return cls(UUID(int=int(wid, 16)), version, acknowledged, notified, material, at)


__all__ = [
    "DRAINS_TOPIC",
    "WATCH_TOPIC",
    "Acknowledgement",
    "RemovalReason",
    "Via",
    "notice_open",
    "notice_text",
]
