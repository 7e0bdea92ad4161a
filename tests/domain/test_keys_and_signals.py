"""Session keys, identities, signal kinds, summaries and payloads (R-K1–R-K3, R-L1 to R-L3)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest

from session_awareness.domain.keys import (
    InvalidKeyError,
    SessionRef,
    agent_of,
    is_agent_qualified,
    is_subagent,
    is_thread_scoped,
    watch_id,
)
from session_awareness.domain.signals import (
    CHILD_SPAWNED_SUMMARY,
    COMPACTED_SUMMARY,
    FAILED_RUN_SUMMARIES,
    RUN_COMPLETED_SUMMARY,
    InvalidSignalError,
    Payload,
    RunOutcome,
    SignalKind,
    adopted_summary,
    check_turns,
    goal_summary,
    human_message_summary,
    normalise_channel,
    one_line,
    upstream_missing_summary,
)
from session_awareness.testing.read_models import payload_from_dict

BARE_KEYS = ["global", "main", "agent:main", "agent::main", "agent:main:", "Agent:main:main"]


class TestAgentOf:
    @pytest.mark.parametrize(
        ("key", "agent"),
        [
            ("agent:main:main", "main"),
            ("agent:main:subagent:child", "main"),
            ("agent:ops:telegram:group:42", "ops"),
        ],
    )
    def test_a_qualified_key_names_its_agent_in_the_second_segment(
        self, key: str, agent: str
    ) -> None:
        """R-K1: the agent id of `agent:<agentId>:<rest>` is its second segment."""
        assert agent_of(key) == agent

    @pytest.mark.parametrize("key", BARE_KEYS)
    def test_a_bare_or_incomplete_key_names_no_agent(self, key: str) -> None:
        """R-K1: a key without `agent:<agentId>:<rest>` does not name its agent."""
        assert agent_of(key) is None


class TestIsAgentQualified:
    def test_a_key_naming_its_agent_is_agent_qualified(self) -> None:
        """R-K1: `agent:main:main` names its agent, so it may hold a cursor (R-W3)."""
        assert is_agent_qualified("agent:main:main")

    @pytest.mark.parametrize("key", BARE_KEYS)
    def test_a_bare_key_is_not_agent_qualified(self, key: str) -> None:
        """R-K1: a bare key such as `global` is not agent-qualified, so it never watches (R-W3)."""
        assert not is_agent_qualified(key)


class TestIsSubagent:
    @pytest.mark.parametrize("key", ["agent:main:subagent:child", "agent:ops:subagent:a:b"])
    def test_a_key_with_a_subagent_segment_is_a_subagent(self, key: str) -> None:
        """R-K2: a key containing a `:subagent:` segment is a sub-agent session."""
        assert is_subagent(key)

    @pytest.mark.parametrize(
        "key",
        ["agent:main:main", "agent:main:subagents:x", "subagent:child", "agent:main:subagent"],
    )
    def test_a_key_without_a_subagent_segment_is_not_a_subagent(self, key: str) -> None:
        """R-K2: only a whole `:subagent:` segment makes a sub-agent session."""
        assert not is_subagent(key)


class TestIsThreadScoped:
    @pytest.mark.parametrize("key", ["agent:main:main:thread:42", "agent:main:thread:t-1"])
    def test_a_key_ending_in_a_thread_id_is_thread_scoped(self, key: str) -> None:
        """R-K2: a key ending in `:thread:<id>` is thread-scoped."""
        assert is_thread_scoped(key)

    @pytest.mark.parametrize(
        "key",
        ["agent:main:main", "agent:main:thread:42:reply", "agent:main:main:thread:", "thread:42"],
    )
    def test_a_key_not_ending_in_a_thread_id_is_not_thread_scoped(self, key: str) -> None:
        """R-K2: a `:thread:` segment that is not followed by a final id is not thread-scoped."""
        assert not is_thread_scoped(key)


class TestSessionRef:
    def test_a_bare_key_belongs_to_the_agent_it_was_opened_for(self) -> None:
        """R-K1: a bare key belongs to the agent it was opened for."""
        assert SessionRef.of("global", "ops") == SessionRef("ops", "global")

    def test_a_bare_key_without_an_agent_belongs_to_the_default_agent(self) -> None:
        """R-K1: a bare key opened without an agent id belongs to the default agent `main`."""
        assert SessionRef.of("global") == SessionRef("main", "global")

    def test_a_qualified_key_belongs_to_its_own_agent(self) -> None:
        """R-K1: an agent-qualified key's agent is the one it names."""
        assert SessionRef.of("agent:ops:main") == SessionRef("ops", "agent:ops:main")

    def test_a_qualified_key_under_another_agent_is_refused(self) -> None:
        """R-K1: `agent:ops:main` cannot belong to agent `main`."""
        with pytest.raises(InvalidKeyError, match="belongs to agent 'ops'"):
            SessionRef("main", "agent:ops:main")

    @pytest.mark.parametrize("key", ["", " global", "global ", "a\nb", "a\tb", "k" * 513])
    def test_a_key_that_cannot_name_a_session_is_refused(self, key: str) -> None:
        """R-K1: empty, padded, multi-line and overlong keys name no session."""
        with pytest.raises(InvalidKeyError, match="invalid session key"):
            SessionRef.of(key, "main")

    @pytest.mark.parametrize("agent_id", ["", " ops", "ops ", "a:b"])
    def test_an_agent_id_that_cannot_name_an_agent_is_refused(self, agent_id: str) -> None:
        """R-K1: an agent id is non-empty, unpadded and has no `:`."""
        with pytest.raises(InvalidKeyError, match="invalid agent id"):
            SessionRef(agent_id, "global")

    def test_the_same_ref_always_names_the_same_session(self) -> None:
        """R-K1: the session id is derived from (agentId, sessionKey) alone, deterministically."""
        first = SessionRef.of("agent:main:main").session_id
        second = SessionRef("main", "agent:main:main").session_id

        assert first == second

    def test_the_session_id_of_a_ref_never_changes(self) -> None:
        """R-R2: a stored stream stays reachable, so a ref's session id is a fixed value."""
        session_id = SessionRef.of("agent:main:main").session_id

        assert session_id == UUID("c46e200f-6048-539c-b2d4-f12782312375")

    def test_the_same_bare_key_under_two_agents_names_two_sessions(self) -> None:
        """R-K1: the same bare key may exist under several agents, each a session of its own."""
        assert SessionRef("main", "global").session_id != SessionRef("ops", "global").session_id


