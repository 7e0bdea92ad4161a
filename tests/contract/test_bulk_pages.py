"""A page of row changes written in bulk (`BulkWrites.apply_changes_in_bulk`: an audit's
replay, a rebuild, a large save) leaves exactly the rows of the same changes written one
statement at a time in order (`apply_changes`), on both backends (R-R2, ADR 002).

The bulk path folds the writes of one key within a page (a head's `GREATEST`, a session's
material marks, a cursor's last positions), runs each statement once for many keys, and
skips binding an id it bound for the change before. Each case here is a page where a wrong
fold shows: one key changed many times, a row deleted and created again, a prune between
signals, and seeded random pages over two sessions and two cursors.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from uuid import UUID, uuid5

import pytest

from session_awareness.application import SessionAwareness, open_service
from session_awareness.application import projection as p
from session_awareness.infrastructure.readmodel.tables import TABLES
from session_awareness.testing.read_models import read_model_rows

NS = UUID("5a1e0000-0000-4000-8000-00000000b01c")
S, T = uuid5(NS, "s"), uuid5(NS, "t")
W, V = uuid5(NS, "w"), uuid5(NS, "v")
ACTORS = [None, "agent:a:main", "agent:b:main"]
SEED = 39
PAGES = 40


@pytest.fixture
def store(database_url: str) -> Iterator[SessionAwareness]:
    """A store whose read models these tests write directly (so no rebuild check after)."""
    service = open_service(database_url, maintenance="manual")
    try:
        yield service
    finally:
        service.close()


def _rows_after(
    svc: SessionAwareness, pages: Sequence[Sequence[p.RowChange]], *, bulk: bool
) -> dict[str, list[tuple[Any, ...]]]:
    recorder: Any = svc.store.recorder
    models = recorder.read_models
    with models.long_running(), models.datastore.transaction(commit=True) as c:
        for table in TABLES:
            c.execute(models.sql(f"DELETE FROM {{s}}{table.name}"))  # noqa: S608 -- a read-model table's name
        for page in pages:
            if bulk:
                models.apply_changes_in_bulk(c, page)
            else:
                models.apply_changes(c, page)
    return read_model_rows(svc.store.recorder)


def assert_bulk_equals_one_by_one(
    svc: SessionAwareness, pages: Sequence[Sequence[p.RowChange]]
) -> None:
    one_by_one = _rows_after(svc, pages, bulk=False)
    in_bulk = _rows_after(svc, pages, bulk=True)
    for table, rows in one_by_one.items():
        assert in_bulk[table] == rows, f"{table} differs written in bulk"


def opened(sid: UUID, at: int = 1) -> p.SessionOpened:
    return p.SessionOpened(sid, "agent", f"key-{sid.hex[:6]}", "main", None, None, at)


def signal(
    sid: UUID, sequence: int, at: int, payload: dict[str, Any] | None = None
) -> p.SignalAppended:
    return p.SignalAppended(
        sid, 100 + sequence, sequence, "goal_changed", "agent", "agent:a:main", None, at,
        f"summary {sequence}", payload, at,
    )  # fmt: skip


def started(wid: UUID, target: UUID, at: int, position: int = 0) -> p.CursorStarted:
    return p.CursorStarted(wid, "agent:w:main", target, f"key-{target.hex[:6]}", position, at)


class TestOnePageFoldsExactly:
    def test_one_key_changed_many_times_in_a_page(self, store: SessionAwareness) -> None:
        """R-R2: heads, updatedAt, material marks, marks, channel and runs of one session
        written many times in one page end as written one by one."""
        page: list[p.RowChange] = [
            opened(S),
            signal(S, 1, 10, {"channel": "chat"}),
            p.MaterialMoved(S, 1, "agent:a:main", 10),
            signal(S, 2, 30),
            p.MaterialMoved(S, 2, "agent:b:main", 30),
            signal(S, 3, 20, {"channel": "chat"}),  # an earlier time: updatedAt keeps 30
            p.MaterialMoved(S, 3, "agent:b:main", 20),
            p.MaterialMoved(S, 4, None, 40),
            p.SessionTouched(S, 25),
            p.MarkSet(S, "pinned", True),
            p.ChannelSeen(S, "chat"),
            p.RunStarted(S, "run-1", 11),
            p.ChannelSeen(S, "mail"),
            p.MarkSet(S, "pinned", False),
            p.RunEnded(S, "run-2", "failed", 12),  # not the running run: ignored
            p.RunEnded(S, "run-1", "completed", 13),
            p.RunStarted(S, "run-3", 14),
            p.KeyRecorded(S, "k1"),
            p.KeyRecorded(S, "k1"),
        ]
        assert_bulk_equals_one_by_one(store, [page])

    def test_a_session_deleted_and_opened_again_and_a_cursor_removed_and_started_again(
        self, store: SessionAwareness
    ) -> None:
        """R-R2: rows deleted then written again in one page end as written one by one."""
        page: list[p.RowChange] = [
            opened(S),
            signal(S, 1, 10),
            signal(S, 2, 11),
            started(W, S, 12),
            p.CursorMoved(W, 0, 2, 2, 102, 13),
            p.SessionDeleted(S, 2, 14),
            p.UpstreamLinkRemoved(S),
            p.CursorRemoved(W),
            p.SessionReopened(S, "main", "again", None, 15),
            signal(S, 3, 16),
            started(W, S, 17, position=3),
            p.CursorMoved(W, 3, 3, 3, None, 18),
            p.UpstreamLinkSet(S, "cat", "host", "th", "claude", "ref", None, None, 1, 19),
            p.UpstreamLinkAdvanced(S, "m1", "p1", 20),
            p.UpstreamLinkRemoved(S),
            p.UpstreamLinkSet(S, "cat", "host", "th", "claude", "ref", "m0", None, 2, 21),
        ]
        assert_bulk_equals_one_by_one(store, [page])

    def test_a_prune_between_signals_of_one_page(self, store: SessionAwareness) -> None:
        """R-R1, R-R2: a prune in the middle of a page removes the rows before it, keeps
        the ones after it, even one at or below its watermark, and raises the watermark."""
        page: list[p.RowChange] = [
            opened(S),
            *(signal(S, n, 10 + n) for n in range(1, 5)),
            p.HistoryPruned(S, 3),
            signal(S, 5, 20),
            p.HistoryPruned(S, 2),  # a lower watermark: the head keeps 3
            signal(S, 6, 21),
        ]
        assert_bulk_equals_one_by_one(store, [page[:3], page[3:]])
        assert_bulk_equals_one_by_one(store, [page])

    def test_a_payload_with_values_other_than_text(self, store: SessionAwareness) -> None:
        """R-R2: payloads are written as the same JSON however often they repeat, whatever
        their values (text, a number, `true`, a list)."""
        payloads: list[dict[str, Any] | None] = [
            {"channel": "chat"}, {"turns": 1}, {"turns": True}, {"channel": "chat"},
            {"turns": True}, {"turns": 1}, {"outcome": ["x"]}, None,
        ]  # fmt: skip
        page: list[p.RowChange] = [
            opened(S),
            *(signal(S, n, 10, payload) for n, payload in enumerate(payloads, 1)),
        ]
        assert_bulk_equals_one_by_one(store, [page])
        rows = read_model_rows(store.store.recorder)["session_state_events"]
        written = [row[9] for row in rows]
        assert written == [
            '{"channel":"chat"}', '{"turns":1}', '{"turns":true}', '{"channel":"chat"}',
            '{"turns":true}', '{"turns":1}', '{"outcome":["x"]}', None,
        ]  # fmt: skip

    def test_every_short_run_of_reports_folds_to_the_rule(self, store: SessionAwareness) -> None:
        """R-R2: a session's consecutive run reports in one page are one statement in bulk.
        For every sequence of up to three starts and reports (four reports alone), after
        each state a run can be in, both paths end as the rule says, report by report
        (`run_lane`): a report ends the run it names unless another run is running, and
        the start time survives only for the run that started. A run id may be absent."""
        runs = ["r1", "r2", None]
        steps: list[tuple[str, str | None]] = [("start", "r1"), ("start", "r2")]
        steps += [("end", run) for run in runs]
        sequences = [list(s) for n in (1, 2, 3) for s in itertools.product(steps, repeat=n)]
        sequences += [list(s) for s in itertools.product(steps[2:], repeat=4)]
        before: list[list[tuple[str, str | None]]] = [
            [],
            [("start", "r1")],
            [("start", None)],
            [("start", "r1"), ("end", "r1")],
            [("end", "r2")],
            [("start", "r1"), ("end", "r2")],
        ]
        first: list[p.RowChange] = []
        second: list[p.RowChange] = []
        expected = {}
        for number, (prefix, sequence) in enumerate(itertools.product(before, sequences)):
            sid = uuid5(NS, f"runs-{number}")
            first += [opened(sid), *run_changes(sid, prefix, at=10)]
            second += run_changes(sid, sequence, at=100)
            expected[sid.hex] = run_lane([*run_changes(sid, prefix, at=10),
                                          *run_changes(sid, sequence, at=100)])  # fmt: skip
        assert_bulk_equals_one_by_one(store, [first, second])
        rows = read_model_rows(store.store.recorder)["session_activity"]
        assert {row[0]: row[2:6] for row in rows} == expected


def run_changes(sid: UUID, steps: list[tuple[str, str | None]], *, at: int) -> list[p.RowChange]:
    """A start or a report for each step, one time unit apart, the reports alternating
    between two outcomes."""
    return [
        p.RunStarted(sid, run, at + n) if step == "start"
        else p.RunEnded(sid, run, ("completed", "failed")[n % 2], at + n)
        for n, (step, run) in enumerate(steps)
    ]  # fmt: skip


def run_lane(changes: list[p.RowChange]) -> tuple[Any, ...]:
    """The rule for a session's run columns (run_id, run_status, run_started_at,
    run_ended_at), applied one change at a time; an absent run id is never the same run."""
    run = status = started = ended = None
    for change in changes:
        if isinstance(change, p.RunStarted):
            run, status, started, ended = change.run_id, "running", change.at, None
        elif isinstance(change, p.RunEnded):
            same = run is not None and run == change.run_id
            if status != "running" or same:
                run, status, started, ended = (
                    change.run_id,
                    change.status,
                    started if same else None,
                    change.at,
                )
    return (run, status, started, ended)


Maker = Callable[[UUID, UUID, int, str | None], list[p.RowChange]]


def random_page(rng: random.Random) -> list[p.RowChange]:
    """Changes over two sessions and two cursors in an order no service would make, each
    valid as a statement (a sequence and a registry row are written once)."""
    changes: list[p.RowChange] = [opened(S), opened(T)]
    sequence = {S: 0, T: 0}

    def signals(sid: UUID, wid: UUID, at: int, actor: str | None) -> list[p.RowChange]:
        sequence[sid] += rng.choice((1, 1, 2))
        rows: list[p.RowChange] = [
            signal(sid, sequence[sid], at, rng.choice((None, {"channel": "c"})))
        ]
        if rng.random() < 0.6:
            rows.append(p.MaterialMoved(sid, sequence[sid], actor, at))
        return rows

    def moved(sid: UUID, wid: UUID, at: int, actor: str | None) -> list[p.RowChange]:
        a, n, m = (rng.randrange(5) for _ in range(3))
        return [p.CursorMoved(wid, a, n, m, rng.choice((None, at)), at)]

    makers: list[Maker] = [
        signals, signals, signals, signals, moved,
        lambda sid, wid, at, actor: [p.HistoryPruned(sid, rng.randrange(sequence[sid] + 2))],
        lambda sid, wid, at, actor: [p.SessionDeleted(sid, sequence[sid], at)],
        lambda sid, wid, at, actor: [p.SessionReopened(sid, "main", None, None, at)],
        lambda sid, wid, at, actor: [started(wid, sid, at, position=sequence[sid])],
        lambda sid, wid, at, actor: [p.CursorRemoved(wid)],
        lambda sid, wid, at, actor: [p.SessionTouched(sid, at)],
        lambda sid, wid, at, actor: [p.ChannelSeen(sid, f"c{at % 3}")],
        lambda sid, wid, at, actor: [p.MarkSet(sid, "archived", at % 2 == 0)],
        lambda sid, wid, at, actor: [p.RunStarted(sid, f"run-{at % 3}", at)],
        lambda sid, wid, at, actor: [p.RunEnded(sid, f"run-{at % 3}", "completed", at)],
        lambda sid, wid, at, actor: [p.KeyRecorded(sid, f"k{at % 4}")],
    ]  # fmt: skip
    for _ in range(rng.randrange(10, 60)):
        make = rng.choice(makers)
        changes.extend(
            make(rng.choice((S, T)), rng.choice((W, V)), rng.randrange(1, 50), rng.choice(ACTORS))
        )
    return changes


class TestRandomPages:
    def test_seeded_random_pages_fold_exactly(self, store: SessionAwareness) -> None:
        """R-R2: any order of changes, cut into pages anywhere, ends as written one by one."""
        rng = random.Random(SEED)  # noqa: S311 -- a seeded mix, not crypto
        for _ in range(PAGES):
            changes = random_page(rng)
            cut = rng.randrange(len(changes) + 1)
            assert_bulk_equals_one_by_one(store, [changes[:cut], changes[cut:]])
