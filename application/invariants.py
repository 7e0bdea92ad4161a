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


class _Cursor:
    """What the checks keep of one cursor id, in one small object (an audit of a million
    sessions keeps about 800,000 of them): its positions while active (L, N, M; `l` None
    once removed or before it started), its last version, its pair once started, and
    whether its target's watcher index announced the pair."""

    __slots__ = ("announced", "l", "m", "n", "target", "version", "watcher")

    def __init__(self) -> None:
        self.l: int | None = None
        self.n = self.m = 0
        self.version: int | None = None
        self.target: int | None = None  # the target session's id (`UUID.int`)
        self.watcher: str | None = None
        self.announced = False

    @property
    def positions(self) -> tuple[int, int, int] | None:
        return None if self.l is None else (self.l, self.n, self.m)


class Invariants:
    """Feed it every stored event in notification order, then call `finish()`.

    Its memory grows with the sessions and cursors the store holds, never with its events:
    ids are kept as `UUID.int`, a cursor's facts in one `_Cursor`, each watcher key once,
    and an announcement only until its cursor starts (then as the cursor's flag)."""

    def __init__(self, keep: int = KEEP) -> None:
        self.heads: dict[int, int] = {}
        self.watermarks: dict[int, int] = {}
        self.watches: dict[int, _Cursor] = {}  # every cursor id an event named
        #: Pairs announced (by their cursor id) whose cursor has not started yet.
        self.announced: set[int] = set()
        #: Cursors whose id does not name their pair: their pair's id (R-N4 was violated).
        self.misnamed: dict[int, int] = {}
        self.drainers: dict[int, str] = {}  # each Drains' watcher
        self.names: dict[str, str] = {}  # each watcher key, once
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

    def _watch(self, wid: UUID) -> _Cursor:
        key = wid.int
        cursor = self.watches.get(key)
        if cursor is None:
            cursor = self.watches[key] = _Cursor()
        return cursor

    def _name(self, watcher: str) -> str:
        return self.names.setdefault(watcher, watcher)

    def _announced(self, position: int, event: Session.WatcherAdded) -> None:
        pair = watch_id(event.watcher, event.originator_id).int
        cursor = self.watches.get(pair)
        if cursor is not None and cursor.target is not None and pair not in self.misnamed:
            cursor.announced = True
        else:
            self.announced.add(pair)
        for wid, named in self.misnamed.items():  # rare: only cursors that broke R-N4
            if named == pair:
                self.watches[wid].announced = True

    def _removed(self, position: int, event: Watch.Removed) -> None:
        cursor = self._watch(event.originator_id)
        cursor.version = event.originator_version
        if cursor.l is None:
            self.violate("R-W6", position, f"cursor {event.originator_id.hex} removed twice")
        cursor.l = None

    def finish(self) -> list[Violation]:
        """The end-of-log checks; returns what was found (at most `keep`)."""
        for wid, cursor in self.watches.items():
            if cursor.target is not None and not cursor.announced:
                self.violate(
                    "D2",
                    0,
                    f"cursor {wid:032x} of {cursor.watcher} is missing from the watcher index "
                    f"of session {cursor.target:032x}",
                )
        return list(self.found)

    def _signal(self, position: int, event: Session.Signal) -> None:
        sid, sequence = event.originator_id.int, event.sequence
        head = self.heads.get(sid, 0)
        if sequence != head + 1:
            self.violate(
                "R-L4",
                position,
                f"session {event.originator_id.hex} recorded #{sequence} after head {head}",
            )
        if sequence <= self.watermarks.get(sid, 0):
            self.violate(
                "R-S3",
                position,
                f"session {event.originator_id.hex} retains #{sequence} at or below its "
                f"watermark {self.watermarks[sid]}",
            )
        self.heads[sid] = max(head, sequence)

    def _watermark(self, position: int, event: Session.HistoryPruned | Session.Deleted) -> None:
        sid = event.originator_id.int
        head = self.heads.get(sid, 0)
        if event.watermark > head:
            self.violate(
                "R-R1",
                position,
                f"session {event.originator_id.hex} watermark {event.watermark} > head {head}",
            )
        self.watermarks[sid] = max(self.watermarks.get(sid, 0), event.watermark)

    def _started(self, position: int, event: Watch.Started | Watch.Restarted) -> None:
        wid = event.originator_id
        pair = watch_id(event.watcher, event.target_id).int
        if wid.int != pair:
            self.violate("R-N4", position, f"cursor {wid.hex} does not name its pair")
            self.misnamed[wid.int] = pair
        else:
            self.misnamed.pop(wid.int, None)
        cursor = self._watch(wid)
        if isinstance(event, Watch.Restarted) and cursor.l is not None and event.via != Via.SPAWN:
            self.violate("R-W2", position, f"cursor {wid.hex} overwritten by {event.via}")
        at = event.at_sequence
        cursor.l = cursor.n = cursor.m = at
        if cursor.target != event.target_id.int or cursor.watcher != event.watcher:
            cursor.target, cursor.watcher = event.target_id.int, self._name(event.watcher)
            cursor.announced = False
        if pair in self.announced:
            if wid.int == pair:  # a misnamed cursor leaves the announcement for its own
                self.announced.discard(pair)
            cursor.announced = True
        cursor.version = event.originator_version

    def _moved(self, position: int, event: Watch.Moved) -> None:
        self._watch(event.originator_id).version = event.originator_version
        moved = (event.acknowledged, event.notified, event.material)
        self._move(position, event.originator_id, type(event), moved)

    def _promoted(self, position: int, event: Watch.Promoted) -> None:
        self._watch(event.originator_id).version = event.originator_version

    def _made_explicit(self, position: int, event: Watch.MadeExplicit) -> None:
        """A promotion that carries the positions a drain left: they must be the cursor's."""
        cursor = self._watch(event.originator_id)
        cursor.version = event.originator_version
        carried = (event.acknowledged, event.notified, event.material)
        if cursor.positions != carried:
            self.violate(
                "R-W7", position, f"cursor {event.originator_id.hex} promoted with other positions"
            )

    def _drained(
        self, position: int, event: Drains.Started | Drains.Drained | Drains.Redelivered
    ) -> None:
        if isinstance(event, Drains.Started):
            if event.originator_id != drains_id(event.watcher):
                self.violate("R-N4", position, f"drains {event.originator_id.hex} misnamed")
            self.drainers[event.originator_id.int] = self._name(event.watcher)
        watcher = self.drainers.get(event.originator_id.int)
        for drained in acknowledgements(event):
            wid = drained.watch_id
            cursor = self.watches.get(wid.int)
            if cursor is None or cursor.target is None or cursor.watcher != watcher:
                self.violate("R-N3", position, f"cursor {wid.hex} drained by another watcher")
                continue
            if cursor.version != drained.version:
                self.violate(
                    "R-N3", position,
                    f"cursor {wid.hex} drained at version {drained.version}, "
                    f"not its {cursor.version}",
                )  # fmt: skip
                continue
            moved = (drained.acknowledged, drained.notified, drained.material)
            if isinstance(event, Drains.Redelivered):
                self._redelivered(position, wid, moved)
            else:
                self._move(position, wid, Watch.Acknowledged, moved)

    def _redelivered(self, position: int, wid: UUID, moved: tuple[int, int, int]) -> None:
        """A sweep's re-delivery (ADR 034): a pending notice keeps its L, N rises to M (R-N6)."""
        before = self._watch(wid).positions
        if before is not None and not (
            before[1] > before[0] and moved[0] == before[0] and moved[1] >= before[1]
        ):
            self.violate("R-N6", position, f"cursor {wid.hex} re-delivered from {before}")
        self._move(position, wid, Watch.Moved, moved)

    def _move(
        self, position: int, wid: UUID, kind: type[Watch.Moved], moved: tuple[int, int, int]
    ) -> None:
        """A cursor's move to `moved` by an event of `kind` (a drain's: `Acknowledged`)."""
        cursor = self._watch(wid)
        before = cursor.positions
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
        cursor.l, cursor.n, cursor.m = moved
