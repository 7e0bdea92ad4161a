"""What a hook process imports: a hook run is a process start on every prompt, so its imports
are the user's wait (issue 39). Each test runs the hook as Claude Code does (a process, JSON on
stdin) under a probe that lists the modules the hook added to the interpreter's own start-up."""

from __future__ import annotations

import gc
import io
import json
import os
import socket
import subprocess
import sys
import threading
import typing
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from session_awareness.application import (
    ConfigurationError,
    figures,
    open_service,
    process_metrics,
    projection,
    service,
    snapshotting,
    store,
)
from session_awareness.application.upstream import monitor
from session_awareness.configuration import (
    parsed_sqlite_url,
    plain_sqlite_path,
    sqlite_environment,
)
from session_awareness.domain import keys
from session_awareness.domain.drains import Drains
from session_awareness.domain.keys import drains_id, watch_id
from session_awareness.domain.session import Session
from session_awareness.domain.watch import Watch
from session_awareness.infrastructure import claude_hooks
from session_awareness.infrastructure.claude_relay import socket_path
from session_awareness.infrastructure.claude_state import ClaudeState, process_identity
from session_awareness.infrastructure.install_claude import HOOK_ENTRY
from tests.hooks.helpers import TIMEOUT, fixture, hook_env, lead_key

#: Runs the hook module as `python -m` does, then writes the modules it added to the file the
#: environment names (stdout and stderr stay the hook's).
PROBE = """
import sys
before = set(sys.modules)
import runpy
sys.argv = ["claude_hooks", *sys.argv[1:]]
try:
    runpy.run_module("session_awareness.infrastructure.claude_hooks", run_name="__main__")
except SystemExit:
    pass
added = sorted(set(sys.modules) - before - {"runpy"})
import os
with open(os.environ["PROBE_OUT"], "w") as out:
    out.write("\\n".join(added))
"""
#: Standard-library modules the relayed path leaves alone: each costs a share of the wait.
HEAVY_STDLIB = {
    "argparse",
    "dataclasses",
    "hashlib",
    "inspect",
    "logging",
    "pathlib",
    "subprocess",
    "tempfile",
    "typing",
    "uuid",
}


def hook_modules(
    event: dict[str, object], url: str, state: Path, out: Path
) -> tuple[str, set[str]]:
    """The hook's stdout and the modules it imported beyond the interpreter's start-up."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "claude-code", "--database-url", url],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**hook_env(state), "PROBE_OUT": str(out)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, set(out.read_text().split())


def third_party(modules: set[str]) -> list[str]:
    return sorted(
        m
        for m in modules
        if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] != "session_awareness"
    )


@contextmanager
def relay_server(state: Path, notices: list[str]) -> Iterator[list[dict[str, object]]]:
    """A stand-in for the session's MCP server on the hook socket of this process (the hook's
    parent, as Claude Code is of both): it answers every request with `notices`."""
    host = process_identity(os.getpid())
    assert host is not None
    path = socket_path(ClaudeState(state), host)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    received: list[dict[str, object]] = []
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()
    listener.settimeout(TIMEOUT)

    def serve() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:  # closed: the test is over
            return
        with conn, conn.makefile("rwb") as stream:
            received.append(json.loads(stream.readline()))
            stream.write(json.dumps({"notices": notices}).encode() + b"\n")

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    try:
        yield received
    finally:
        listener.close()
        path.unlink(missing_ok=True)
        worker.join(timeout=TIMEOUT)


class TestARelayedPrompt:
    def test_it_imports_the_standard_library_only_and_none_of_its_heavy_modules(
        self, tmp_path: Path
    ) -> None:
        """A prompt whose session's MCP server is up is handed to it by a hook that imports
        no third-party package, no layer of the service, and none of the slow standard
        modules (R-A1: a hook never blocks the turn it serves); the server's notices are
        the hook's output."""
        state = tmp_path / "state"
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        event = fixture("user_prompt_submit", session_id="lead-1")
        with relay_server(state, ["a notice"]) as received:
            stdout, modules = hook_modules(event, url, state, tmp_path / "modules.txt")
        assert [r["signal"]["event"] for r in received] == ["UserPromptSubmit"]  # type: ignore[index]
        assert "a notice" in json.loads(stdout)["hookSpecificOutput"]["additionalContext"]
        assert third_party(modules) == []
        assert sorted(m for m in modules if m.startswith("session_awareness.")) == [
            "session_awareness.configuration",
            "session_awareness.infrastructure",  # the hook itself runs as `__main__`
            "session_awareness.infrastructure.claude_relay",
            "session_awareness.infrastructure.claude_state",
        ]
        assert sorted(modules & HEAVY_STDLIB) == []


