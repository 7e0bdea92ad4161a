"""Signal kinds, actors, payloads and summaries of the signal log (R-L1, R-L2, R-L3)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal


def to_ms(at: datetime) -> int:
    """Milliseconds since the epoch, the unit of every stored time."""
    return int(at.timestamp() * 1000)


class SignalKind(StrEnum):
    """The kinds of event a session's signal log holds (R-L1)."""

    HUMAN_DIRECT_MESSAGE = "human_direct_message"
    UPSTREAM_MISSING = "upstream_missing"
    GOAL_CHANGED = "goal_changed"
    CHILD_SPAWNED = "child_spawned"
    RUN_COMPLETED = "run_completed"
    RUN_FAILED = "run_failed"
    COMPACTED = "compacted"
    ADOPTED = "adopted"

    @property
    def notifies(self) -> bool:
        """Whether an event of this kind notifies the target's watchers (R-L1)."""
        return self in NOTIFYING_KINDS


NOTIFYING_KINDS = frozenset(
    {SignalKind.HUMAN_DIRECT_MESSAGE, SignalKind.UPSTREAM_MISSING, SignalKind.GOAL_CHANGED}
)


class ActorType(StrEnum):
    """Who caused an event (R-L2)."""

    HUMAN = "human"
    AGENT = "agent"
    SYSTEM = "system"


