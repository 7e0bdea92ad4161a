"""A reference model of R-L1–R-L8, R-W1–R-W7, R-N1–R-N7, R-S1–R-S5 and R-R1–R-R3, written from
docs/rules.md and the ADRs, not from the service code.

Plain Python, no storage: sessions with their log rows, head and pruned watermark; cursors
(L, N, M) per (watcher, target) pair; the recording order (positions) for the row cap and the
notice order ("oldest first"). Every method returns what the embedding API should return.
Keys are unique in the model: every key belongs to one agent (the tests pick such keys).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

PAGE = 200  # R-S1
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
MINUTE_MS = 60_000
CLOCK_LEAP_DAYS = 30  # as the service (application/lifecycle.py, CLOCK_LEAP)
NOTIFYING = {"human_direct_message", "goal_changed", "upstream_missing"}  # R-L1
FAILED = {"error": "child run failed", "timeout": "child run timed out",
          "cancelled": "child run cancelled"}  # fmt: skip


class Unknown(LookupError):
    """R-S4: an unknown or deleted session."""


class Refused(ValueError):
    """R-T3: a parent that would make a cycle or replace an established one."""


def agent(key: str) -> str:
    """R-K1: a qualified key's agent; a bare key opened without an agent id is `main`'s."""
    return key.split(":")[1] if qualified(key) else "main"


def may_hold_cursor(watcher: str, target: str) -> bool:
    """R-W3: a qualified watcher, and a bare target only of the watcher's own agent."""
    return qualified(watcher) and (qualified(target) or agent(target) == agent(watcher))


def ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def qualified(key: str) -> bool:
    """R-K1: `agent:<agentId>:<rest>` with both parts non-empty."""
    parts = key.split(":", 2)
    return len(parts) == 3 and parts[0] == "agent" and bool(parts[1]) and bool(parts[2])


def notice(target: str, since: int) -> str:
    """R-N1, byte for byte."""
    return (
        f'Session "{target}" changed (other actor). Reconcile before acting: '
        f'session_status sessionKey "{target}" changesSince {since}.'
    )


@dataclass
class Row:
    event: dict[str, Any]  # as `changesSince` shows it (R-S2)
    position: int
    recorded_at: int

    @property
    def sequence(self) -> int:
        return int(self.event["sequence"])


@dataclass
class Session:
    key: str
    parent: str | None
    live: bool = True
    head: int = 0
    watermark: int = 0
    rows: list[Row] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)


@dataclass
class Cursor:
    L: int
    N: int
    M: int
    updated: int
    order: int = 0

    @property
    def pending(self) -> bool:
        return self.N > self.L