class TestWatchId:
    def test_the_same_pair_always_names_the_same_cursor(self) -> None:
        """R-W1: the cursor id is derived from (watcher, target), so seeding it is idempotent."""
        target = SessionRef.of("agent:main:subagent:child").session_id

        assert watch_id("agent:main:main", target) == watch_id("agent:main:main", target)

    def test_two_watchers_of_one_target_have_two_cursors(self) -> None:
        """R-W4: every cursor holder on a target has a cursor of its own."""
        target = SessionRef.of("agent:main:subagent:child").session_id

        assert watch_id("agent:main:main", target) != watch_id("agent:main:peer", target)

    def test_the_cursor_id_of_a_pair_never_changes(self) -> None:
        """R-R2: a stored cursor stays reachable, so a pair's cursor id is a fixed value."""
        target = SessionRef.of("agent:main:subagent:child").session_id

        assert watch_id("agent:main:main", target) == UUID("03565d08-b169-56ce-bdd6-8ae92445c10f")

    def test_a_watcher_has_one_cursor_per_target(self) -> None:
        """R-W2: a watcher's cursors on two targets are two pairs."""
        one = SessionRef("main", "global").session_id
        other = SessionRef("ops", "global").session_id

        assert watch_id("agent:main:main", one) != watch_id("agent:main:main", other)


