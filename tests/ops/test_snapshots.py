"""Snapshots of sessions and cursors, and the read model's index of idempotency keys: a load
after a restart reads at most a snapshot interval of events, whatever the history's length,
and idempotency stays exact for every key ever recorded without the session holding them
(R-L5, R-R1, R-R2; ADR 022)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from structlog.testing import capture_logs

from session_awareness.application import SessionAwareness
from session_awareness.application.snapshotting import SNAPSHOT_INTERVAL
from session_awareness.domain.keys import watch_id
from session_awareness.domain.session import RECENT_KEYS
from tests.conftest import ServiceFactory
from tests.contract.helpers import CHILD, MANAGER, notice, spawn
from tests.ops.helpers import unmark_read_models

#: Human turns on the child: several snapshot intervals, and more keys than it keeps.
TURNS = 2 * SNAPSHOT_INTERVAL + 50


def session_id(svc: SessionAwareness, key: str) -> UUID:
    return svc.store.resolve_id(key)[1]


@contextmanager
def counting_events(svc: SessionAwareness) -> Iterator[list[Any]]:
    """The stored events the service reads from its event table meanwhile (snapshots are
    in their own table), counted by wrapping the recorder's own `select_events`."""
    recorder: Any = svc.store.events.recorder
    select = recorder.select_events
    read: list[Any] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        rows = select(*args, **kwargs)
        read.extend(rows)
        return rows

    recorder.select_events = counted
    try:
        yield read
    finally:
        del recorder.select_events


def stored_events(svc: SessionAwareness, aggregate_id: UUID) -> list[Any]:
    return list(svc.store.events.get(aggregate_id))


def snapshot_versions(svc: SessionAwareness, aggregate_id: UUID) -> list[int]:
    snapshots: Any = svc.store.snapshots
    return [snapshot.originator_version for snapshot in snapshots.get(aggregate_id)]


def turns(svc: SessionAwareness, count: int, *, key: Callable[[int], str | None]) -> None:
    for turn in range(count):
        assert svc.record_human_direct_message(CHILD, channel="telegram", idempotency_key=key(turn))


def loaded_state(svc: SessionAwareness, aggregate_id: UUID) -> tuple[int, dict[str, Any]]:
    """An aggregate as the repository loads it (from its latest snapshot), as state."""
    aggregate = svc.store.repository.get(aggregate_id)
    return aggregate.version, aggregate.snapshot_state()


def replayed_state(svc: SessionAwareness, aggregate_id: UUID) -> tuple[int, dict[str, Any]]:
    """The same aggregate replayed from its first event, snapshots ignored."""
    aggregate = None
    for event in svc.store.events.get(aggregate_id):
        aggregate = event.mutate(aggregate)
    assert aggregate is not None
    return aggregate.version, aggregate.snapshot_state()


