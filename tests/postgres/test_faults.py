"""The server hangs, restarts, or is slow to come back (R-L8).

A hung server is the throwaway cluster stopped with SIGSTOP: its sockets stay open and the
kernel acknowledges every packet, but nothing answers, as with a frozen host or a partition.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from psycopg import sql

from session_awareness.application import SessionAwareness, StoreUnavailableError, open_service
from session_awareness.application.tools.tool_errors import SERVICE_UNAVAILABLE
from session_awareness.domain.keys import SessionRef
from session_awareness.testing.pgcluster import PostgresCluster, StopMode
from tests.conftest import RecordingWaker, wait_until
from tests.contract.helpers import CHILD, MANAGER, notice, spawn

#: The services here run with `connect_timeout=1`; a bounded call takes about that long.
TIMEOUT = 1.0
#: A bounded call's limit in these tests: the deadline, plus room for a loaded machine.
BOUND = TIMEOUT + 1.5
#: What "at once" means for a producer while the store is known to be down.
AT_ONCE = 0.25
#: How soon after the server answers again recording resumes (the promise: about a second).
RESUMES_WITHIN = 2.0


@pytest.fixture
def own_cluster() -> Iterator[PostgresCluster]:
    """A cluster of its own: these tests freeze, stop and restart it."""
    with PostgresCluster() as cluster:
        yield cluster


def timed(call: object) -> tuple[object, float]:
    started = time.monotonic()
    try:
        result = call()  # type: ignore[operator]
    except StoreUnavailableError as error:
        result = error
    return result, time.monotonic() - started


@contextlib.contextmanager
def spawned(cluster: PostgresCluster, schema: str) -> Iterator[SessionAwareness]:
    """A service on `schema` (calls bounded by a one-second deadline) with the child spawned."""
    with open_service(f"{cluster.url}?schema={schema}&connect_timeout=1") as svc:
        spawn(svc)
        yield svc


def timed_frozen(cluster: PostgresCluster, call: object) -> tuple[object, float]:
    """`timed(call)` with the cluster frozen, thawed after."""
    cluster.freeze()
    try:
        return timed(call)
    finally:
        cluster.thaw()


class TestHungServer:
    def test_every_call_is_bounded_and_the_signals_are_kept(
        self, own_cluster: PostgresCluster
    ) -> None:
        """R-L8: with the server frozen, the first producer returns None within about
        connect_timeout and later ones at once, the signals kept; a query raises
        StoreUnavailableError and health() answers, both within the bound; a tool answers
        `service_error`. Thawed, the kept signals are recorded in order."""
        url = f"{own_cluster.url}?schema=hung&connect_timeout=1"
        with open_service(url, waker=RecordingWaker(), visibility="tree") as svc:
            spawn(svc)
            svc.session_status(CHILD)  # the pool's connections are open and idle
            own_cluster.freeze()
            try:
                first, first_took = timed(
                    lambda: svc.record_human_direct_message(CHILD, channel="telegram")
                )
                second, second_took = timed(
                    lambda: svc.record_goal_changed(CHILD, summary="goal updated")
                )
                query, query_took = timed(lambda: svc.session_status(CHILD, changes_since=0))
                health, health_took = timed(svc.health)
                tool, tool_took = timed(lambda: svc.tools.call("session_status", {}, caller=CHILD))
            finally:
                own_cluster.thaw()
            assert (first, second) == (None, None)
            assert first_took < BOUND
            assert second_took < AT_ONCE
            assert isinstance(query, StoreUnavailableError)
            assert "no answer from the server within 1 s" in str(query)
            assert query_took < BOUND
            assert isinstance(health, dict)
            assert health["store"].startswith("session store unavailable")
            assert health_took < BOUND
            assert isinstance(tool, dict)
            assert tool["error"]["code"] == "service_error"
            assert tool["error"]["message"] == SERVICE_UNAVAILABLE  # no host nor port (R-T1)
            assert tool_took < 2 * BOUND  # the view, then the status: two bounded reads at most

            assert wait_until(lambda: svc.health()["signals"]["buffered"] == 0, timeout=20)
            events = svc.session_status(CHILD, changes_since=1)["stateChanges"]["events"]
            assert [(e["sequence"], e["kind"]) for e in events] == [
                (2, "human_direct_message"),
                (3, "goal_changed"),
            ]
            assert svc.pending_notices(MANAGER) == [notice(CHILD, 1)]
            signals = svc.health()["signals"]
            assert signals == {"buffered": 0, "kept": 2, "flushed": 2, "skipped": 0, "dropped": 0}

    def test_a_command_on_a_hung_server_raises_within_the_bound(
        self, own_cluster: PostgresCluster
    ) -> None:
        """Commands (watch, drain, reset) raise StoreUnavailableError within the bound."""
        with spawned(own_cluster, "hungcmd") as svc:
            drained, took = timed_frozen(own_cluster, lambda: svc.drain_notices(MANAGER))
            assert isinstance(drained, StoreUnavailableError)
            assert took < 2 * BOUND  # the log look and the load, each bounded
            assert wait_until(lambda: svc.health()["store"] == "ok", timeout=20)
            assert svc.drain_notices(MANAGER) == []

    def test_producers_recording_at_once_on_a_hung_server_wait_out_one_deadline(
        self, own_cluster: PostgresCluster
    ) -> None:
        """R-L8, ADR 010: producers that record at the same moment on a frozen server all
        return None within the bound of one call, not one deadline after another (each
        waited for the look at the log before it, then read again itself); thawed, every
        signal is recorded once."""
        producers = 6
        with spawned(own_cluster, "hungmany") as svc:
            svc.record_human_direct_message(CHILD, channel="warm")
            start = threading.Barrier(producers)

            def record(number: int) -> tuple[object, float]:
                start.wait()
                return timed(
                    lambda: svc.record_human_direct_message(CHILD, channel=f"channel {number}")
                )

            own_cluster.freeze()
            try:
                with ThreadPoolExecutor(producers) as pool:
                    answers = list(pool.map(record, range(producers)))
            finally:
                own_cluster.thaw()
            assert [result for result, _ in answers] == [None] * producers
            assert max(took for _, took in answers) < BOUND
            assert wait_until(lambda: svc.health()["signals"]["buffered"] == 0, timeout=20)
            events = svc.session_status(CHILD, changes_since=2)["stateChanges"]["events"]
            assert [e["sequence"] for e in events] == list(range(3, 3 + producers))
            assert {e["kind"] for e in events} == {"human_direct_message"}

    def test_a_save_cut_off_after_its_commit_was_sent_is_recorded_once(
        self, own_cluster: PostgresCluster
    ) -> None:
        """R-L8, ADR 010, ADR 017: a record whose second round trip (the rows and COMMIT) waits on a
        lock past the deadline returns None and is kept; the server still commits it once the
        lock is let go. The flusher's attempts meanwhile (each cut off while waiting for the
        events table) and after must find it landed: the signal is recorded once, not twice."""
        url = f"{own_cluster.url}?schema=late&connect_timeout=1&pool_size=1&max_overflow=1"
        with open_service(url) as svc:
            spawn(svc)
            for _ in range(6):  # each statement prepared on the pooled connection (ADR 029)
                svc.record_human_direct_message(CHILD, channel="warm")
            with (
                psycopg.connect(own_cluster.url) as blocker,
                psycopg.connect(own_cluster.url, autocommit=True) as watcher,
            ):
                blocker.execute("LOCK TABLE late.session_state_events IN ACCESS EXCLUSIVE MODE")
                assert svc.record_human_direct_message(CHILD, channel="once") is None

                def waiting_on_locks() -> int:
                    query = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    row = watcher.execute(query).fetchone()
                    return int(row[0]) if row is not None else 0

                # The cut-off save, and at least one of the flusher's attempts behind it.
                assert wait_until(lambda: waiting_on_locks() >= 2, timeout=20)
                blocker.commit()
            assert wait_until(lambda: svc.health()["signals"]["buffered"] == 0, timeout=20)
            events = svc.session_status(CHILD, changes_since=0)["stateChanges"]["events"]
            channels = [
                e["payload"]["channel"] for e in events if e["kind"] == "human_direct_message"
            ]
            assert channels == ["warm"] * 6 + ["once"]
            assert svc.health()["signals"]["flushed"] == 1
            assert svc.audit().clean

    def test_a_read_executed_by_name_on_a_hung_server_raises_within_the_bound(
        self, own_cluster: PostgresCluster
    ) -> None:
        """ADR 029: a read whose statement is prepared goes by name, and stays bounded
        (ADR 017); thawed, the same `changesSince` (R-S1) answers again."""
        with spawned(own_cluster, "hungread") as svc:
            for _ in range(6):  # prepared on each of the pool's connections after a use there
                svc.session_status(CHILD, changes_since=0)
            by_name = svc.store.recorder.read_models.prepared.texts()  # type: ignore[attr-defined]
            assert any("session_state_events" in query for query in by_name)
            read, took = timed_frozen(
                own_cluster, lambda: svc.session_status(CHILD, changes_since=0)
            )
            assert isinstance(read, StoreUnavailableError)
            assert "no answer from the server within 1 s" in str(read)
            assert took < BOUND
            assert wait_until(lambda: svc.health()["store"] == "ok", timeout=20)
            assert svc.session_status(CHILD, changes_since=0)["stateChanges"]["events"]

    def test_reads_through_a_unit_of_work_on_a_hung_server_raise_store_unavailable(
        self, own_cluster: PostgresCluster
    ) -> None:
        """R-T2, R-T1: is_sandboxed (the clamp of a sandboxed caller), transcript_session and
        sessions_history load the session outside a
        command: on a hung server they raise StoreUnavailableError within the bound, and a
        tool with visibility `agent` (which asks is_sandboxed) answers `service_error`."""
        url = f"{own_cluster.url}?schema=hunguow&connect_timeout=1"
        with open_service(url) as first:
            spawn(first)
        with open_service(url, visibility="agent") as svc:  # nothing cached: a fresh process
            own_cluster.freeze()
            try:
                outcomes = {
                    name: timed(call)
                    for name, call in {
                        "is_sandboxed": lambda: svc.is_sandboxed(CHILD),
                        "transcript_session": lambda: svc.transcript_session(CHILD),
                        "sessions_history": lambda: svc.sessions_history(CHILD),
                    }.items()
                }
                tool, _ = timed(lambda: svc.tools.call("sessions_list", {}, caller=MANAGER))
            finally:
                own_cluster.thaw()
        for name, (outcome, took) in outcomes.items():
            assert isinstance(outcome, StoreUnavailableError), name
            assert took < BOUND, name
        assert isinstance(tool, dict)
        assert tool["error"]["code"] == "service_error"


class TestRestarts:
    @pytest.mark.parametrize("mode", ["fast", "immediate"])
    def test_the_first_calls_after_a_restart_succeed(
        self, own_cluster: PostgresCluster, mode: StopMode
    ) -> None:
        """After a routine restart every pooled connection is dead; the first query, the
        first command and the first producer all succeed."""
        url = f"{own_cluster.url}?schema=restart_{mode}&connect_timeout=2&pool_size=3"
        with open_service(url) as svc:
            spawn(svc)
            for _ in range(3):
                svc.session_status(CHILD)
            own_cluster.stop(mode=mode)
            own_cluster.start()
            assert svc.session_status(CHILD)["stateVersion"] == 1
            assert svc.sessions_list()
            assert svc.record_goal_changed(CHILD, summary="goal updated") == 2
            assert svc.drain_notices(MANAGER) == [notice(CHILD, 1)]
            assert svc.health()["signals"]["kept"] == 0

    def test_recording_resumes_within_a_second_of_the_server_answering(
        self, own_cluster: PostgresCluster
    ) -> None:
        """R-L8: during an outage producers fail at once after the first; once the server
        answers, the kept signals are recorded within about a second, without any call."""
        url = f"{own_cluster.url}?schema=resume&connect_timeout=1"
        with open_service(url) as svc:
            spawn(svc)
            own_cluster.stop(mode="immediate")
            took = []
            for _ in range(5):
                result, seconds = timed(
                    lambda: svc.record_goal_changed(CHILD, summary="goal updated")
                )
                assert result is None
                took.append(seconds)
            assert max(took[1:]) < AT_ONCE
            threading.Event().wait(3)  # an outage of a few seconds: the pool's back-off grows
            own_cluster.start()
            answering = time.monotonic()
            assert wait_until(lambda: svc.health()["signals"]["buffered"] == 0, timeout=20)
            assert time.monotonic() - answering < RESUMES_WITHIN
            assert svc.session_status(CHILD)["stateVersion"] == 6


class TestBacklogCounts:
    def test_a_kept_signal_whose_session_was_deleted_is_counted_as_dropped(
        self, own_cluster: PostgresCluster
    ) -> None:
        """R-L8, R-L10: kept = flushed + skipped + dropped (+ buffered); a signal kept during
        an outage whose session was deleted before it could land can no longer land: it is
        dropped (issue 38 item 7), not flushed nor skipped."""
        url = f"{own_cluster.url}?schema=skipped&connect_timeout=1"
        with open_service(url) as svc:
            spawn(svc)
            own_cluster.stop(mode="immediate")
            assert svc.record_goal_changed(CHILD, summary="goal updated") is None
            with svc._intake.backlog.flushing:  # the kept signal waits while its session goes
                own_cluster.start()
                assert wait_until(lambda: svc.health()["store"] == "ok", timeout=20)
                svc.delete_session(CHILD)
            assert wait_until(lambda: svc.health()["signals"]["buffered"] == 0, timeout=20)
            assert svc.health()["signals"] == {
                "buffered": 0, "kept": 1, "flushed": 0, "skipped": 0, "dropped": 1,
            }  # fmt: skip


class TestManyVisibleSessions:
    @pytest.mark.slow
    def test_seventy_thousand_visible_sessions_on_postgresql(
        self, postgres: PostgresCluster
    ) -> None:
        """More visible sessions than PostgreSQL's 65,535 bind parameters: `tree` visibility
        over 70,000 children lists, finds and answers without one parameter per key. The
        children are registry rows copied in directly (through the service they would take
        minutes); the service only reads them."""
        schema = f"many_{uuid.uuid4().hex[:8]}"
        with open_service(f"{postgres.url}?schema={schema}", visibility="tree") as svc:
            spawn(svc)
            with psycopg.connect(postgres.url) as conn, conn.cursor() as cur:
                table = sql.Identifier(schema, "session_registry")
                copy = sql.SQL(
                    "COPY {} (session_id, agent_id, session_key, kind, label, parent_key, "
                    "opened_at, updated_at, deleted) FROM STDIN"
                ).format(table)
                keys = [f"agent:main:subagent:w{number}" for number in range(70_000)]
                ids = [SessionRef.of(key).session_id for key in keys]
                with cur.copy(copy) as rows:
                    for key, session_id in zip(keys, ids, strict=True):
                        rows.write_row(
                            (session_id, "main", key, "subagent", None, MANAGER, 1, 1, 0)
                        )
                heads = sql.SQL("COPY {} FROM STDIN").format(
                    sql.Identifier(schema, "session_state_heads")
                )
                with cur.copy(heads) as rows:
                    for session_id in ids:
                        rows.write_row((session_id, 0, 0))
            listed = svc.tools.call("sessions_list", {"limit": 3}, caller=MANAGER)
            assert len(listed["sessions"]) == 3, listed
            status = svc.tools.call(
                "session_status", {"sessionKey": "agent:main:subagent:w69999"}, caller=MANAGER
            )
            assert status == {"sessionKey": "agent:main:subagent:w69999", "stateVersion": 0}
            found = svc.tools.call("session_status", {"sessionKey": CHILD}, caller=MANAGER)
            assert found["stateVersion"] == 1