class TestSignalKind:
    @pytest.mark.parametrize(
        "kind",
        [SignalKind.HUMAN_DIRECT_MESSAGE, SignalKind.UPSTREAM_MISSING, SignalKind.GOAL_CHANGED],
    )
    def test_a_notifying_kind_notifies_watchers(self, kind: SignalKind) -> None:
        """R-L1: human messages, upstream loss and goal changes notify the target's watchers."""
        assert kind.notifies

    @pytest.mark.parametrize(
        "kind",
        [
            SignalKind.CHILD_SPAWNED,
            SignalKind.RUN_COMPLETED,
            SignalKind.RUN_FAILED,
            SignalKind.COMPACTED,
            SignalKind.ADOPTED,
        ],
    )
    def test_a_log_only_kind_notifies_no_one(self, kind: SignalKind) -> None:
        """R-L1: spawns, run ends, compactions and adoptions are logged without a notice."""
        assert not kind.notifies


class TestOneLine:
    def test_newlines_and_runs_of_whitespace_collapse_to_one_space(self) -> None:
        """R-L2: a summary is a single line; newlines are collapsed."""
        assert one_line("  goal\r\nupdated \n\t now ") == "goal updated now"

    def test_text_longer_than_the_limit_is_refused(self) -> None:
        """R-L2: a summary's length is bounded."""
        with pytest.raises(InvalidSignalError, match="longer than 10"):
            one_line("x" * 11, limit=10)

    def test_text_at_the_limit_is_kept(self) -> None:
        """R-L2: text exactly at the bound is accepted unchanged."""
        assert one_line("x" * 10, limit=10) == "x" * 10

    def test_a_value_that_is_not_text_is_refused(self) -> None:
        """R-L2: only text can become a summary."""
        value: Any = 42
        with pytest.raises(InvalidSignalError, match="expected text"):
            one_line(value)


class TestNormaliseChannel:
    @pytest.mark.parametrize("channel", [None, "", "   ", "\n\t"])
    def test_a_blank_channel_is_unknown(self, channel: str | None) -> None:
        """R-L3: a blank or missing channel is `unknown`."""
        assert normalise_channel(channel) == "unknown"

    def test_a_channel_is_kept_on_one_line(self) -> None:
        """R-L2: a channel name is collapsed onto one line."""
        assert normalise_channel("  tele\ngram ") == "tele gram"


class TestSummaries:
    def test_a_human_message_summary_names_its_channel(self) -> None:
        """R-L3: a human message reads `human message via <channel>`."""
        assert human_message_summary("telegram") == "human message via telegram"

    def test_a_human_message_summary_of_a_blank_channel_reads_unknown(self) -> None:
        """R-L3: a human message on a blank channel reads `human message via unknown`."""
        assert human_message_summary("") == "human message via unknown"

    def test_run_spawn_and_compaction_summaries_are_fixed(self) -> None:
        """R-L3: spawn, run-end and compaction summaries are the rules' fixed lines."""
        assert CHILD_SPAWNED_SUMMARY == "child session spawned"
        assert RUN_COMPLETED_SUMMARY == "child run completed"
        assert FAILED_RUN_SUMMARIES == {
            RunOutcome.ERROR: "child run failed",
            RunOutcome.TIMEOUT: "child run timed out",
            RunOutcome.CANCELLED: "child run cancelled",
        }
        assert COMPACTED_SUMMARY == "session compacted"

    def test_adoption_and_upstream_loss_summaries_name_the_catalog(self) -> None:
        """R-L3: `adopted from <catalogId>` and `upstream missing via <catalogId>`."""
        assert adopted_summary("claude-code") == "adopted from claude-code"
        assert upstream_missing_summary("claude-code") == "upstream missing via claude-code"


