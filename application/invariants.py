"""The rules the recorded facts must keep, checked while an audit replays them (R-R2).

Each stored event is checked against what the events before it established: sequences are
contiguous per session and heads never go down (R-L4), watermarks never pass the head (R-R1),
so no retained row is ever at or below one (R-S3); every cursor keeps L ≤ N ≤ M, opens at
most one notice at a time and moves only as R-N1–R-N7 allows (R-N2, R-N3, R-N4); and every
cursor on a target is announced in that target's watcher index, which `history` relies on.
A drain's acknowledgements (ADR 024) move the cursors they name like stored `Acknowledged`
events, and each must name the version its cursor had (a later cursor event supersedes it);
a sweep's re-deliveries (ADR 034) keep a pending cursor's L and raise its N (R-N6).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from session_awareness.domain.drains import Drains, acknowledgements
from session_awareness.domain.keys import drains_id, watch_id
from session_awareness.domain.session import Session
from session_awareness.domain.watch import Via, Watch

#: Violations kept in a report; the count goes on.
KEEP = 100


@dataclass(frozen=True, slots=True)
class Violation:
    """A recorded fact that breaks a rule: the rule's id, where, and what was found."""

    rule: str
    position: int  # the notification id of the offending event; 0 when found at the end
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "position": self.position, "detail": self.detail}