#: What a hook that records in-process (no server up) leaves alone (issue 39, ADR 039): it
#: opens the store, records the event and drains notices, so the audit's replay and report,
#: upstream monitoring, the spool's file, a transcript's view, the session tools, the MCP
#: server, the console and the operator CLI are not its business, nor is any third-party
#: package beside `eventsourcing` (no `pydantic`, `structlog`, `mcp`, `psycopg`), nor the
#: relay's `socket` once no server's socket is found, nor `logging`, which nothing in the
#: process configured (`session_awareness.logs`), nor `urllib.parse` (with `ipaddress`):
#: the URL `install` writes is read without it, and once, the spool being off. The read
#: side (queries, status, marks) and the metrics' figures are built when first asked for.
#: Nor `hashlib`, whose OpenSSL binding `uuid.uuid5` would load: the ids are derived with
#: the interpreter's own SHA-1 (`domain/keys.py`).
EVENTSOURCING = {"eventsourcing", "typing_extensions"}  # the library, and what it imports
NOT_IN_PROCESS = {
    "argparse",
    "asyncio",
    "concurrent.futures",
    "hashlib",
    "ipaddress",
    "logging",
    "pathlib",
    "shutil",
    "socket",
    "subprocess",
    "tempfile",
    "urllib.parse",
    "session_awareness.application.async_service",
    "session_awareness.application.audit_report",
    "session_awareness.application.figures",
    "session_awareness.application.history",
    "session_awareness.application.invariants",
    "session_awareness.application.marks",
    "session_awareness.application.queries",
    "session_awareness.application.redaction",
    "session_awareness.application.replay",
    "session_awareness.application.spool",
    "session_awareness.application.status",
    "session_awareness.application.tools",
    "session_awareness.application.transcript_port",
    "session_awareness.application.transcript_view",
    "session_awareness.application.upstream",
    "session_awareness.infrastructure.claude_transcripts",
    "session_awareness.infrastructure.cli",
    "session_awareness.infrastructure.console",
    "session_awareness.infrastructure.mcp_server",
    "session_awareness.infrastructure.readmodel.audit_tables",
    "session_awareness.infrastructure.readmodel.sqlite_audit",
}


class TestInProcess:
    @pytest.mark.parametrize("name", ["session_start", "user_prompt_submit"])
    def test_recording_in_process_loads_only_what_recording_uses(
        self, name: str, tmp_path: Path
    ) -> None:
        """With no server up, a session start and a prompt (each naming its transcript) are
        recorded by a hook that imports the service's recording path and nothing it does not
        use: no third-party package but `eventsourcing`, none of the modules above (R-A1: the
        hook's start-up is the user's wait)."""
        state = tmp_path / "state"
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        event = fixture(name, session_id="lead-1", transcript_path=str(tmp_path / "t.jsonl"))
        stdout, modules = hook_modules(event, url, state, tmp_path / "modules.txt")
        assert stdout == ""
        assert "session_awareness.application.recording" in modules
        assert {m.split(".")[0] for m in third_party(modules)} <= EVENTSOURCING
        assert sorted(modules & NOT_IN_PROCESS) == []
        with open_service(url) as svc:
            row = svc.session_rows()[0]
            assert row.key == lead_key("lead-1")
            assert svc.transcript_session(row.key).transcript is not None

    def test_a_prompt_without_a_server_records_in_process(self, tmp_path: Path) -> None:
        """With no server up, the hook loads the service itself and records the turn
        (R-A1); the relay's lean imports change nothing of what is opened."""
        state = tmp_path / "state"
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        event = fixture("user_prompt_submit", session_id="lead-1")
        stdout, modules = hook_modules(event, url, state, tmp_path / "modules.txt")
        assert stdout == ""
        assert "session_awareness.application" in modules
        with open_service(url) as svc:
            assert [row.key for row in svc.session_rows()] == [lead_key("lead-1")]

    @pytest.mark.parametrize("text", ["{not json", json.dumps(fixture("stop"))])
    def test_input_that_records_nothing_loads_no_service(self, text: str, tmp_path: Path) -> None:
        """An event the hook ignores is refused before anything heavy is imported."""
        out = tmp_path / "modules.txt"
        done = subprocess.run(
            [sys.executable, "-c", PROBE, "claude-code"],
            input=text,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env={**hook_env(tmp_path / "state"), "PROBE_OUT": str(out)},
            check=False,
        )
        assert (done.returncode, done.stdout) == (0, "")
        assert "ignored" in done.stderr
        modules = set(out.read_text().split())
        assert third_party(modules) == []
        assert not [m for m in modules if m.startswith("session_awareness.application")]


