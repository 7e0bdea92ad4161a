"""What the store refuses leaves no trace; credentials never reach a log line or an error
(R-L4, R-L8, R-R2, R-S1, R-S4)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from structlog.testing import capture_logs

from session_awareness.application import (
    ConfigurationError,
    InvalidChangesSinceError,
    SessionAwareness,
    SessionAwarenessError,
    StoreUnavailableError,
    open_service,
)
from session_awareness.infrastructure.readmodel.bulk import BULK_INLINE
from session_awareness.testing.pgcluster import PostgresCluster
from tests.contract.helpers import CHILD, MANAGER, spawn
from tests.reliability.helpers import all_events, assert_audit_clean, wait_until


@pytest.fixture
def own(database_url: str) -> Iterator[SessionAwareness]:
    """A service closed whatever happens: these tests end with their own audit."""
    service = open_service(database_url)
    try:
        yield service
    finally:
        service.close()


class TestRefusedWrites:
    def test_a_failing_projection_rolls_the_events_back_too(
        self, own: SessionAwareness, database_url: str, request: pytest.FixtureRequest
    ) -> None:
        """R-R2, ADR 002: events and rows commit together or not at all; a failure while
        writing the rows leaves the event store and the read models as they were. The
        signal is kept (R-L8) and recorded once the fault is gone, before later ones."""
        spawn(own)
        recorder: Any = own.store.recorder.read_models
        apply_changes = recorder.apply_changes

        def fail_after_the_first_row(c: Any, changes: Any) -> None:
            for number, change in enumerate(changes):
                if number == 1:
                    raise RuntimeError("a projection bug")
                apply_changes(c, [change])

        recorder.apply_changes = fail_after_the_first_row
        # nothing records the kept signal until the fault is gone
        with own._intake.backlog.flushing:
            assert own.record_goal_changed(CHILD, summary="goal updated") is None
            assert [event["sequence"] for event in all_events(own, CHILD)] == [1]
            assert own.health()["signals"]["buffered"] == 1
            recorder.apply_changes = apply_changes
        assert wait_until(own.flush_signals)
        assert own.record_goal_changed(CHILD, summary="goal cleared") == 3
        events = all_events(own, CHILD)
        assert [(e["sequence"], e["summary"]) for e in events[1:]] == [
            (2, "goal updated"),
            (3, "goal cleared"),
        ]
        assert_audit_clean(own)

    def test_kept_signals_counts_what_the_backlog_keeps(self, own: SessionAwareness) -> None:
        """R-L8: `kept_signals` is the backlog's count, as `health()` reports it, until the
        kept signals land."""
        spawn(own)
        recorder: Any = own.store.recorder.read_models
        apply_changes = recorder.apply_changes

        def failing(c: Any, changes: Any) -> None:
            raise RuntimeError("a projection bug")

        recorder.apply_changes = failing
        with own._intake.backlog.flushing:
            assert own.record_goal_changed(CHILD, summary="goal updated") is None
            assert own.kept_signals == own.health()["signals"]["buffered"] == 1
            recorder.apply_changes = apply_changes
        assert wait_until(own.flush_signals)
        assert own.kept_signals == 0

    def test_a_failing_projection_rolls_a_large_save_back_too(
        self, own: SessionAwareness, database_url: str, request: pytest.FixtureRequest
    ) -> None:
        """R-R2, ADR 002 on the path of many rows at once (a drain of more than
        BULK_INLINE pairs, one save, its cursors written by one statement for them all, as
        the bulk path writes a wide save's): a failure after the rows are written leaves no
        event and no row behind."""
        own.open_session(MANAGER)
        children = [f"agent:main:subagent:c{number}" for number in range(BULK_INLINE + 2)]
        for number, child in enumerate(children):
            own.record_child_spawned(child, parent=MANAGER, run_id=f"run-{number}")
            own.record_human_direct_message(child, channel="chat")
        recorder: Any = own.store.recorder.read_models
        batches = recorder.write_batches
        written: list[int] = []

        def fail_after_writing(c: Any, rows: Any) -> None:
            batches(c, rows)
            written.append(sum(len(batch) for batch in rows.values()))
            raise RuntimeError("a projection bug")

        recorder.write_batches = fail_after_writing
        with pytest.raises(RuntimeError, match="projection bug"):
            own.drain_notices(MANAGER)
        recorder.write_batches = batches
        assert written == [len(children)]  # every cursor's row was written, then rolled back
        assert len(own.pending_notices(MANAGER)) == len(children)
        assert len(own.drain_notices(MANAGER)) == len(children)
        assert own.pending_notices(MANAGER) == []
        assert_audit_clean(own)

    def test_a_nul_character_never_makes_changes_since_skip_a_sequence(
        self, own: SessionAwareness, database_url: str, request: pytest.FixtureRequest
    ) -> None:
        """R-L4, R-S1: a producer field the store cannot hold is refused (or stored), never
        half-recorded: the next signal's sequence follows the last one changesSince shows."""
        spawn(own)
        own.record_human_direct_message(CHILD, channel="tele\x00gram")
        own.record_goal_changed(CHILD, summary="goal updated")
        sequences = [event["sequence"] for event in all_events(own, CHILD)]
        assert sequences == list(range(1, len(sequences) + 1))
        assert_audit_clean(own)

    def test_a_label_the_store_cannot_hold_is_a_typed_error_and_no_lost_session(
        self, own: SessionAwareness, database_url: str, request: pytest.FixtureRequest
    ) -> None:
        """R-K3, R-T1: open_session answers a typed error or opens the session; it never
        leaves a session that no query can find and no later open can repair."""
        key = "agent:main:labelled"
        with contextlib.suppress(SessionAwarenessError):
            own.open_session(key, label="bad\x00label")
        own.open_session(key, label="good")
        assert key in {row["sessionKey"] for row in own.sessions_list()}
        assert_audit_clean(own)

    @pytest.mark.parametrize("field", ["search", "label", "agentId"])
    def test_a_nul_character_in_a_list_filter_is_a_typed_answer(
        self, own: SessionAwareness, database_url: str, request: pytest.FixtureRequest, field: str
    ) -> None:
        """R-T1: a filter the store cannot compare is refused as invalid input or matches
        nothing; never an internal error."""
        own.open_session(MANAGER)
        answer = own.tools.call("sessions_list", {field: "a\x00b"}, caller=MANAGER)
        assert answer in ({"sessions": [], "visibility": "tree"},) or (
            answer["error"]["code"] == "invalid_input"
        )


class TestChangesSinceDigits:
    def test_a_zero_padded_string_of_digits_is_a_valid_version(self, svc: SessionAwareness) -> None:
        """R-S4: `changesSince` is an integer or a string of digits, up to 2^53 − 1."""
        spawn(svc)
        status = svc.session_status(CHILD, changes_since="0" * 16 + "1")
        assert status["stateChanges"]["events"] == []
        with pytest.raises(InvalidChangesSinceError):
            svc.session_status(CHILD, changes_since="9007199254740992")


SECRET = "Sup3r:S3cr%40t"  # noqa: S105 -- a made-up password with URL metacharacters, as written in a URL


class TestCredentials:
    @pytest.mark.parametrize(
        ("url", "error"),
        [
            (f"postgresql://sa:{SECRET}@127.0.0.1:1/db?connect_timeout=1", StoreUnavailableError),
            (f"postgresql://:{SECRET}@127.0.0.1:1/db?connect_timeout=1", StoreUnavailableError),
            (f"postgresql://sa:{SECRET}@127.0.0.1:notaport/db", ConfigurationError),
            (f"postgresql://sa:{SECRET}@127.0.0.1:1/db?sslmode=disable", StoreUnavailableError),
            (f"mysql://sa:{SECRET}@127.0.0.1/db", ConfigurationError),
            (f"sqlite://sa:{SECRET}@host/sessions.db", ConfigurationError),
        ],
    )
    def test_a_password_in_a_url_is_redacted_in_errors_and_logs(
        self, url: str, error: type[Exception], caplog: pytest.LogCaptureFixture
    ) -> None:
        """A database password never appears in an error message or a log line (a closed
        port is a `StoreUnavailableError`, R-E1)."""
        caplog.set_level(logging.DEBUG)
        with capture_logs() as logs, pytest.raises(error) as raised:
            open_service(url)
        assert "S3cr" not in str(raised.value)
        assert "S3cr" not in repr(logs) + caplog.text

    def test_a_working_service_never_logs_its_password(
        self, postgres: PostgresCluster, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Opening, recording, listening, failing queries and closing log no credential."""
        caplog.set_level(logging.DEBUG)
        with capture_logs() as logs, open_service(f"{postgres.url}?schema=secrets") as svc:
            spawn(svc)
            svc.record_goal_changed(CHILD, summary="goal updated")
            svc.tools.call("sessions_list", {}, caller=MANAGER)
            svc.tools.call("session_status", {"sessionKey": "agent:main:nobody"}, caller=MANAGER)
            health = repr(svc.health())
        assert postgres.password not in repr(logs) + caplog.text + health


#: Reads and commands of a closed service, by name: each raises `StoreUnavailableError`.
CLOSED_CALLS: dict[str, Any] = {
    "session_status": lambda svc: svc.session_status(CHILD),
    "sessions_list": lambda svc: svc.sessions_list(),
    "descendants": lambda svc: svc.descendants(MANAGER),
    "pending_notices": lambda svc: svc.pending_notices(MANAGER),
    "drain_notices": lambda svc: svc.drain_notices(MANAGER),
    "watch": lambda svc: svc.watch("agent:main:other", CHILD),
    "open_session": lambda svc: svc.open_session("agent:main:new"),
    "delete_session": lambda svc: svc.delete_session(CHILD),
    "pin_session": lambda svc: svc.pin_session(CHILD),
    "is_sandboxed": lambda svc: svc.is_sandboxed(CHILD),
    "transcript_session": lambda svc: svc.transcript_session(CHILD),
    "history": lambda svc: svc.history(CHILD),
    "audit": lambda svc: svc.audit(),
    "prune": lambda svc: svc.prune(),
    "sweep": lambda svc: svc.sweep(),
    "resolve": lambda svc: svc.resolve(CHILD),
}


class TestClosedService:
    @pytest.mark.parametrize("name", CLOSED_CALLS)
    def test_a_read_or_command_after_close_raises_store_unavailable(
        self, open_svc: Any, name: str
    ) -> None:
        """docs/api.md (Thread model): after close() a query or a command raises
        StoreUnavailableError saying the service is closed, not the library's raw error."""
        svc = open_svc()
        spawn(svc)
        svc.close()
        with pytest.raises(StoreUnavailableError, match="the service is closed"):
            CLOSED_CALLS[name](svc)

    def test_a_producer_after_close_returns_none(self, open_svc: Any) -> None:
        """R-L8, R-L9: a producer that is not strict never raises, closed or not; a closed
        service keeps nothing, since nothing would ever record it, and says so in its log,
        at WARNING: calling it after `close()` is the caller's mistake."""
        svc = open_svc()
        spawn(svc)
        svc.close()
        with capture_logs() as logs:
            assert svc.record_goal_changed(CHILD, summary="goal updated") is None
        assert [(e["event"], e["log_level"], e["detail"]) for e in logs] == [
            ("signal_rejected", "warning", "the service is closed")
        ]
        assert svc.health()["signals"]["buffered"] == 0

    def test_health_after_close_answers_closed_on_the_stores_backend(
        self, own: SessionAwareness, database_url: str
    ) -> None:
        """health() answers after close(): `store` is `closed`, the backend still the store's."""
        own.close()
        health = own.health()
        backend = "postgresql" if database_url.startswith("postgresql") else "sqlite"
        assert (health["backend"], health["store"], health["wakeListener"]) == (
            backend,
            "closed",
            "off",
        )

    def test_health_checks_the_store_without_listing_its_waiting_watchers(
        self, open_svc: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-O1 (issue 39, item 6): health() checked the store by listing every watcher with
        a pending notice, 200,000 keys at a million sessions; one row answers as well."""
        svc = open_svc()
        spawn(svc)
        svc.record_goal_changed(CHILD, summary="goal updated")
        assert svc.read_model.watchers_with_pending()

        def listed() -> Any:
            raise AssertionError("health() listed every watcher with a pending notice")

        monkeypatch.setattr(svc.store.read_model, "watchers_with_pending", listed)
        assert svc.health()["store"] == "ok"

    def test_a_tool_after_close_answers_service_error(self, open_svc: Any) -> None:
        """R-T1: a closed service's tool answers `service_error`, not `internal_error`."""
        svc = open_svc(visibility="agent")
        spawn(svc)
        svc.close()
        answer = svc.tools.call("sessions_list", {}, caller=MANAGER)
        assert answer["error"]["code"] == "service_error"
