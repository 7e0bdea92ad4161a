"""The ports of upstream monitoring (R-U1–R-U5, ADR 008): providers, the host's run and
own-text sources, and the scheduler. Adapters live in infrastructure or in the host."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from uuid import UUID

from session_awareness.domain.upstream import UpstreamSource

#: How many of a session's own user texts count for self-echo (R-R3, R-U3).
OWN_TEXTS = 10

#: The host: is a run of session (key, agent_id) active right now? Active links are deferred.
RunActivity = Callable[[str, str], bool]
#: The host: session (key, agent_id)'s most recent own user texts, newest last (R-U3).
OwnUserTexts = Callable[[str, str], Sequence[str]]


def normalise_text(text: str) -> str:
    """Whitespace-normalised text: runs of whitespace become one space, ends trimmed (R-U3)."""
    return " ".join(text.split())


@dataclass(frozen=True, slots=True)
class UpstreamProbe:
    """One link a provider is asked about: its source, its marker, and the session's own
    recent user texts (normalised), which are self-echo and never count (R-U3)."""

    session_id: UUID
    session_key: str
    agent_id: str
    source: UpstreamSource
    marker: str | None
    own_user_texts: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class UpstreamActivity:
    """The upstream was read: `human_turns` new human turns (0 for none) up to `marker`.

    `occurred_at` is the newest counted turn's time (epoch ms or an aware datetime; clamped
    by R-L7); `position` identifies that turn upstream, so a record is idempotent (R-U3).
    """

    human_turns: int
    marker: str | None
    occurred_at: int | float | datetime | None = None
    position: str | None = None


@dataclass(frozen=True, slots=True)
class UpstreamMissing:
    """The upstream source definitely does not exist (R-U4)."""


#: What a provider says of one link; None (or no entry) means "nothing known this time".
UpstreamResult = UpstreamActivity | UpstreamMissing


class UpstreamProvider(Protocol):
    """Reads one catalog's upstream threads. Called off the caller's thread, bounded by a
    timeout; it may raise, which counts as "nothing" for each of its links (R-U2)."""

    def scan(self, probes: Sequence[UpstreamProbe]) -> Mapping[UUID, UpstreamResult | None]:
        """What is new upstream for each probe, keyed by the probe's `session_id`."""


class ScheduledCall(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """Runs `action` once, `delay` seconds from now (by the service clock's pace)."""

    def call_later(self, delay: float, action: Callable[[], None]) -> ScheduledCall: ...
