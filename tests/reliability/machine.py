"""The model-based state machine: the real service and the reference model, side by side.

Every rule does one thing to both and compares what each returns; the invariants compare the
pending notices, the cursors and every session's `changesSince 0` after every step.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from session_awareness.application import (
    InvalidArgumentError,
    SessionAwareness,
    UnknownSessionError,
    open_service,
)
from tests.conftest import FakeClock
from tests.reliability.helpers import Database, assert_audit_clean
from tests.reliability.model import Model, Refused, Unknown

MAIN, OPS = "agent:main:main", "agent:ops:main"
A, B, C = "agent:main:subagent:a", "agent:main:subagent:b", "agent:ops:subagent:c"
GLOBAL = "global"  # a bare key: a log, never a cursor as watcher (R-W3)
QUALIFIED = [MAIN, OPS, A, B, C]
KEYS = [*QUALIFIED, GLOBAL]
DAYS, ROWS = 2, 5  # retention small enough that pruning happens within a run
GOALS = ["goal created", "goal updated", "goal cleared", "goal status changed to done"]

#: Weighted towards the spawned tree, where notices happen; every key stays reachable.
keys = st.sampled_from([A, A, A, B, B, MAIN, MAIN, OPS, C, GLOBAL])
qualified = st.sampled_from([A, A, B, B, MAIN, OPS, C])
watchers = st.sampled_from([MAIN, MAIN, MAIN, OPS, OPS, A, B, C, GLOBAL])
parents = st.none() | st.sampled_from([MAIN, MAIN, OPS, A, GLOBAL])
actors = st.none() | st.sampled_from([*QUALIFIED, "human:alice"])
#: Steps (rule calls) and examples (runs from a fresh database) explored, per backend.
STATS: Counter[str] = Counter()


def outcome(call: Callable[[], Any]) -> Any:
    """The result of a call, or the name of the typed error it raised."""
    try:
        return call()
    except (UnknownSessionError, Unknown):
        return "Unknown sessionKey"
    except (InvalidArgumentError, Refused):  # R-T3: a parent refused
        return "Refused parent"


class ServiceMachine(RuleBasedStateMachine):
    backend: ClassVar[str] = "sqlite"
    cluster: ClassVar[Any] = None

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.db = Database(self.backend, self.cluster)
        self.svc = self._open()
        self.model = Model(self.clock, days=DAYS, rows=ROWS)
        self.model.start()
        self.heads: dict[str, int] = {}
        STATS[f"{self.backend}:examples"] += 1

    def _open(self) -> SessionAwareness:
        svc = open_service(
            self.db.url,
            clock=self.clock,
            retention_days=DAYS,
            retention_rows=ROWS,
            maintenance="manual",
        )
        svc.maintain()  # the start-up maintenance, run here so it never races a step
        return svc

    def both(self, service: Callable[[], Any], model: Callable[[], Any]) -> Any:
        STATS[f"{self.backend}:steps"] += 1
        got, want = outcome(service), outcome(model)
        assert got == want, f"service returned {got!r}, the model says {want!r}"
        return got

    # -- lifecycle ------------------------------------------------------------------------------

    @initialize()
    def a_small_world(self) -> None:
        """Start where things happen: two managers, a bare-key session, one spawned child."""
        for key in (MAIN, OPS, GLOBAL):
            self.open(key, None)
        self.spawn(A, MAIN, "r1")

    @rule(key=keys, parent=parents)
    def open(self, key: str, parent: str | None) -> None:
        self.both(
            lambda: self.svc.open_session(key, parent=parent), lambda: self.model.open(key, parent)
        )

    @rule(key=keys)
    def reset(self, key: str) -> None:
        self.both(lambda: self.svc.reset_session(key), lambda: self.model.reset(key))

    @rule(key=keys, parent=parents)
    def delete_and_reopen(self, key: str, parent: str | None) -> None:
        self.both(lambda: self.svc.delete_session(key), lambda: self.model.delete(key))
        self.open(key, parent)

    @rule(key=keys)
    def delete(self, key: str) -> None:
        self.both(lambda: self.svc.delete_session(key), lambda: self.model.delete(key))

    @rule()
    def restart(self) -> None:
        """R-N6: close the process and open it again; startup prunes (R-R1)."""
        STATS[f"{self.backend}:restarts"] += 1
        self.svc.close()
        self.svc = self._open()
        self.model.start()

    @rule()
    def maintain(self) -> None:
        """R-R1 (ADR 038): the background maintenance's turn: a prune when one is due."""
        self.svc.maintain()
        self.model.maintain()

    # -- producers ------------------------------------------------------------------------------

    @rule(child=qualified, parent=watchers, run=st.sampled_from(["r1", "r2", "r3"]))
    def spawn(self, child: str, parent: str, run: str) -> None:
        self.both(
            lambda: self.svc.record_child_spawned(child, parent=parent, run_id=run),
            lambda: self.model.spawn(child, parent, run),
        )

    @rule(
        key=keys,
        channel=st.sampled_from(["telegram", "discord", ""]),
        actor=st.none() | st.just("human:alice"),
        idem=st.none() | st.sampled_from(["h1", "h2"]),
    )
    def human_message(self, key: str, channel: str, actor: str | None, idem: str | None) -> None:
        self.both(
            lambda: self.svc.record_human_direct_message(
                key, channel=channel, actor_id=actor, idempotency_key=idem
            ),
            lambda: self.model.human(key, channel, actor, idem),
        )

    @rule(key=keys, summary=st.sampled_from(GOALS), actor=actors)
    def goal_change(self, key: str, summary: str, actor: str | None) -> None:
        """Including the watcher itself as the actor (R-W5)."""
        actor_type = "system" if actor is None else "human" if "human" in actor else "agent"
        self.both(
            lambda: self.svc.record_goal_changed(
                key, summary=summary, actor_type=actor_type, actor_id=actor
            ),
            lambda: self.model.goal(key, summary, actor_type, actor),
        )

    @rule(
        key=keys,
        run=st.sampled_from(["r1", "r2", "r9"]),
        result=st.sampled_from(["ok", "error", "timeout", "cancelled"]),
    )
    def run_terminal(self, key: str, run: str, result: str) -> None:
        self.both(
            lambda: self.svc.record_run_terminal(key, run_id=run, outcome=result),
            lambda: self.model.run_terminal(key, run, result),
        )

    @rule(key=keys, operation=st.sampled_from(["c1", "c2"]))
    def compacted(self, key: str, operation: str) -> None:
        self.both(
            lambda: self.svc.record_compacted(key, operation_id=operation),
            lambda: self.model.compacted(key, operation),
        )

    # -- watches and notices --------------------------------------------------------------------

    @rule(watcher=watchers, watched=keys)
    def watch(self, watcher: str, watched: str) -> None:
        self.both(
            lambda: self.svc.watch(watcher, watched), lambda: self.model.watch(watcher, watched)
        )

    @rule(watcher=watchers, watched=keys)
    def unwatch(self, watcher: str, watched: str) -> None:
        self.both(
            lambda: self.svc.unwatch(watcher, watched),
            lambda: self.model.unwatch(watcher, watched),
        )

    @rule(watcher=watchers)
    def drain(self, watcher: str) -> None:
        drained = self.both(
            lambda: self.svc.drain_notices(watcher), lambda: self.model.drain(watcher)
        )
        if isinstance(drained, list):  # else a watcher never seen (R-L9)
            STATS[f"{self.backend}:notices drained"] += len(drained)

    @precondition(lambda self: any(self.model._pending(w) for w in QUALIFIED))
    @rule(data=st.data())
    def drain_a_watcher_with_notices(self, data: st.DataObject) -> None:
        """Steer towards the interesting part: a watcher that has something to drain."""
        watcher = data.draw(st.sampled_from([w for w in QUALIFIED if self.model._pending(w)]))
        self.drain(watcher)

    @precondition(lambda self: bool(self.model.cursors))
    @rule(data=st.data(), summary=st.sampled_from(GOALS), actor=actors)
    def change_a_watched_target(self, data: st.DataObject, summary: str, actor: str | None) -> None:
        """Steer towards notices: a goal change on a session someone watches."""
        target = data.draw(st.sampled_from(sorted({t for _, t in self.model.cursors})))
        self.goal_change(target, summary, actor)

    @rule(key=keys, since=st.integers(0, 14))
    def changes_since(self, key: str, since: int) -> None:
        self.both(
            lambda: self.svc.session_status(key, changes_since=since),
            lambda: self.model.status(key, since),
        )

    # -- time and retention ---------------------------------------------------------------------

    @rule(step=st.sampled_from([{"minutes": 7}, {"minutes": 61}, {"hours": 13}, {"hours": 50}]))
    def advance(self, step: dict[str, float]) -> None:
        self.clock.advance(**step)

    @rule()
    def prune(self) -> None:
        def service() -> Any:
            result = self.svc.prune()
            marks = {mark["sessionKey"]: mark["watermark"] for mark in result["watermarks"]}
            return {**result, "watermarks": marks}

        result = self.both(service, self.model.prune)
        STATS[f"{self.backend}:rows pruned"] += result["removedRows"]
        STATS[f"{self.backend}:cursors expired"] += result["expiredCursors"]

    # -- invariants -----------------------------------------------------------------------------

    @invariant()
    def notices_and_cursors_match(self) -> None:
        """R-N1–R-N4, R-L9: pending notices equal the model's (a key never seen is unknown
        to both); L ≤ N ≤ M; one notice per pair."""
        for watcher in KEYS:
            pending = outcome(lambda w=watcher: self.svc.pending_notices(w))
            assert pending == outcome(lambda w=watcher: self.model.pending(w)), watcher
            assert not isinstance(pending, list) or len(pending) == len(set(pending))
            rows = self.svc.read_model.cursors_of_watcher(watcher, pending_only=False)
            cursors = {r.target_key: (r.acknowledged, r.notified, r.material) for r in rows}
            assert cursors == self.model.positions(watcher), watcher
            assert all(low <= mid <= high for low, mid, high in cursors.values())

    @invariant()
    def every_log_matches_and_heads_never_go_down(self) -> None:
        """R-L4, R-S1, R-S3: `changesSince 0` equals the model's; heads never decrease."""
        for key in KEYS:
            got = outcome(lambda k=key: self.svc.session_status(k, changes_since=0))
            assert got == outcome(lambda k=key: self.model.status(k, 0)), key
            session = self.model.sessions.get(key)
            head = session.head if session is not None else 0
            assert head >= self.heads.get(key, 0)
            self.heads[key] = head
            if isinstance(got, dict):
                assert got["stateVersion"] == head

    def teardown(self) -> None:
        try:
            if not self.svc.closed:
                assert_audit_clean(self.svc)  # R-R2
        finally:
            self.svc.close()
            self.db.discard()
