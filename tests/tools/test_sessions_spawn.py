"""`sessions_spawn`: the agent gives the task, the host's spawner starts and names the child,
and the service records the spawn edge (R-T1, R-T3, R-L5, R-W1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from session_awareness.application import SessionAwareness
from session_awareness.testing.read_models import read_model_rows
from tests.conftest import FakeClock
from tests.contract.helpers import cursor
from tests.tools.conftest import RecordingSpawner, WorldFactory
from tests.tools.helpers import HELPER, MAIN, PEER, WORKER, error, ms, read_only_world

CHILD = "agent:main:subagent:child-1"
FAILED = error("spawn_failed", "the child session could not be spawned")
TASK = {"task": "Summarise the logs"}


def spawn(svc: SessionAwareness, caller: str = MAIN, **arguments: Any) -> dict[str, Any]:
    return svc.tools.call("sessions_spawn", {**TASK, **arguments}, caller=caller)


def events(svc: SessionAwareness, key: str, caller: str = MAIN) -> list[dict[str, Any]]:
    answer = svc.tools.call("session_status", {"sessionKey": key, "changesSince": 0}, caller=caller)
    return answer["stateChanges"]["events"]  # type: ignore[no-any-return]


class TestSessionsSpawn:
    def test_the_host_names_the_child_and_run_and_the_edge_is_recorded(
        self, world: SessionAwareness, spawner: RecordingSpawner
    ) -> None:
        """R-T1, R-L5: accepted at once, with the host's childSessionKey and runId; the edge
        is recorded on the child, by the caller as its parent."""
        assert spawn(world) == {"status": "accepted", "childSessionKey": CHILD, "runId": "run-1"}
        assert events(world, CHILD) == [
            {
                "sequence": 1,
                "kind": "child_spawned",
                "actorType": "agent",
                "occurredAt": ms(5),
                "summary": "child session spawned",
                "actorId": MAIN,
                "runId": "run-1",
            }
        ]

    def test_a_strict_service_records_the_edge_as_a_lenient_one_does(
        self, open_world: WorldFactory
    ) -> None:
        """R-L9, R-L5: the tool opens its child under the caller, an open session, so a
        strict service records the same spawn edge and seeds the caller's cursor."""
        strict = open_world(strict=True)
        assert spawn(strict)["childSessionKey"] == CHILD
        assert [e["kind"] for e in events(strict, CHILD)] == ["child_spawned"]
        assert cursor(strict, MAIN, CHILD) == (1, 1, 1)

    def test_the_spawner_gets_the_validated_request_with_defaults(
        self, world: SessionAwareness, spawner: RecordingSpawner
    ) -> None:
        """R-T1: camelCase keys, defaults filled in, options left out stay out."""
        spawn(world)
        spawn(world, label="analyst", runtime="acp", model="m-1", thinking="high",
              sandbox="require", thread=True)  # fmt: skip
        assert spawner.requests == [
            (MAIN, {"task": "Summarise the logs", "runtime": "subagent", "context": "isolated",
                    "sandbox": "inherit", "thread": False}),
            (MAIN, {"task": "Summarise the logs", "label": "analyst", "runtime": "acp",
                    "model": "m-1", "thinking": "high", "context": "isolated",
                    "sandbox": "require", "thread": True}),
        ]  # fmt: skip

    def test_fork_is_only_for_native_subagents(
        self, world: SessionAwareness, spawner: RecordingSpawner
    ) -> None:
        """R-T1: `context: "fork"` with `runtime: "acp"` is a typed error naming `context`;
        the host is not asked."""
        answer = spawn(world, runtime="acp", context="fork")
        assert answer == error(
            "invalid_input",
            'context must be "isolated" or "fork" (fork only with runtime "subagent")',
            "context",
        )
        assert spawner.requests == []
        assert spawn(world, context="fork")["status"] == "accepted"

    def test_the_spawn_seeds_the_callers_cursor_on_the_child(self, world: SessionAwareness) -> None:
        """R-W1: the parent's cursor starts at the spawn's sequence; a later change notifies."""
        spawn(world)
        assert cursor(world, MAIN, CHILD) == (1, 1, 1)
        world.record_goal_changed(CHILD, summary="goal created")
        assert len(world.pending_notices(MAIN)) == 1

    def test_a_new_child_gets_the_label_and_joins_the_callers_tree(
        self, world: SessionAwareness
    ) -> None:
        """R-T2: the spawned child is the caller's descendant, listed with its label."""
        spawn(world, label="analyst")
        rows = world.tools.call("sessions_list", {"label": "analyst"}, caller=MAIN)["sessions"]
        assert [(r["sessionKey"], r["kind"], r["parentSessionKey"]) for r in rows] == [
            (CHILD, "subagent", MAIN)
        ]

    def test_a_child_the_host_already_opened_keeps_its_label(
        self, world: SessionAwareness, spawner: RecordingSpawner
    ) -> None:
        """R-K3: the host's own label on a child it opened first is not replaced."""
        world.open_session(CHILD, kind="subagent", label="host-label")
        spawn(world, label="agent-label")
        [row] = world.session_rows(keys=[CHILD])
        assert (row.label, row.parent_key) == ("host-label", MAIN)

    def test_without_a_spawner_the_spawn_is_not_configured(self, open_world: WorldFactory) -> None:
        """R-T1: the service never starts sessions itself; the host must provide it."""
        svc = open_world(spawner=None)
        assert spawn(svc) == error(
            "not_configured", "sessions_spawn needs a spawner: open_service(..., spawner=...)"
        )


