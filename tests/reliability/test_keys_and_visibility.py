"""Session keys checked on entry, SQL metacharacters kept literal, visibility that never leaks
existence (issue 8.6; SPEC R-K1, R-N1, R-T1, R-T2)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from session_awareness.application import SessionAwareness, SessionAwarenessError
from tests.conftest import FakeClock, ServiceFactory
from tests.tools.helpers import HELPER, MAIN, OPS, PEER, WORKER, build_world

BAD_KEYS = ["", " agent:main:x", "agent:main:x ", "agent:main:x\ny", "agent:main:\x07",
            'agent:main:"quoted"', "agent:main:" + "k" * 600, "agent:main:\x7f", "\t"]  # fmt: skip
SETTINGS = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def rows(svc: SessionAwareness) -> dict[str, list[tuple[Any, ...]]]:
    return svc.recorder.read_model_rows()  # type: ignore[attr-defined,no-any-return]


def refused(call: Callable[[], Any]) -> bool:
    """Refused: a typed error, or the producers' and watch's "nothing" (None / False)."""
    try:
        result = call()
    except SessionAwarenessError:
        return True
    return result in (None, False)


class TestSessionKeysOnEntry:
    @pytest.mark.parametrize("key", BAD_KEYS, ids=repr)
    def test_a_bad_key_is_refused_everywhere_and_nothing_is_stored(
        self, svc: SessionAwareness, key: str
    ) -> None:
        """R-K1, R-N1: empty, padded, over-long, control characters or a double quote: a
        clear error or "nothing recorded", and no row anywhere."""
        svc.open_session(MAIN)
        before = rows(svc)
        calls = [
            lambda: svc.open_session(key),
            lambda: svc.record_child_spawned(key, parent=MAIN, run_id="r"),
            lambda: svc.record_goal_changed(key, summary="goal created"),
            lambda: svc.record_human_direct_message(key, channel="telegram"),
            lambda: svc.watch(MAIN, key),
        ]
        assert [refused(call) for call in calls] == [True] * len(calls)
        for tool, arguments in [
            ("session_status", {"sessionKey": key}),
            ("sessions_spawn", {"childSessionKey": key, "runId": "r"}),
            ("sessions_send", {"sessionKey": key, "message": "hi"}),
        ]:
            assert svc.tools.call(tool, arguments, caller=MAIN)["error"]["code"] in {
                "invalid_input",
                "unknown_session",
            }
        assert rows(svc) == before

    @pytest.mark.parametrize("key", ['agent:main:x"y', "agent:main:x\ny"], ids=repr)
    def test_a_bad_parent_or_watcher_key_is_refused_and_nothing_is_stored(
        self, svc: SessionAwareness, key: str
    ) -> None:
        """R-K1, R-N1: a parent or watcher key is a session key too."""
        svc.open_session(MAIN)
        before = rows(svc)
        calls = [
            lambda: svc.open_session("agent:main:subagent:c", parent=key),
            lambda: svc.record_child_spawned("agent:main:subagent:d", parent=key, run_id="r"),
            lambda: svc.watch(key, MAIN),
        ]
        assert [refused(call) for call in calls] == [True] * len(calls)
        assert rows(svc) == before


METACHARACTERS = "%_'\\;-*[]^$.|+?(){}/aAbB"
fragments = st.text(alphabet=METACHARACTERS, min_size=1, max_size=6)


class TestSqlMetacharacters:
    def test_keys_labels_and_search_are_stored_and_matched_literally(
        self, open_svc: ServiceFactory
    ) -> None:
        """R-T1: `search` is a case-insensitive substring of the key or label, whatever SQL
        would make of %, _, quotes or backslashes; keys and labels come back byte for byte."""
        svc = open_svc(visibility="all")
        created: dict[str, str] = {}

        @SETTINGS
        @given(suffix=fragments, label=fragments, search=fragments)
        def run(suffix: str, label: str, search: str) -> None:
            key = f"agent:main:{suffix}"
            svc.open_session(key, label=label)
            created.setdefault(key, label)  # a second open of the same key changes nothing
            listed = svc.tools.call("sessions_list", {"search": search}, caller=MAIN)["sessions"]
            got = {row["sessionKey"]: row["label"] for row in listed}
            wanted = {k: v for k, v in created.items() if search.lower() in f"{k}\n{v}".lower()}
            assert got == wanted

        run()


MODES = ["self", "tree", "agent"]
#: Who may see whom in the tool world (MAIN spawned WORKER, which spawned HELPER), per R-T2.
VISIBLE = {
    "self": lambda caller, key: key == caller,
    "tree": lambda caller, key: (
        key == caller or (caller, key) in {(MAIN, WORKER), (MAIN, HELPER), (WORKER, HELPER)}
    ),
    "agent": lambda caller, key: key.split(":")[1] == caller.split(":")[1],
}
GHOST = "agent:main:ghost"


def neutral(answer: dict[str, Any], key: str) -> str:
    return repr(answer).replace(key, "<key>")


class TestVisibility:
    @pytest.mark.parametrize("mode", MODES)
    def test_an_invisible_session_reads_exactly_like_an_unknown_one(
        self, open_svc: ServiceFactory, clock: FakeClock, mode: str
    ) -> None:
        """R-T2: for every caller and every session it may not see, each tool answers as it
        does for a key that names nothing."""
        svc = open_svc(visibility=mode, dispatcher=lambda sender, target, message: target)
        build_world(svc, clock)
        for caller in (MAIN, WORKER, HELPER, PEER, OPS):
            for key in (MAIN, WORKER, HELPER, PEER, OPS):
                if VISIBLE[mode](caller, key):
                    continue
                for tool, arguments in [
                    ("session_status", {"sessionKey": key, "changesSince": 0}),
                    ("sessions_send", {"sessionKey": key, "message": "hi", "watch": True}),
                    ("sessions_list", {"search": key}),
                ]:
                    seen = svc.tools.call(tool, arguments, caller=caller)
                    ghost = svc.tools.call(
                        tool, {**arguments, **_swap(arguments, key, GHOST)}, caller=caller
                    )
                    assert neutral(seen, key) == neutral(ghost, GHOST), (caller, tool, key)
            invisible_labels = [label for label, key in (("worker", WORKER), ("peer", PEER))
                                if not VISIBLE[mode](caller, key)]  # fmt: skip
            for label in invisible_labels:
                seen = svc.tools.call(
                    "sessions_send", {"label": label, "message": "hi"}, caller=caller
                )
                ghost = svc.tools.call(
                    "sessions_send", {"label": "nobody", "message": "hi"}, caller=caller
                )
                assert neutral(seen, label) == neutral(ghost, "nobody")

    def test_spawning_a_session_outside_your_view_reveals_nothing(
        self, open_svc: ServiceFactory, clock: FakeClock
    ) -> None:
        """R-T2: OPS cannot read MAIN's child's history, nor take it from MAIN's tree, by
        claiming to have spawned it."""
        svc = open_svc(dispatcher=lambda sender, target, message: target)
        build_world(svc, clock)
        svc.record_human_direct_message(WORKER, channel="private")  # 2
        svc.tools.call("sessions_spawn", {"childSessionKey": WORKER, "runId": "claim"}, caller=OPS)
        status = svc.tools.call(
            "session_status", {"sessionKey": WORKER, "changesSince": 0}, caller=OPS
        )
        history = status.get("stateChanges", {}).get("events", [])
        assert [e for e in history if e["sequence"] <= 2] == []
        children = svc.children([MAIN])[MAIN]
        assert WORKER in children


def _swap(arguments: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    return {k: new if v == old else v for k, v in arguments.items()}