class TestLoadsFromSnapshots:
    def test_a_restart_loads_a_long_session_and_its_cursor_from_their_snapshots(
        self, open_svc: ServiceFactory
    ) -> None:
        """The first record after a restart reads the events after the session's and the
        cursor's latest snapshots, not their whole history; both load as their replay. The
        manager drains after every turn, so its cursor stores two events a turn (a record on
        a pending cursor stores none, ADR 023)."""
        svc = open_svc()
        spawn(svc)
        for _ in range(TURNS):
            turns(svc, 1, key=lambda turn: None)
            assert svc.drain_notices(MANAGER)
        child = session_id(svc, CHILD)
        cursor = watch_id(MANAGER, child)
        assert snapshot_versions(svc, child)[-1] >= TURNS - SNAPSHOT_INTERVAL
        assert snapshot_versions(svc, cursor)[-1] >= TURNS - SNAPSHOT_INTERVAL
        svc.close()

        again = open_svc()
        with counting_events(again) as read:
            assert again.record_human_direct_message(CHILD, channel="telegram") == TURNS + 2
        history = len(stored_events(again, child)) + len(stored_events(again, cursor))
        assert history > 2 * TURNS
        assert 0 < len(read) < 2 * SNAPSHOT_INTERVAL
        for aggregate_id in (child, cursor):
            assert loaded_state(again, aggregate_id) == replayed_state(again, aggregate_id)
        assert again.pending_notices(MANAGER) == [notice(CHILD, TURNS + 1)]

    def test_a_snapshot_keeps_every_kind_of_state_a_session_has(
        self, open_svc: ServiceFactory
    ) -> None:
        """Marks, a transcript, watchers, an upstream link and the latest keys come back
        from a snapshot as the replay has them (value objects, tuples, sets)."""
        svc = open_svc()
        spawn(svc)
        svc.open_session("agent:ops:main")  # a watcher the service knows (R-L9)
        svc.watch("agent:ops:main", CHILD)
        svc.pin_session(CHILD)
        svc.note_transcript(CHILD, source="claude-code", ref="transcripts/child.jsonl")
        assert svc.record_adopted(
            CHILD, catalog_id="cat", host_id="host", thread_id="thread",
            upstream_kind="chat", upstream_ref="ref", marker="m1",
        )  # fmt: skip
        child = session_id(svc, CHILD)
        session = svc.store.repository.get(child)
        turns(svc, SNAPSHOT_INTERVAL - session.version % SNAPSHOT_INTERVAL, key=str)
        version, state = loaded_state(svc, child)
        assert snapshot_versions(svc, child)[-1] == version
        assert (version, state) == replayed_state(svc, child)
        assert state["upstream"]["marker"] == "m1" and state["pinned"] is True
        loaded = svc.store.repository.get(child)
        assert loaded.transcript == ("claude-code", "transcripts/child.jsonl")
        assert loaded.upstream.source.catalog_id == "cat"
        assert loaded.has_seen("human:0") and set(loaded.watchers) == {MANAGER, "agent:ops:main"}

    def test_a_snapshot_that_cannot_be_stored_never_fails_the_save_it_follows(
        self, open_svc: ServiceFactory, database_url: str
    ) -> None:
        """A snapshot is a cache: without its table the record still lands, once, and the
        failure is logged; loads go on from the events."""
        svc = open_svc()
        spawn(svc)
        child = session_id(svc, CHILD)
        refuse_snapshots(svc, database_url)
        with capture_logs() as logs:
            turns(svc, SNAPSHOT_INTERVAL, key=lambda turn: None)
        assert [entry["event"] for entry in logs].count("snapshot_failed") >= 1
        assert svc.session_status(CHILD)["stateVersion"] == SNAPSHOT_INTERVAL + 1
        assert len(stored_events(svc, child)) == svc.store.repository.get(child).version
        assert snapshot_versions(svc, child) == []


def refuse_snapshots(svc: SessionAwareness, database_url: str) -> None:
    """A trigger in the database that refuses every new snapshot row."""
    snapshots: Any = svc.store.snapshots
    recorder = snapshots.recorder
    table = recorder.events_table_name
    if database_url.startswith("sqlite"):
        statements = [
            f"CREATE TRIGGER refuse_snapshots BEFORE INSERT ON {table} "
            "BEGIN SELECT RAISE(ABORT, 'snapshots refused'); END"
        ]
    else:
        schema = recorder.datastore.schema
        statements = [
            f"CREATE FUNCTION {schema}.refuse_snapshots() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'snapshots refused'; END $$",
            f"CREATE TRIGGER refuse_snapshots BEFORE INSERT ON {schema}.{table} "
            f"FOR EACH ROW EXECUTE FUNCTION {schema}.refuse_snapshots()",
        ]
    with recorder.datastore.transaction(commit=True) as c:
        for statement in statements:
            c.execute(statement)