class TestRefusedSpawns:
    def test_a_spawner_that_raises_is_spawn_failed_without_its_text(
        self, world: SessionAwareness, spawner: RecordingSpawner
    ) -> None:
        """R-T1: the agent gets `spawn_failed`; the exception's text is neither shown nor
        logged (it may quote the task); its type is logged."""
        spawner.failure = RuntimeError("quota exceeded for Summarise the logs")
        with capture_logs() as logs:
            assert spawn(world) == FAILED
        assert all("quota" not in repr(entry) for entry in logs)
        assert {"event": "tool_spawn_failed", "caller": MAIN, "error_type": "RuntimeError",
                "log_level": "warning"} in logs  # fmt: skip

    @pytest.mark.parametrize(
        "answer",
        [
            None,
            "agent:main:subagent:x",
            ("", "r"),
            (CHILD, ""),
            (CHILD, "a\nb"),
            ("agent:main:x\u2028y", "r"),
            (CHILD, 5),
            (MAIN, "r"),
        ],
        ids=repr,
    )
    def test_a_spawner_answer_that_is_not_a_child_and_run_is_spawn_failed(
        self, world: SessionAwareness, spawner: RecordingSpawner, answer: Any
    ) -> None:
        """R-T1: the host's answer is checked like any input; nothing is recorded."""
        before = read_model_rows(world.store.recorder)
        spawner.answer = answer
        assert spawn(world) == FAILED
        assert read_model_rows(world.store.recorder) == before

    def test_a_child_that_is_the_callers_ancestor_is_refused(
        self, world: SessionAwareness, spawner: RecordingSpawner
    ) -> None:
        """R-T3: a sub-agent whose host hands back its own manager makes no cycle."""
        spawner.children.append(MAIN)
        with capture_logs() as logs:
            assert spawn(world, caller=WORKER) == FAILED
        assert [e.get("reason") for e in logs if e["event"] == "signal_rejected"] == [
            "parent_cycle"
        ]
        [row] = world.session_rows(keys=[MAIN])
        assert row.parent_key is None

    def test_a_child_with_another_parent_is_refused(
        self, world: SessionAwareness, spawner: RecordingSpawner
    ) -> None:
        """R-T3: HELPER is WORKER's child; a spawn by MAIN cannot re-parent it."""
        spawner.children.append(HELPER)
        assert spawn(world) == FAILED
        [row] = world.session_rows(keys=[HELPER])
        assert row.parent_key == WORKER
        assert cursor(world, MAIN, HELPER) is None

    def test_a_refused_spawn_reads_the_same_whatever_the_reason(
        self, world: SessionAwareness, spawner: RecordingSpawner
    ) -> None:
        """R-T2: a cycle, another parent's child, a bad answer or a failing host: the agent
        learns nothing about which sessions exist or why."""
        answers = []
        for child in (MAIN, HELPER):  # WORKER's ancestor, then MAIN's grandchild (WORKER's)
            spawner.children.append(child)
            answers.append(spawn(world, caller=WORKER if child == MAIN else PEER))
        spawner.answer = ("not a key ", "r")
        answers.append(spawn(world))
        spawner.failure = RuntimeError("no")
        answers.append(spawn(world))
        assert answers == [FAILED] * 4

    def test_the_reproducer_cannot_take_a_parentless_session(
        self, open_world: WorldFactory
    ) -> None:
        """R-T2, R-T3: the agent cannot name a child, so a hidden session stays hidden."""
        svc = open_world()
        svc.open_session("agent:main:secret")
        svc.record_goal_changed("agent:main:secret", summary="goal updated")
        grab = {"childSessionKey": "agent:main:secret", "runId": "grab"}
        answer = svc.tools.call("sessions_spawn", grab, caller=MAIN)
        assert answer["error"]["code"] == "invalid_input"
        status = svc.tools.call(
            "session_status", {"sessionKey": "agent:main:secret", "changesSince": 0}, caller=MAIN
        )
        assert status["error"]["code"] == "unknown_session"


class TestSandboxedSpawns:
    def test_sandbox_require_marks_the_child_sandboxed(self, world: SessionAwareness) -> None:
        """R-T2: a child spawned with `sandbox: "require"` is clamped to its tree."""
        spawn(world, sandbox="require")
        assert world.is_sandboxed(CHILD)

    def test_a_sandboxed_callers_child_inherits_the_mark(self, world: SessionAwareness) -> None:
        """R-T2: `sandbox: "inherit"` (the default) passes the caller's mark on."""
        world.open_session(MAIN, sandboxed=True)
        spawn(world)
        assert world.is_sandboxed(CHILD)

    def test_an_unsandboxed_callers_child_is_not_marked(self, world: SessionAwareness) -> None:
        """R-T2: without a sandbox anywhere, the child is not marked."""
        spawn(world)
        assert not world.is_sandboxed(CHILD)


class TestAnUnreachableStore:
    def test_the_agent_is_told_the_store_is_unavailable_and_never_why(
        self, tmp_path: Path, clock: FakeClock
    ) -> None:
        """R-T1: `service_error` carries a fixed message; the store's own reason (here SQLite's
        "readonly database", on PostgreSQL the server's host and port) is logged for the
        host as `tool_service_error` and never reaches the agent."""
        spawner = RecordingSpawner()
        with read_only_world(tmp_path, clock, spawner=spawner) as svc, capture_logs() as logs:
            answer = spawn(svc)
        assert answer == error(
            "service_error", "the session service is unavailable; try again later"
        )
        reasons = [e["reason"] for e in logs if e["event"] == "tool_service_error"]
        assert len(reasons) == 1
        assert "readonly database" in reasons[0]