#: The modules of the cursor's and the drains' aggregates: a hook run imports each when it
#: builds or meets one of its events (ADR 039).
CURSOR_MODULES = {"session_awareness.domain.drains", "session_awareness.domain.watch"}


def a_worker_spoke(url: str) -> str:
    """Claude Code's lead `lead-1` with a worker it watches, which a human spoke to: the
    lead has a notice pending. The worker's key."""
    lead = lead_key("lead-1")
    child = f"{lead}:subagent:w1"
    with open_service(url) as svc:
        svc.open_session(lead)
        assert svc.record_child_spawned(child, parent=lead, run_id="run-1") is not None
        svc.record_human_direct_message(child, channel="terminal")
    return child


class TestTheCursorsOnFirstNeed:
    @pytest.mark.parametrize("name", ["session_start", "user_prompt_submit"])
    def test_a_session_nobody_watches_imports_no_cursor_module(
        self, name: str, tmp_path: Path
    ) -> None:
        """A session start and a prompt, recorded in-process on a session that has no
        cursor and no pending notice, build no `Watch` or `Drains` event and import neither
        aggregate's module, their event classes being a tenth of the run (R-A1: the hook's
        start-up is the user's wait); the turn is recorded all the same."""
        state = tmp_path / "state"
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        event = fixture(name, session_id="lead-1")
        stdout, modules = hook_modules(event, url, state, tmp_path / "modules.txt")
        assert stdout == ""
        assert "session_awareness.application.recording" in modules
        assert sorted(modules & CURSOR_MODULES) == []
        with open_service(url) as svc:
            assert [row.key for row in svc.session_rows()] == [lead_key("lead-1")]

    def test_a_prompt_with_no_pending_notice_on_a_lead_that_drained_imports_none(
        self, tmp_path: Path
    ) -> None:
        """A lead that watches a worker and drained its notice before has a cursor and a
        `Drains` in the store; a prompt with nothing pending reads neither, and imports
        neither module (R-N3: nothing to drain; R-A1)."""
        state = tmp_path / "state"
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        a_worker_spoke(url)
        with open_service(url) as svc:
            assert len(svc.drain_notices(lead_key("lead-1"))) == 1
        event = fixture("user_prompt_submit", session_id="lead-1")
        stdout, modules = hook_modules(event, url, state, tmp_path / "modules.txt")
        assert stdout == ""
        assert sorted(modules & CURSOR_MODULES) == []

    def test_a_prompt_with_a_pending_notice_imports_them_and_drains_it(
        self, tmp_path: Path
    ) -> None:
        """A prompt on a lead with a pending notice loads its cursor and stores its drain,
        importing the two modules then: the notice is the hook's output and is drained, the
        read model's rows written by the same process (R-N1, R-N3, R-A1)."""
        state = tmp_path / "state"
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        child, lead = a_worker_spoke(url), lead_key("lead-1")
        event = fixture("user_prompt_submit", session_id="lead-1")
        stdout, modules = hook_modules(event, url, state, tmp_path / "modules.txt")
        assert json.loads(stdout)["hookSpecificOutput"]["additionalContext"].endswith(
            f'session_status sessionKey "{child}" changesSince 1.'
        )
        assert sorted(modules & CURSOR_MODULES) == sorted(CURSOR_MODULES)
        with open_service(url) as svc:
            assert svc.drain_notices(lead) == []
            [cursor] = svc.store.read_model.cursors_of_watcher(lead, pending_only=False)
            assert (cursor.target_key, cursor.acknowledged, cursor.notified) == (child, 2, 2)

    def test_a_subagent_start_builds_the_parents_cursor_and_its_row(self, tmp_path: Path) -> None:
        """A sub-agent's start spawns a child the parent watches: the hook builds the
        cursor, importing its module then, and projects its row, so the child's next human
        turn reaches the parent's next prompt (R-W1, R-N1, R-A1)."""
        state = tmp_path / "state"
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        lead = lead_key("lead-1")
        with open_service(url) as svc:
            svc.open_session(lead)
        event = fixture("subagent_start", session_id="lead-1", agent_id="agent-7")
        stdout, modules = hook_modules(event, url, state, tmp_path / "modules.txt")
        assert stdout == ""
        assert "session_awareness.domain.watch" in modules
        child = f"{lead}:subagent:agent-7"
        with open_service(url) as svc:
            [cursor] = svc.store.read_model.cursors_of_watcher(lead, pending_only=False)
            assert cursor.target_key == child
            svc.record_human_direct_message(child, channel="terminal")
            assert svc.drain_notices(lead) == [
                f'Session "{child}" changed (other actor). Reconcile before acting: '
                f'session_status sessionKey "{child}" changesSince 1.'
            ]