class Model:
    def __init__(self, now: Any, *, days: int, rows: int) -> None:
        self.now = now  # a callable returning the service clock's time
        self.days, self.cap = days, rows
        self.sessions: dict[str, Session] = {}
        self.cursors: dict[tuple[str, str], Cursor] = {}
        self.position = self.order = 0
        self.next_prune: int | None = None

    def _ms(self) -> int:
        return ms(self.now())

    # -- lifecycle (R-K3, R-W6, ADR 005) ------------------------------------------------------

    def start(self) -> None:
        """R-R1: pruning runs at startup. R-N6: the start-up sweep re-delivers each pending
        notice of a watcher that is not gone with N raised to M, its L and place kept."""
        self.prune()
        for (watcher, _), cursor in self.cursors.items():
            session = self.sessions.get(watcher)
            if cursor.pending and cursor.M > cursor.N and (session is None or session.live):
                cursor.N, cursor.updated = cursor.M, self._ms()

    def ancestry(self, key: str | None) -> list[str]:
        """`key` and its ancestors, as far as the sessions (deleted ones too) know them."""
        chain: list[str] = []
        while key is not None and key not in chain:
            chain.append(key)
            session = self.sessions.get(key)
            key = session.parent if session is not None else None
        return chain

    def refuses(self, key: str, parent: str | None) -> bool:
        """R-T3: the parent is the session itself, one of its descendants, or, for a live
        session with a parent, a different one."""
        if parent is None:
            return False
        session = self.sessions.get(key)
        replaces = session is not None and session.live and session.parent not in (None, parent)
        return key in self.ancestry(parent) or replaces

    def open(self, key: str, parent: str | None) -> None:
        if self.refuses(key, parent):
            raise Refused(key)
        session = self.sessions.get(key)
        if session is None:
            self.sessions[key] = Session(key, parent)
        elif not session.live:  # re-opened: sequences continue (R-L4)
            session.live, session.parent = True, parent
        elif parent is not None:  # a first parent given later (R-K3)
            session.parent = parent

    def live(self, key: str) -> Session:
        session = self.sessions.get(key)
        if session is None or not session.live:
            raise Unknown(key)
        return session

    def reset(self, key: str) -> None:
        self.live(key)
        self._drop_cursors(lambda w, t: w == key)

    def delete(self, key: str) -> None:
        session = self.live(key)
        session.live, session.rows = False, []
        session.watermark = max(session.watermark, session.head)
        self._drop_cursors(lambda w, t: key in (w, t))

    def _drop_cursors(self, doomed: Any) -> int:
        gone = [pair for pair in self.cursors if doomed(*pair)]
        for pair in gone:
            del self.cursors[pair]
        return len(gone)

    # -- producers (R-L5, R-L6, R-W1, R-W4, R-W5, R-N2) ----------------------------------------

    def _append(self, session: Session, kind: str, actor: str, summary: str, **extra: Any) -> int:
        session.head += 1
        self.position += 1
        event = {"sequence": session.head, "kind": kind, "actorType": actor,
                 "occurredAt": self._ms(), "summary": summary}  # fmt: skip
        event.update({k: v for k, v in extra.items() if v is not None})
        session.rows.append(Row(event, self.position, self._ms()))
        return session.head

    def _target(self, key: str, dedupe: str | None = None) -> Session | None:
        """The live session a producer records on, unless it saw `dedupe` (R-L5); the key
        counts as seen from here on."""
        session = self.sessions.get(key)
        if session is None or not session.live or dedupe in session.seen:
            return None
        if dedupe is not None:
            session.seen.add(dedupe)
        return session

    def _recorded(self, sequence: int) -> int:
        """R-R1 (ADR 038): a record never prunes; the maintenance does, at most hourly."""
        return sequence

    def maintain(self) -> None:
        """R-R1 (ADR 038): the maintenance prunes when an hour has passed since the last."""
        if self.next_prune is None or self._ms() >= self.next_prune:
            self.prune()

    def spawn(self, child: str, parent: str, run: str) -> int | None:
        if self.refuses(child, parent):
            return None  # R-T3: nothing recorded
        session = self.sessions.get(child)
        if session is None or not session.live:  # the spawn opens the child
            self.open(child, parent)
            session = self.sessions[child]
        if f"spawn:{run}" in session.seen:
            return None
        session.seen.add(f"spawn:{run}")
        seq = self._append(session, "child_spawned", "agent", "child session spawned",
                           actorId=parent, runId=run)  # fmt: skip
        session.parent = parent
        if may_hold_cursor(parent, child) and parent != child:
            self.cursors[(parent, child)] = Cursor(seq, seq, seq, self._ms())
        return self._recorded(seq)

    def human(self, key: str, channel: str, actor: str | None, idem: str | None) -> int | None:
        watched = any(target == key for _, target in self.cursors)
        if key in self.sessions and self.sessions[key].parent is None and not watched:
            return None  # R-L6: no parent and no watcher
        session = self._target(key, None if idem is None else f"human:{idem}")
        if session is None:
            return None
        channel = channel.strip() or "unknown"
        seq = self._append(session, "human_direct_message", "human",
                           f"human message via {channel}", actorId=actor,
                           payload={"channel": channel})  # fmt: skip
        self._fan_out(session, seq, actor)
        return self._recorded(seq)

    def goal(self, key: str, summary: str, actor_type: str, actor: str | None) -> int | None:
        session = self._target(key)
        if session is None:
            return None
        seq = self._append(session, "goal_changed", actor_type, summary, actorId=actor)
        self._fan_out(session, seq, actor)
        return self._recorded(seq)

    def run_terminal(self, key: str, run: str, outcome: str) -> int | None:
        session = self._target(key, f"run:{run}")
        if session is None:
            return None
        if outcome == "ok":
            seq = self._append(session, "run_completed", "system", "child run completed",
                               runId=run)  # fmt: skip
        else:
            seq = self._append(session, "run_failed", "system", FAILED[outcome], runId=run,
                               payload={"outcome": outcome})  # fmt: skip
        return self._recorded(seq)

    def compacted(self, key: str, operation: str) -> int | None:
        session = self._target(key, f"compaction:{operation}")
        if session is None:
            return None
        return self._recorded(self._append(session, "compacted", "system", "session compacted"))

    def _fan_out(self, session: Session, seq: int, actor: str | None) -> None:
        watchers = [w for w, t in self.cursors if t == session.key]
        parent = session.parent
        if (parent is not None and may_hold_cursor(parent, session.key) and parent != session.key
                and parent not in watchers
                and (parent not in self.sessions or self.sessions[parent].live)):  # fmt: skip
            watchers.append(parent)  # R-W4: a parent without a cursor gets one at L = 0
        for watcher in watchers:
            if watcher == actor:
                continue  # R-W5: skipped, cursor untouched
            cursor = self.cursors.setdefault((watcher, session.key), Cursor(0, 0, 0, 0))
            cursor.updated = self._ms()
            if cursor.pending:
                cursor.M = seq  # frozen N: no second notice
            else:
                cursor.N = cursor.M = seq
                self.order += 1
                cursor.order = self.order

    # -- watches and notices (R-W2, R-W3, R-N1, R-N3) -----------------------------------------

    def known(self, watcher: str) -> None:
        """R-L9: a key the service has seen: a session of it (deleted too) or a cursor it
        holds; any other watcher is refused as unknown."""
        if watcher not in self.sessions and not any(w == watcher for w, _ in self.cursors):
            raise Unknown(watcher)

    def watch(self, watcher: str, target: str) -> bool:
        self.known(watcher)
        session = self.sessions.get(target)
        if (not may_hold_cursor(watcher, target) or watcher == target or session is None
                or not session.live):  # fmt: skip
            return False
        if (watcher, target) not in self.cursors:  # an existing cursor is left untouched
            head = session.head
            self.cursors[(watcher, target)] = Cursor(head, head, head, self._ms())
        return True

    def unwatch(self, watcher: str, target: str) -> bool:
        self.known(watcher)
        return self.cursors.pop((watcher, target), None) is not None

    def _pending(self, watcher: str) -> list[tuple[str, Cursor]]:
        mine = [(t, c) for (w, t), c in self.cursors.items() if w == watcher and c.pending]
        return sorted(mine, key=lambda item: (item[1].order, item[0]))

    def pending(self, watcher: str) -> list[str]:
        self.known(watcher)
        return [notice(target, cursor.L) for target, cursor in self._pending(watcher)]

    def drain(self, watcher: str) -> list[str]:
        self.known(watcher)
        texts = []
        for target, cursor in self._pending(watcher):
            texts.append(notice(target, cursor.L))
            cursor.L, cursor.updated = cursor.N, self._ms()
            if cursor.M > cursor.N:  # exactly one fresh notice
                cursor.N = cursor.M
                self.order += 1
                cursor.order = self.order
        return texts

    def positions(self, watcher: str) -> dict[str, tuple[int, int, int]]:
        return {t: (c.L, c.N, c.M) for (w, t), c in self.cursors.items() if w == watcher}

    # -- reconciliation (R-S1, R-S3) and retention (R-R1, R-W6) --------------------------------

    def status(self, key: str, since: int | None = None) -> dict[str, Any]:
        session = self.live(key)
        out: dict[str, Any] = {"sessionKey": key, "stateVersion": session.head}
        if since is None:
            return out
        after = [row.event for row in session.rows if row.sequence > since]
        if session.rows:
            earliest = session.rows[0].sequence
        else:
            earliest = session.head + 1 if session.head > 0 else 0
        out["stateChanges"] = {"events": after[:PAGE], "truncated": len(after) > PAGE,
                               "earliestAvailableSequence": earliest,
                               "historyGap": since < session.watermark}  # fmt: skip
        return out

    def prune(self) -> dict[str, Any]:
        now = self._ms()
        cutoff = now - self.days * DAY_MS
        # A reading more than the age limit plus 30 days past the newest row or cursor
        # (those older than a minute) is taken for a wrong clock: nothing goes (R-R1).
        times = [r.recorded_at for s in self.sessions.values() for r in s.rows]
        times += [cursor.updated for cursor in self.cursors.values()]
        newest = max((t for t in times if t < now - MINUTE_MS), default=None)
        if newest is not None and now - newest > (self.days + CLOCK_LEAP_DAYS) * DAY_MS:
            self.next_prune = now + HOUR_MS
            return {"removedRows": 0, "watermarks": {}, "expiredCursors": 0}
        rows = sorted((row.position, key) for key, s in self.sessions.items() for row in s.rows)
        kept = {position for position, _ in rows[-self.cap :]} if self.cap else set()
        removed, watermarks = 0, {}
        for key, session in self.sessions.items():
            doomed = [r for r in session.rows if r.recorded_at < cutoff or r.position not in kept]
            if doomed:
                watermark = max(r.sequence for r in doomed)
                removed += sum(1 for r in session.rows if r.sequence <= watermark)
                session.rows = [r for r in session.rows if r.sequence > watermark]
                session.watermark = max(session.watermark, watermark)
                watermarks[key] = watermark
        expired = self._drop_cursors(lambda w, t: self.cursors[(w, t)].updated < cutoff)
        self.next_prune = now + HOUR_MS
        return {"removedRows": removed, "watermarks": watermarks, "expiredCursors": expired}
