"""A cursor's positions and what is said of them, without its aggregates.

`Watch` (domain/watch.py) is the cursor and `Drains` (domain/drains.py) a watcher's drains;
their event classes are many, each made a frozen dataclass by the library when its module is
imported. A process that records a turn on a session nobody watches builds neither, yet it
names how a cursor came to be (`Via`), why one went (`RemovalReason`), when a notice is open
(`notice_open`) and what it says (`notice_text`). Those live here, so such a process does not
import the two aggregates' modules (issue 39, ADR 039); each of those still exports the names
it had.
"""

from __future__ import annotations

from enum import StrEnum

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


__all__ = [
    "DRAINS_TOPIC",
    "WATCH_TOPIC",
    "RemovalReason",
    "Via",
    "notice_open",
    "notice_text",
]