#: Opens the store in a fresh interpreter, then decodes, first thing, the cursor's latest
#: snapshot and its events, then the watcher's drains' (each aggregate's module not imported
#: until then), and prints, as JSON, what it decoded, the aggregate the snapshot and the
#: events after it make, and which of the two modules were imported before each.
DECODE_PROBE = """
import json, sys
from session_awareness.application import open_service
from session_awareness.domain.keys import SessionRef, drains_id, watch_id
url, watcher, target = sys.argv[1:]
modules = ["session_awareness.domain.watch", "session_awareness.domain.drains"]
out = {"imported": [m for m in modules if m in sys.modules]}
with open_service(url, spool=False, maintenance="manual") as svc:
    for name, aggregate_id in (
        ("watch", watch_id(watcher, SessionRef.of(target).session_id)),
        ("drains", drains_id(watcher)),
    ):
        out[name + "_imported"] = [m for m in modules if m in sys.modules]
        [snapshot] = list(svc.store.snapshots.get(aggregate_id))[-1:]
        restored = snapshot.mutate(None)
        out[name] = {"snapshot": [type(snapshot).TOPIC, type(restored).TOPIC, restored.version]}
        events = list(svc.store.events.get(aggregate_id))
        for event in events[restored.version:]:
            restored = event.mutate(restored)
        out[name] |= {
            "events": [type(e).TOPIC for e in events],
            "state": [restored.version, restored.snapshot_state()],
        }
print(json.dumps(out, default=str))
"""


#: The aggregates the store snapshots (ADR 022).
SNAPSHOTTED = (Session, Watch, Drains)


class TestTheSnapshottingIntervals:
    def test_each_aggregate_is_snapshotted_at_its_interval_found_by_its_topic(self) -> None:
        """The store's intervals name no aggregate class (R-A1: naming `Watch` and `Drains`
        imports them), yet give each of the three its interval when first asked, and none
        to any other class; the library's check that snapshotting is on holds from the
        start (ADR 022)."""
        intervals = snapshotting.SnapshottingIntervals(snapshotting.SNAPSHOTTED_TOPICS)
        assert intervals and len(intervals) == 0
        assert [intervals.get(cls) for cls in SNAPSHOTTED] == [snapshotting.SNAPSHOT_INTERVAL] * 3
        assert [intervals.get(cls) for cls in (Session.Opened, Watch.Started, object)] == [None] * 3
        assert isinstance(store.SessionStore.snapshotting_intervals, type(intervals))