class TestIdempotencyFromTheKeyIndex:
    def test_a_key_older_than_the_ones_a_session_keeps_is_still_a_duplicate(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-L5: the session keeps only its latest keys, yet a repeat of its very first one
        records nothing, before and after a restart."""
        svc = open_svc()
        spawn(svc)
        turns(svc, RECENT_KEYS + 10, key=lambda turn: f"turn-{turn}")
        child = svc.store.repository.get(session_id(svc, CHILD))
        assert not child.has_seen("human:turn-0") and len(child.seen) <= RECENT_KEYS
        head = svc.session_status(CHILD)["stateVersion"]
        assert svc.record_human_direct_message(
            CHILD, channel="telegram", idempotency_key="turn-0"
        ) is None  # fmt: skip
        assert svc.record_run_terminal(CHILD, run_id="run-1", outcome="ok") == head + 1
        svc.close()

        again = open_svc()
        for repeat in (
            lambda: again.record_human_direct_message(
                CHILD, channel="telegram", idempotency_key="turn-0"
            ),
            lambda: again.record_run_terminal(CHILD, run_id="run-1", outcome="error"),
            lambda: again.record_child_spawned(CHILD, parent=MANAGER, run_id="run-1"),
        ):
            assert repeat() is None
        assert again.session_status(CHILD)["stateVersion"] == head + 1

    def test_a_read_model_rebuild_writes_the_key_index_again(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-R2: the index is a read model like the others: without it the store counts as
        written by an earlier version, the start rebuilds it from the events, and the keys
        it lost are duplicates again; an audit sees a missing row and a rebuild restores it."""
        svc = open_svc()
        spawn(svc)
        turns(svc, RECENT_KEYS + 10, key=lambda turn: f"turn-{turn}")
        recorder: Any = svc.store.recorder.read_models
        with recorder.datastore.transaction(commit=True) as c:
            c.execute(recorder.sql("DELETE FROM {s}session_dedupe_keys"))
        unmark_read_models(svc)  # as a store an earlier version wrote (ADR 044)
        assert svc.read_model.read_models_outdated()
        svc.close()

        with capture_logs() as logs:
            again = open_svc()
        assert [e for e in logs if e["event"] == "read_models_migrated"]
        head = again.session_status(CHILD)["stateVersion"]
        assert again.record_human_direct_message(
            CHILD, channel="telegram", idempotency_key="turn-0"
        ) is None  # fmt: skip

        recorder = again.store.recorder.read_models
        with recorder.datastore.transaction(commit=True) as c:
            c.execute(
                recorder.sql("DELETE FROM {s}session_dedupe_keys WHERE dedupe_key = ?"),
                ("human:turn-1",),
            )
        report = again.audit()
        assert report.tables["session_dedupe_keys"].differences == 1
        assert again.audit(rebuild=True).rebuilt
        assert again.audit().clean
        assert again.record_human_direct_message(
            CHILD, channel="telegram", idempotency_key="turn-1"
        ) is None  # fmt: skip
        assert again.session_status(CHILD)["stateVersion"] == head


class TestSnapshotsBesideTheRecord:
    def test_an_audit_with_snapshots_present_replays_the_events_alone_and_is_clean(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-R2: snapshots are not events: an audit counts and replays the stored events
        only, finds the live read models equal to the replay, and a rebuild changes nothing."""
        svc = open_svc()
        spawn(svc)
        turns(svc, TURNS, key=lambda turn: f"turn-{turn}")
        assert snapshot_versions(svc, session_id(svc, CHILD))
        stored = svc.store.recorder.max_notification_id()
        report = svc.audit()
        assert report.clean, report.as_dict()
        assert report.events == len(svc.store.recorder.select_notifications(0, stored + 10))
        assert not svc.audit(rebuild=True).rebuilt

    def test_snapshots_survive_retention_and_a_restart_sees_the_pruned_watermark(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-R1, R-S3: pruning after snapshots were taken raises the watermark in the events;
        a restarted service loads the session from its snapshot plus the prune, and
        `changesSince` reports the gap."""
        svc = open_svc(retention_rows=10)
        spawn(svc)
        turns(svc, TURNS, key=lambda turn: None)
        svc.prune()
        head = svc.session_status(CHILD)["stateVersion"]
        svc.close()

        again = open_svc(retention_rows=10)
        assert again.record_human_direct_message(CHILD, channel="telegram") == head + 1
        child = session_id(again, CHILD)
        loaded = again.store.repository.get(child)
        assert loaded.pruned_watermark > head - 10 - 1
        assert loaded_state(again, child) == replayed_state(again, child)
        changes = again.session_status(CHILD, changes_since=1)["stateChanges"]
        assert changes["historyGap"] is True
        assert again.audit().clean

    def test_two_services_on_one_store_keep_their_caches_exact_across_snapshots(
        self, open_svc: ServiceFactory
    ) -> None:
        """Two processes write one session in turns, past several snapshots: each one's
        cached copy is brought forward from the events, sequences stay contiguous (R-L4)."""
        first, second = open_svc(), open_svc()
        spawn(first)
        sequences = []
        for turn in range(TURNS):
            writer = first if turn % 7 < 4 else second
            sequences.append(writer.record_human_direct_message(CHILD, channel="telegram"))
        assert sequences == list(range(2, TURNS + 2))
        child = session_id(first, CHILD)
        assert snapshot_versions(first, child)
        assert loaded_state(second, child) == replayed_state(first, child)
        second.close()