class RunOutcome(StrEnum):
    """How a child run ended (R-L5)."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


#: The words a producer may record a run's end with (`record_run_terminal(outcome=…)`):
#: the run statuses the rows show, and the older words, which stay accepted (R-L5).
RunOutcomeWord = Literal["completed", "failed", "timeout", "cancelled", "ok", "error"]
#: Each word's outcome; what is stored is the outcome, so the stored events are the same
#: whichever word recorded them.
OUTCOME_WORDS: dict[str, RunOutcome] = {
    "completed": RunOutcome.OK,
    "failed": RunOutcome.ERROR,
    "timeout": RunOutcome.TIMEOUT,
    "cancelled": RunOutcome.CANCELLED,
    "ok": RunOutcome.OK,
    "error": RunOutcome.ERROR,
}
#: An outcome as the rows' `runStatus` shows it.
RUN_STATUSES: dict[RunOutcome, str] = {
    RunOutcome.OK: "completed",
    RunOutcome.ERROR: "failed",
    RunOutcome.TIMEOUT: "timeout",
    RunOutcome.CANCELLED: "cancelled",
}
#: Who caused a goal change (`record_goal_changed(actor_type=…)`), as `ActorType`'s values.
ActorTypeWord = Literal["human", "agent", "system"]

FAILED_RUN_SUMMARIES = {
    RunOutcome.ERROR: "child run failed",
    RunOutcome.TIMEOUT: "child run timed out",
    RunOutcome.CANCELLED: "child run cancelled",
}
RUN_COMPLETED_SUMMARY = "child run completed"
CHILD_SPAWNED_SUMMARY = "child session spawned"
COMPACTED_SUMMARY = "session compacted"
GOAL_SUMMARIES = frozenset(
    {"goal created", "goal updated", "goal objective changed", "goal cleared"}
)
GOAL_STATUS_PREFIX = "goal status changed to "

MAX_SUMMARY_LENGTH = 200
MAX_LABEL_LENGTH = 120
MAX_SAFE_INTEGER = 2**53 - 1
#: What never belongs in a key, a label or any one-line text an agent may read: every
#: control character (C0, DEL, C1 with U+0085), the line and paragraph separators U+2028 and
#: U+2029, every format control (bidi embeddings, overrides and isolates, zero-width
#: characters, the BOM, soft hyphen, tags) and surrogates (not text: UTF-8 cannot hold them).
#: Exactly the Unicode categories Cc, Cf, Zl, Zp and Cs (tests/domain checks it): any of them
#: could split or reorder a notice line (R-N1).
CONTROL_CHARACTERS = (
    "\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f"
)
_CONTROL = re.compile(f"[{CONTROL_CHARACTERS}]")
_GOAL_STATUS = re.compile(r"[A-Za-z0-9_\- ]{1,40}")


def one_line(text: str, *, limit: int = MAX_LABEL_LENGTH) -> str:
    """Collapse every run of whitespace (newlines included) to one space and bound the length;
    any other control character (NUL included) is refused."""
    if not isinstance(text, str):
        raise InvalidSignalError(f"expected text, got {type(text).__name__}")
    collapsed = " ".join(text.split())
    if len(collapsed) > limit:
        raise InvalidSignalError(f"text longer than {limit} characters")
    if has_control(collapsed):
        raise InvalidSignalError("text holds a control character")
    return collapsed


def has_control(text: str) -> bool:
    """Whether the text holds a control, format or line-separator character, or a surrogate
    (`CONTROL_CHARACTERS`)."""
    return _CONTROL.search(text) is not None


def check_label(label: str) -> str | None:
    """A session label: one line, refused when it holds any line break or control or format
    character (it is shown to agents as is); runs of spaces collapse; blank is no label."""
    if not isinstance(label, str):
        raise InvalidSignalError(f"expected text, got {type(label).__name__}")
    if has_control(label):
        raise InvalidSignalError("a label holds a line break or a control character")
    return one_line(label) or None


def human_message_summary(channel: str | None) -> str:
    """`human message via <channel>`; a blank channel is `unknown` (R-L3)."""
    return f"human message via {normalise_channel(channel)}"


def normalise_channel(channel: str | None) -> str:
    """A channel name on one line; blank or missing becomes `unknown` (R-L3)."""
    return one_line(channel or "") or "unknown"


def goal_summary(summary: str) -> str:
    """Accept only the fixed goal summaries of R-L3, so no goal text leaks into the log."""
    text = one_line(summary, limit=MAX_SUMMARY_LENGTH)
    if text in GOAL_SUMMARIES:
        return text
    status = text.removeprefix(GOAL_STATUS_PREFIX)
    if status != text and _GOAL_STATUS.fullmatch(status):
        return text
    raise InvalidSignalError(
        "goal summary must be one of 'goal created', 'goal updated', "
        "'goal status changed to <status>', 'goal objective changed', 'goal cleared'"
    )


def adopted_summary(catalog_id: str) -> str:
    """`adopted from <catalogId>` (R-L3)."""
    return f"adopted from {one_line(catalog_id)}"


def upstream_missing_summary(catalog_id: str) -> str:
    """`upstream missing via <catalogId>` (R-L3)."""
    return f"upstream missing via {one_line(catalog_id)}"


@dataclass(frozen=True, slots=True)
class Payload:
    """The only payload an event may carry: outcome, channel and turns (R-L2)."""

    outcome: RunOutcome | None = None
    channel: str | None = None
    turns: int | None = None

    def __post_init__(self) -> None:
        if self.channel is not None and one_line(self.channel) != self.channel:
            raise InvalidSignalError("payload channel must be one line of text")
        if self.outcome is not None and self.outcome is RunOutcome.OK:
            raise InvalidSignalError("payload outcome is one of error, timeout, cancelled")
        if self.turns is not None and (
            isinstance(self.turns, bool) or not isinstance(self.turns, int) or self.turns <= 1
        ):
            raise InvalidSignalError("payload turns must be an integer greater than 1")

    def as_dict(self) -> dict[str, Any] | None:
        """The JSON form, without absent keys; None when empty."""
        out: dict[str, Any] = {}
        if self.outcome is not None:
            out["outcome"] = self.outcome.value
        if self.channel is not None:
            out["channel"] = self.channel
        if self.turns is not None:
            out["turns"] = self.turns
        return out or None


def check_turns(turns: object) -> int | None:
    """Turns worth recording: an integer > 1 is kept, 1 or None is omitted (R-L2)."""
    if turns is None:
        return None
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
        raise InvalidSignalError("turns must be a positive integer")
    return turns if turns > 1 else None


class InvalidSignalError(ValueError):
    """A producer's input that cannot become a signal (bad payload, summary or field);
    `field` names the producer's argument when it is known."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
