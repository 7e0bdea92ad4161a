"""A prompt's hook that records in-process hands its notices over, then acknowledges them
(R-N8): read, printed, acknowledged once printed, so a hook killed before its output is out
leaves them pending for the next prompt. Run as Claude Code runs it, on both backends."""

from __future__ import annotations

import io
import json
from pathlib import Path

from session_awareness.application import open_service
from session_awareness.infrastructure import claude_hooks
from session_awareness.infrastructure.claude_state import ClaudeState
from tests.hooks.helpers import (
    StalledHook,
    fixture,
    lead_key,
    run_hook,
    seed_notices,
    watched_targets,
)

LEAD = "lead-1"


def context_lines(done_context: str | None) -> list[str]:
    return [] if done_context is None else done_context.split("\n")


class TestInProcessHandOver:
    def test_a_hook_killed_while_printing_leaves_its_notices_for_the_next_prompt(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """R-N8, R-N4: the hook is killed while its notices are being printed (Claude Code
        ignores a killed hook's output); nothing was acknowledged, so the next prompt shows
        every one of them, and the one after shows none (told once)."""
        state = tmp_path / "state"
        expected = seed_notices(database_url, lead_key(LEAD), watched_targets())
        prompt = fixture("user_prompt_submit", session_id=LEAD)

        StalledHook(prompt, url=database_url, state_dir=state).kill_while_printing()

        with open_service(database_url) as svc:
            assert svc.pending_notices(lead_key(LEAD)) == expected
        done = run_hook(prompt, url=database_url, state_dir=state)
        assert (done.returncode, done.stderr) == (0, "")
        assert context_lines(done.context) == expected
        assert run_hook(prompt, url=database_url, state_dir=state).context is None

    def test_a_hook_that_printed_has_acknowledged_when_it_exits(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """R-N8, R-N3: in the normal path the notices are printed once and acknowledged
        before the hook exits: nothing is pending after it, and no notice repeats."""
        state = tmp_path / "state"
        expected = seed_notices(database_url, lead_key(LEAD), watched_targets(3))
        prompt = fixture("user_prompt_submit", session_id=LEAD)

        done = run_hook(prompt, url=database_url, state_dir=state)

        assert context_lines(done.context) == expected
        with open_service(database_url) as svc:
            assert svc.pending_notices(lead_key(LEAD)) == []
        assert run_hook(prompt, url=database_url, state_dir=state).context is None

    def test_notices_the_output_refused_are_not_acknowledged(
        self, database_url: str, tmp_path: Path
    ) -> None:
        """R-N8: the hook's entry point, recording in-process, cannot write its output (Claude
        Code closed the pipe): nothing was shown, so nothing is acknowledged, and the hook
        still exits 0 (R-A1)."""
        state = tmp_path / "state"
        expected = seed_notices(database_url, lead_key(LEAD), watched_targets(2))
        refused = io.StringIO()
        refused.close()
        errors = io.StringIO()

        code = claude_hooks.run(
            io.StringIO(json.dumps(fixture("user_prompt_submit", session_id=LEAD))),
            refused,
            errors,
            agent="claude",
            database_url=database_url,
            state=ClaudeState(state),
        )

        assert (code, errors.getvalue()) == (0, "")
        with open_service(database_url) as svc:
            assert svc.pending_notices(lead_key(LEAD)) == expected
