"""Self-suppression and derived M have one home, `domain/material.py` (R-W5, ADR 023): the
read model's SQL (`tables.MATERIAL_MOVED`, `DERIVED_MATERIAL`, `DERIVED_UPDATED`, `PENDING`)
is pinned against it over many generated histories, on both backends.

The histories come from a seeded random generator (hypothesis is not a dependency): records by
watchers, by others and by nobody, drains, watches and unwatches, the clock moving between
them. After every step each cursor's M, idle time and pending flag as the read model shows
them equal what the domain answers from the aggregates, and the target's material for each
watcher equals the rule written out over the history itself. Every contract test ends with
a rebuild, which writes the material marks in bulk (two events of one session folded into
one write by `material.moved`) and compares them row for row with these.
"""

from __future__ import annotations

import random
from datetime import datetime

from session_awareness.application import SessionAwareness
from session_awareness.application.unit_of_work import UnitOfWork
from session_awareness.domain import notices
from session_awareness.domain.keys import SessionRef
from session_awareness.domain.signals import to_ms
from session_awareness.testing.read_models import read_model_rows
from tests.conftest import FakeClock, ServiceFactory

SEED = 35
HISTORIES = 12
STEPS = 30
WATCHERS = [f"agent:w{n}:main" for n in range(3)]
#: Who records: each watcher (its own events are not its material), someone else, nobody.
ACTORS: list[str | None] = [*WATCHERS, "agent:other:main", None]


def newest_not_caused_by(log: list[tuple[int, str | None]], watcher: str) -> int:
    """R-W5 written out over the history: the newest notify-eligible event whose actor is
    not the watcher (an event without an actor is nobody's)."""
    return max((sequence for sequence, actor in log if actor != watcher), default=0)


def ms(at: datetime | None) -> int:
    """A mark's time as the read model keeps it: epoch ms, 0 before any."""
    return 0 if at is None else to_ms(at)


def check(svc: SessionAwareness, target: str, log: list[tuple[int, str | None]]) -> None:
    """Every cursor on `target`: the read model's M, idle time and pending flag are the
    domain's; the target's material for every watcher is the rule's."""
    uow = UnitOfWork(svc.store)
    session = uow.session(SessionRef.of(target))
    assert session is not None
    for watcher in WATCHERS:
        assert session.material_for(watcher) == newest_not_caused_by(log, watcher)
    (sequence, actor, at), (other, other_at) = session.material, session.material_other
    rows = read_model_rows(svc.store.recorder)["session_material"]
    marks = {row[0]: row[1:] for row in rows}
    assert marks[session.id.hex] == (sequence, actor, ms(at), other, ms(other_at))
    shown = {row.watcher_key: row for row in svc.read_model.cursors_on_target(session.id)}
    held = {w: uow.watch(w, session.id) for w in WATCHERS}
    active = {w: watch for w, watch in held.items() if watch is not None and watch.active}
    assert set(shown) == set(active)
    for watcher, watch in active.items():
        row = shown[watcher]
        expected = (
            notices.material(watch, session),
            to_ms(notices.last_moved(watch, session)),
            watch.pending,
        )
        assert (row.material, row.updated_at, row.pending) == expected, (target, watcher)


def history(svc: SessionAwareness, clock: FakeClock, rng: random.Random, target: str) -> None:
    """One generated history on `target`, checked after every step."""
    svc.open_session(target)
    log: list[tuple[int, str | None]] = []
    for _ in range(STEPS):
        step = rng.random()
        watcher = rng.choice(WATCHERS)
        if step < 0.5:
            actor = rng.choice(ACTORS)
            sequence = svc.record_goal_changed(
                target, summary="goal updated", actor_type="agent", actor_id=actor
            )
            assert sequence is not None
            log.append((sequence, actor))
        elif step < 0.7:
            svc.drain_notices(watcher)
        elif step < 0.85:
            svc.watch(watcher, target)
        else:
            svc.unwatch(watcher, target)
        if rng.random() < 0.5:
            clock.advance(seconds=rng.randint(1, 90))
        check(svc, target, log)


class TestTheMaterialRuleHasOneHome:
    def test_the_read_models_material_is_the_domains_over_generated_histories(
        self, open_svc: ServiceFactory, clock: FakeClock
    ) -> None:
        """R-W5, ADR 023: over seeded random histories of records (by each watcher, by
        another actor, by nobody), drains, watches and unwatches, every cursor's M, idle
        time and pending flag read from SQL equal the domain's `material`, `last_moved`
        and `pending`, and the target's material is the newest event its watcher did not
        cause."""
        svc = open_svc()
        for watcher in WATCHERS:
            svc.open_session(watcher)
        rng = random.Random(SEED)  # noqa: S311 -- a seeded generator of test histories, no secret
        for n in range(HISTORIES):
            history(svc, clock, rng, f"agent:t{n}:main")