class TestStoredEventsOfAModuleNotImported:
    def test_a_fresh_process_decodes_a_cursors_and_a_drains_events_and_snapshots(
        self, database_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A process that has not imported the cursor's or the drains' module (a hook run
        imports each on first need, ADR 039) decodes their stored events and snapshots by
        topic all the same, first thing, into the classes and the state that wrote them: the
        store stays readable (R-R2, R-A1)."""
        monkeypatch.setattr(
            store.SessionStore, "snapshotting_intervals", dict.fromkeys(SNAPSHOTTED, 2)
        )
        lead, child = "agent:main:main", "agent:main:subagent:w1"
        with open_service(database_url, spool=False, maintenance="manual") as svc:
            svc.open_session(lead)
            assert svc.record_child_spawned(child, parent=lead, run_id="run-1") is not None
            for _ in range(2):
                svc.record_human_direct_message(child, channel="terminal")
                assert len(svc.drain_notices(lead)) == 1
            wid = watch_id(lead, svc.store.resolve_id(child)[1])
            expected = {
                name: svc.store.repository.get(aggregate_id)
                for name, aggregate_id in (("watch", wid), ("drains", drains_id(lead)))
            }
        done = subprocess.run(
            [sys.executable, "-c", DECODE_PROBE, database_url, lead, child],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert (out["imported"], out["watch_imported"]) == ([], [])
        assert out["drains_imported"] == ["session_awareness.domain.watch"]
        assert out["watch"]["events"] == [
            "session_awareness:Watch.Started",
            "session_awareness:Watch.NoticeOpened",  # each turn opens one, each drain ends it
            "session_awareness:Watch.NoticeOpened",
        ]
        assert out["drains"]["events"] == [
            "session_awareness:Drains.Started",
            "session_awareness:Drains.Drained",
        ]
        for name, topic in (("watch", "session_awareness:Watch"),
                            ("drains", "session_awareness:Drains")):  # fmt: skip
            aggregate = expected[name]
            assert out[name]["snapshot"] == [f"{topic}.Snapshot", topic, 2]
            assert out[name]["state"] == json.loads(
                json.dumps([aggregate.version, aggregate.snapshot_state()], default=str)
            )


class TestTheServiceBuildsOnFirstUse:
    def test_upstream_monitoring_is_built_when_first_asked_for_with_its_defaults(
        self, tmp_path: Path
    ) -> None:
        """A service opened without upstream arguments imports no upstream module until its
        monitor is asked for, which then has the defaults `configure_upstream` gives; a
        malformed `upstream_timeout` is still refused at open (R-U2)."""
        assert service.PROVIDER_TIMEOUT == monitor.PROVIDER_TIMEOUT
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        with open_service(url, spool=False, maintenance="manual") as svc:
            assert svc.upstream_monitor.timeout == monitor.PROVIDER_TIMEOUT
            assert svc.upstream_monitor.providers == {}
        with pytest.raises(ConfigurationError, match="upstream_timeout"):
            open_service(url, upstream_timeout=0)


#: Runs the command `install` writes (`HOOK_ENTRY`, as `python -P -c` runs it), having first
#: asked for the number of objects frozen out of the garbage collector's sight to be written,
#: at exit, to the file the environment names.
FROZEN_AT_EXIT = """
import atexit, gc, os
atexit.register(
    lambda: open(os.environ["PROBE_OUT"], "w").write(str(gc.get_freeze_count()))
)
"""


class TestTheHookProcessExit:
    @pytest.mark.parametrize("name", ["session_start", "user_prompt_submit"])
    def test_the_installed_hook_leaves_its_objects_to_the_process_end(
        self, name: str, tmp_path: Path
    ) -> None:
        """The installed hook, having recorded in-process, freezes what its imports built
        before the interpreter's shutdown, which would otherwise collect garbage over all of
        it, none of it garbage, about a tenth of the run (R-A1: the hook's process is the
        user's wait); the event is recorded and the store closed all the same."""
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        out = tmp_path / "frozen.txt"
        done = subprocess.run(
            [sys.executable, "-P", "-c", FROZEN_AT_EXIT + HOOK_ENTRY, "claude-code",
             "--database-url", url],
            input=json.dumps(fixture(name, session_id="lead-1")),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env={**hook_env(tmp_path / "state"), "PROBE_OUT": str(out)},
            check=False,
        )  # fmt: skip
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        assert int(out.read_text()) > 10_000
        with open_service(url) as svc:
            assert [row.key for row in svc.session_rows()] == [lead_key("lead-1")]

    def test_main_called_in_a_longer_process_leaves_its_garbage_collected(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Only a caller that says the process ends (`exiting`) gets the freeze: a host
        calling `main` in a process that lives on keeps every collection (R-A1)."""
        monkeypatch.setenv("SESSION_AWARENESS_STATE_DIR", str(tmp_path / "state"))
        monkeypatch.setattr(sys, "stdin", io.StringIO("{not json"))
        frozen = gc.get_freeze_count()
        assert claude_hooks.main(["claude-code"]) == 0
        assert gc.get_freeze_count() == frozen


#: Records a prompt in-process as `python -m` runs the hook, then lists the dataclasses of the
#: package's own it built (not the event classes, which the library's metaclass makes
#: dataclasses).
OWN_DATACLASSES = """
import runpy, sys
sys.argv = ["claude_hooks", *sys.argv[1:]]
try:
    runpy.run_module("session_awareness.infrastructure.claude_hooks", run_name="__main__")
except SystemExit:
    pass
built = sorted(
    f"{name}.{value.__qualname__}"
    for name, module in list(sys.modules.items())
    if name.startswith("session_awareness")
    for value in vars(module).values()
    if type(value) is type
    and value.__module__ == name
    and "__dataclass_fields__" in value.__dict__
)
sys.stderr.write("\\n".join(built))
"""
#: Each costs about half a millisecond of every in-process hook run to build (its methods
#: are generated and compiled at import): the ones recording uses (issue 39).
RECORDING_DATACLASSES = [
    "session_awareness.application.backlog.Adopted",  # the spool's port, beside its Delivery
    "session_awareness.application.backlog.Delivery",
    "session_awareness.application.ports.CursorRow",
    "session_awareness.application.ports.Head",
    "session_awareness.application.ports.PrunePlan",
    "session_awareness.application.ports.SessionRow",
    "session_awareness.application.ports.SessionState",
    "session_awareness.application.ports.UpstreamLinkRow",
    "session_awareness.application.retention.Retention",
    "session_awareness.application.unit_of_work.Absent",
    "session_awareness.application.watching.Handover",  # a prompt's hand-over (R-N8)
    "session_awareness.domain.intake.SignalRequest",
    "session_awareness.domain.keys.SessionRef",
    "session_awareness.domain.notices.Drained",
    "session_awareness.domain.notices.Handed",
    "session_awareness.domain.notices.Needs",
    "session_awareness.domain.notices.Notice",
    "session_awareness.domain.notices.Opened",
    "session_awareness.domain.notices.Recorded",
    "session_awareness.domain.notices.Told",
    "session_awareness.domain.signals.Payload",
    "session_awareness.domain.upstream.UpstreamLink",
    "session_awareness.domain.upstream.UpstreamSource",
    "session_awareness.infrastructure.readmodel.dialect.Dialect",
    "session_awareness.infrastructure.readmodel.sqlite_recorder.SQLiteDialect",
    "session_awareness.infrastructure.readmodel.tables.Column",
    "session_awareness.infrastructure.readmodel.tables.Table",
    "session_awareness.infrastructure.readmodel.writes.Write",
]


class TestTheDataclassesOfARecording:
    def test_recording_in_process_builds_only_the_dataclasses_it_uses(self, tmp_path: Path) -> None:
        """A prompt recorded in-process builds the package's own dataclasses that recording
        uses and no other: a reading of the metrics (`Figures`, `Latencies`) builds its own
        when it happens (R-A1: the hook's start-up is the user's wait). A new one on this
        path is a cost to decide on, here."""
        done = subprocess.run(
            [sys.executable, "-c", OWN_DATACLASSES, "claude-code", "--database-url",
             f"sqlite:///{tmp_path / 'sessions.db'}"],
            input=json.dumps(fixture("user_prompt_submit", session_id="lead-1")),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=hook_env(tmp_path / "state"),
            check=True,
        )  # fmt: skip
        assert done.stderr.split("\n") == RECORDING_DATACLASSES


class TestTheIds:
    @settings(max_examples=300, deadline=None)
    @given(st.text(), st.text())
    def test_each_id_is_the_uuid5_the_standard_library_derives(self, agent: str, key: str) -> None:
        """A session's, a cursor's and a drains' id are `uuid.uuid5` of their names, though
        derived without `hashlib` (R-K1: the same key names the same stream, in stores
        written before too; R-A1: OpenSSL's load is about 4 ms of a hook run)."""
        session = keys._session_id(agent, key)
        assert session == uuid.uuid5(keys.ID_NAMESPACE, f"session\x00{agent}\x00{key}")
        assert keys.watch_id(key, session) == uuid.uuid5(
            keys.ID_NAMESPACE, f"watch\x00{key}\x00{session}"
        )
        assert keys.drains_id(key) == uuid.uuid5(keys.ID_NAMESPACE, f"drains\x00{key}")

    def test_a_known_session_keeps_its_id(self) -> None:
        """The id of a key is the one every earlier version stored its events under (R-K1)."""
        ref = keys.SessionRef.of("agent:main:main")
        assert ref.session_id == uuid.UUID("c46e200f-6048-539c-b2d4-f12782312375")


class TestTheSQLiteUrl:
    @settings(max_examples=300, deadline=None)
    @given(st.text(alphabet="/ab.:é %?#=&@[]\t\n-_~", max_size=24))
    def test_a_plain_url_is_read_as_the_url_parser_reads_it(self, path: str) -> None:
        """A SQLite URL holding nothing a URL parser reads is taken as written, without
        `urllib.parse`; what it names and how it opens it are what the parser finds (R-A1:
        the in-process hook reads its URL so)."""
        url = f"sqlite:///{path}"
        plain = plain_sqlite_path(url)
        if plain is None:
            return
        assert parsed_sqlite_url(url) == (plain, "rwc")

    @pytest.mark.parametrize(
        ("url", "plain"),
        [
            ("sqlite:////home/dev/.local/state/session-awareness/session-awareness.db",
             "/home/dev/.local/state/session-awareness/session-awareness.db"),
            ("sqlite:///relative.db", "relative.db"),
            ("sqlite:///:memory:", ":memory:"),
            ("sqlite:///my sessions.db", "my sessions.db"),
            ("sqlite:///a%20b.db", None),
            ("sqlite:///a.db?mode=ro", None),
            ("sqlite:///a.db#x", None),
            ("sqlite:///", None),
            ("sqlite://host/a.db", None),
            ("postgresql://db/app", None),
        ],
    )  # fmt: skip
    def test_which_urls_are_plain(self, url: str, plain: str | None) -> None:
        """The URLs `install` writes are plain; any with an escape, an option, a fragment,
        a host or no file goes to the parser, which reads or refuses it as before (R-A1)."""
        assert plain_sqlite_path(url) == plain
        if plain is not None:
            assert sqlite_environment(url)["SQLITE_DBNAME"].startswith(
                "file:session-awareness-" if plain == ":memory:" else plain
            )


#: Imports the service with `typing.get_type_hints` counting its callers, then writes them.
HINTS_PROBE = """
import sys, typing
callers = []
real = typing.get_type_hints
def counted(*args, **kwargs):
    callers.append(sys._getframe(1).f_code.co_name)
    return real(*args, **kwargs)
typing.get_type_hints = counted
import session_awareness.application
print(sorted(set(callers)))
"""


class TestTheServiceImport:
    def test_importing_the_service_evaluates_no_annotation(self) -> None:
        """The projection's row functions are registered by their event classes, named,
        never by evaluating the module's string annotations at import (R-A1: every process
        that records imports it); each names the class its annotation gives."""
        done = subprocess.run(
            [sys.executable, "-c", HINTS_PROBE],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=True,
        )
        assert done.stdout.strip() == "[]"
        for cls in (Watch.Started, Drains.Started):  # registered with their first event
            projection._row_function(cls)
        rows = projection._rows.registry
        assert {Watch.Started, Watch.Moved, Drains.Started, Drains.Drained} <= set(rows)
        later = {"Watch": Watch, "Drains": Drains}  # the projection imports them then
        for cls, function in rows.items():
            if cls is not object:
                annotation = typing.get_type_hints(function, localns=later)["event"]
                assert annotation is cls, function

    def test_reading_the_figures_is_what_loads_their_classes(self, tmp_path: Path) -> None:
        """A service that counts imports no figures' classes until they are read (R-O2;
        R-A1: a hook run counts and never reads them)."""
        done = subprocess.run(
            [sys.executable, "-c", FIGURES_PROBE, f"sqlite:///{tmp_path / 'sessions.db'}"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=True,
        )
        assert done.stdout.split() == ["False", "True", "1"]
        assert process_metrics.Latencies is figures.Latencies  # the name hosts imported
        assert process_metrics.Figures is figures.Figures


#: Opens a service, records a turn, then says whether the figures' module was loaded before
#: and after the figures were read, and how many signals they counted.
FIGURES_PROBE = """
import sys
from session_awareness.application import open_service
with open_service(sys.argv[1], spool=False, maintenance="manual") as svc:
    svc.open_session("agent:main:main")
    svc.record_human_direct_message("agent:main:main", channel="cli")
    before = "session_awareness.application.figures" in sys.modules
    figures = svc.metrics.figures()
    after = "session_awareness.application.figures" in sys.modules
print(before, after, figures.record_seconds.count)
"""