class Invariants:
    """Feed it every stored event in notification order, then call `finish()`."""

    def __init__(self, keep: int = KEEP) -> None:
        self.heads: dict[UUID, int] = {}
        self.watermarks: dict[UUID, int] = {}
        self.cursors: dict[UUID, tuple[int, int, int]] = {}  # active cursors: L, N, M
        self.pairs: dict[UUID, tuple[UUID, str]] = {}  # every cursor: (target, watcher)
        self.versions: dict[UUID, int] = {}  # every cursor's version
        self.drainers: dict[UUID, str] = {}  # each Drains' watcher
        self.announced: set[tuple[UUID, str]] = set()
        self.found: list[Violation] = []
        self.count = 0
        self.keep = keep
        self.rules: dict[type, Callable[[int, Any], None] | None] = {}

    def violate(self, rule: str, position: int, detail: str) -> None:
        self.count += 1
        if len(self.found) < self.keep:
            self.found.append(Violation(rule, position, detail))

    def check(self, position: int, event: Any) -> None:
        try:
            rule = self.rules[type(event)]
        except KeyError:
            rule = self.rules[type(event)] = self._rule(type(event))
        if rule is not None:
            rule(position, event)

    def _rule(self, cls: type) -> Callable[[int, Any], None] | None:
        """The check an event class gets (the first that matches), looked up once per class."""
        rules: list[tuple[Any, Callable[[int, Any], None]]] = [
            (Session.Signal, self._signal),
            (Session.HistoryPruned | Session.Deleted, self._watermark),
            (Session.WatcherAdded, self._announced),
            (Watch.Started | Watch.Restarted, self._started),
            (Watch.Moved, self._moved),
            (Watch.MadeExplicit, self._made_explicit),
            (Watch.Promoted, self._promoted),
            (Watch.Removed, self._removed),
            (Drains.Started | Drains.Drained | Drains.Redelivered, self._drained),
        ]
        return next((rule for kinds, rule in rules if issubclass(cls, kinds)), None)

    def _announced(self, position: int, event: Session.WatcherAdded) -> None:
        self.announced.add((event.originator_id, event.watcher))

    def _removed(self, position: int, event: Watch.Removed) -> None:
        self.versions[event.originator_id] = event.originator_version
        if self.cursors.pop(event.originator_id, None) is None:
            self.violate("R-W6", position, f"cursor {event.originator_id.hex} removed twice")

    def finish(self) -> list[Violation]:
        """The end-of-log checks; returns what was found (at most `keep`)."""
        for wid, (target, watcher) in self.pairs.items():
            if (target, watcher) not in self.announced:
                self.violate(
                    "D2",
                    0,
                    f"cursor {wid.hex} of {watcher} is missing from the watcher index of "
                    f"session {target.hex}",
                )
        return list(self.found)

    def _signal(self, position: int, event: Session.Signal) -> None:
        sid, sequence = event.originator_id, event.sequence
        head = self.heads.get(sid, 0)
        if sequence != head + 1:
            self.violate(
                "R-L4", position, f"session {sid.hex} recorded #{sequence} after head {head}"
            )
        if sequence <= self.watermarks.get(sid, 0):
            self.violate(
                "R-S3",
                position,
                f"session {sid.hex} retains #{sequence} at or below its watermark "
                f"{self.watermarks[sid]}",
            )
        self.heads[sid] = max(head, sequence)

    def _watermark(self, position: int, event: Session.HistoryPruned | Session.Deleted) -> None:
        sid, head = event.originator_id, self.heads.get(event.originator_id, 0)
        if event.watermark > head:
            self.violate(
                "R-R1", position, f"session {sid.hex} watermark {event.watermark} > head {head}"
            )
        self.watermarks[sid] = max(self.watermarks.get(sid, 0), event.watermark)

    def _started(self, position: int, event: Watch.Started | Watch.Restarted) -> None:
        wid = event.originator_id
        if wid != watch_id(event.watcher, event.target_id):
            self.violate("R-N4", position, f"cursor {wid.hex} does not name its pair")
        if isinstance(event, Watch.Restarted) and wid in self.cursors and event.via != Via.SPAWN:
            self.violate("R-W2", position, f"cursor {wid.hex} overwritten by {event.via}")
        at = event.at_sequence
        self.cursors[wid] = (at, at, at)
        self.pairs[wid] = (event.target_id, event.watcher)
        self.versions[wid] = event.originator_version

    def _moved(self, position: int, event: Watch.Moved) -> None:
        self.versions[event.originator_id] = event.originator_version
        moved = (event.acknowledged, event.notified, event.material)
        self._move(position, event.originator_id, type(event), moved)

    def _promoted(self, position: int, event: Watch.Promoted) -> None:
        self.versions[event.originator_id] = event.originator_version

    def _made_explicit(self, position: int, event: Watch.MadeExplicit) -> None:
        """A promotion that carries the positions a drain left: they must be the cursor's."""
        wid = event.originator_id
        self.versions[wid] = event.originator_version
        carried = (event.acknowledged, event.notified, event.material)
        if self.cursors.get(wid) != carried:
            self.violate("R-W7", position, f"cursor {wid.hex} promoted with other positions")

    def _drained(
        self, position: int, event: Drains.Started | Drains.Drained | Drains.Redelivered
    ) -> None:
        if isinstance(event, Drains.Started):
            if event.originator_id != drains_id(event.watcher):
                self.violate("R-N4", position, f"drains {event.originator_id.hex} misnamed")
            self.drainers[event.originator_id] = event.watcher
        watcher = self.drainers.get(event.originator_id)
        for drained in acknowledgements(event):
            wid = drained.watch_id
            pair = self.pairs.get(wid)
            if pair is None or pair[1] != watcher:
                self.violate("R-N3", position, f"cursor {wid.hex} drained by another watcher")
                continue
            if self.versions.get(wid) != drained.version:
                self.violate(
                    "R-N3", position,
                    f"cursor {wid.hex} drained at version {drained.version}, "
                    f"not its {self.versions.get(wid)}",
                )  # fmt: skip
                continue
            moved = (drained.acknowledged, drained.notified, drained.material)
            if isinstance(event, Drains.Redelivered):
                self._redelivered(position, wid, moved)
            else:
                self._move(position, wid, Watch.Acknowledged, moved)

    def _redelivered(self, position: int, wid: UUID, moved: tuple[int, int, int]) -> None:
        """A sweep's re-delivery (ADR 034): a pending notice keeps its L, N rises to M (R-N6)."""
        before = self.cursors.get(wid)
        if before is not None and not (
            before[1] > before[0] and moved[0] == before[0] and moved[1] >= before[1]
        ):
            self.violate("R-N6", position, f"cursor {wid.hex} re-delivered from {before}")
        self._move(position, wid, Watch.Moved, moved)

    def _move(
        self, position: int, wid: UUID, kind: type[Watch.Moved], moved: tuple[int, int, int]
    ) -> None:
        """A cursor's move to `moved` by an event of `kind` (a drain's: `Acknowledged`)."""
        before = self.cursors.get(wid)
        if before is None:
            self.violate("R-W6", position, f"cursor {wid.hex} moved while removed")
            return
        old_l, old_n, old_m = before
        new_l, new_n, new_m = moved
        was_pending = old_n > old_l
        problem = None
        if not new_l <= new_n <= new_m:
            problem = ("§4", f"L {new_l} N {new_n} M {new_m} breaks L ≤ N ≤ M")
        elif new_m < old_m:
            problem = ("R-N2", f"material went back from {old_m} to {new_m}")
        elif issubclass(kind, Watch.NoticeOpened) and was_pending:
            problem = ("R-N4", "a second notice opened while one was pending")
        elif issubclass(kind, Watch.MaterialAdvanced) and (not was_pending or new_n != old_n):
            problem = ("R-N2", "material advanced without a frozen pending notice")
        elif issubclass(kind, Watch.Acknowledged) and (not was_pending or new_l != old_n):
            problem = ("R-N3", f"acknowledged to {new_l}, not the notified {old_n}")
        if problem is not None:
            self.violate(problem[0], position, f"cursor {wid.hex}: {problem[1]}")
        self.cursors[wid] = moved