class TestGoalSummary:
    @pytest.mark.parametrize(
        "summary",
        [
            "goal created",
            "goal updated",
            "goal objective changed",
            "goal cleared",
            "goal status changed to done",
            "goal status changed to in_progress",
            "goal status changed to on-hold 2",
        ],
    )
    def test_a_fixed_goal_summary_is_accepted(self, summary: str) -> None:
        """R-L3: goal summaries are the fixed lines, the status one with a short status word."""
        assert goal_summary(summary) == summary

    def test_a_goal_summary_split_over_lines_is_collapsed(self) -> None:
        """R-L2: a newline inside a fixed goal summary is collapsed, not kept."""
        assert goal_summary("goal\nupdated") == "goal updated"

    @pytest.mark.parametrize(
        "summary",
        [
            "Refactor the parser before Friday",
            "goal updated: ship the parser",
            "Goal Created",
            "goal status changed to",
            "goal status changed to <b>done</b>",
            "goal status changed to " + "x" * 41,
        ],
    )
    def test_free_text_is_refused(self, summary: str) -> None:
        """R-L3: a goal summary carries no goal text, only one of the fixed lines."""
        with pytest.raises(InvalidSignalError, match="goal summary must be one of"):
            goal_summary(summary)


class TestPayload:
    @pytest.mark.parametrize("turns", [1, 0, -2, True, "3", 2.5])
    def test_turns_that_are_not_an_integer_above_1_are_refused(self, turns: Any) -> None:
        """R-L2: `payload.turns` is an integer greater than 1."""
        with pytest.raises(InvalidSignalError, match="turns"):
            Payload(turns=turns)

    def test_an_ok_outcome_is_refused(self) -> None:
        """R-L2: `payload.outcome` is error, timeout or cancelled; ok is a run_completed."""
        with pytest.raises(InvalidSignalError, match="outcome"):
            Payload(outcome=RunOutcome.OK)

    def test_as_dict_omits_absent_keys(self) -> None:
        """R-S2: a payload's JSON form carries only the keys present."""
        assert Payload(channel="telegram").as_dict() == {"channel": "telegram"}

    def test_as_dict_of_a_full_payload_has_its_three_keys(self) -> None:
        """R-L2: a payload is restricted to outcome, channel and turns."""
        payload = Payload(outcome=RunOutcome.ERROR, channel="slack", turns=2)

        assert payload.as_dict() == {"outcome": "error", "channel": "slack", "turns": 2}

    def test_an_empty_payload_has_no_json_form(self) -> None:
        """R-L2: the payload is optional; an empty one is stored as none."""
        assert Payload().as_dict() is None

    def test_from_dict_reads_back_the_json_form(self) -> None:
        """R-L2: a stored payload reads back as the payload that was stored."""
        payload = Payload(outcome=RunOutcome.CANCELLED, turns=4)

        assert payload_from_dict(payload.as_dict()) == payload

    def test_from_dict_of_nothing_is_an_empty_payload(self) -> None:
        """R-L2: a signal stored without a payload reads back as an empty one."""
        assert payload_from_dict(None) == Payload()

    def test_from_dict_refuses_unknown_keys(self) -> None:
        """R-L2: unknown payload keys are refused, so no message content rides along."""
        with pytest.raises(InvalidSignalError, match="unknown payload keys: message, text"):
            payload_from_dict({"channel": "telegram", "text": "hi", "message": "hello"})

    def test_from_dict_refuses_an_ok_outcome(self) -> None:
        """R-L2: a stored `outcome: ok` is refused like a constructed one."""
        with pytest.raises(InvalidSignalError, match="outcome"):
            payload_from_dict({"outcome": "ok"})


class TestCheckTurns:
    @pytest.mark.parametrize(("turns", "kept"), [(None, None), (1, None), (2, 2), (7, 7)])
    def test_only_more_than_one_turn_is_worth_recording(
        self, turns: int | None, kept: int | None
    ) -> None:
        """R-U3: `payload.turns` is recorded when > 1; a single turn is omitted."""
        assert check_turns(turns) == kept

    @pytest.mark.parametrize("turns", [0, -1, True, "2", 2.0])
    def test_turns_that_are_not_a_positive_integer_are_refused(self, turns: object) -> None:
        """R-L2: a producer's turns count is a positive integer."""
        with pytest.raises(InvalidSignalError, match="positive integer"):
            check_turns(turns)
