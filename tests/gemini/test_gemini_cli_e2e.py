"""Under the real Gemini CLI: the pinned `@google/gemini-cli` from the npm registry (installed
once into a cache directory), its model API a scripted fake on 127.0.0.1 (no network, no key),
configured only by `session-awareness install gemini-cli`, its sessions sharing one store with
each other and with a Claude Code session (R-A1).

Slow (`make test-slow`). Outside CI it skips when node or npm is missing; under CI (`CI` set)
it fails instead, so it never skips silently there (`tests/gemini/npm.py`).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from session_awareness.application import open_service
from tests.gemini.fake_api import FakeGeminiApi, call_reply, text_reply
from tests.gemini.npm import npm_cli
from tests.hooks.helpers import TIMEOUT, UserMachine, fixture, lead_key

pytestmark = pytest.mark.slow

VERSION = "0.61.0"
MODEL = "gemini-2.5-flash"  # named, so no routing request reaches the fake before the turn
RUN_TIMEOUT = 180
NOTICE = re.compile(r'Session "([^"]+)" changed \(other actor\)')


@pytest.fixture(scope="module")
def gemini() -> list[str]:
    """The command that runs the pinned Gemini CLI, installed from the npm registry into the
    cache directory the first time."""
    return npm_cli("@google/gemini-cli", VERSION, "bundle/gemini.js")


@dataclass
class World(UserMachine):
    """A user's machine with a trusted project, for Gemini CLI."""

    gemini: list[str]
    api: FakeGeminiApi
    runs: list[subprocess.CompletedProcess[str]] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return self.cli_env(("GEMINI", "GOOGLE"), GEMINI_API_KEY="fake",
                            GOOGLE_GEMINI_BASE_URL=self.api.url)  # fmt: skip

    def turn(self, prompt: str, *, resume: str | None = None, yolo: bool = False) -> str:
        """One non-interactive Gemini CLI turn in the project; its session's id (a new
        session's is the one its `SessionStart` hook opened in the store)."""
        before = self.gemini_sessions()
        args = [*self.gemini, "-m", MODEL, "-p", prompt]
        if resume is not None:
            args += ["--resume", resume]
        if yolo:
            args += ["--approval-mode", "yolo"]
        done = subprocess.run(args, cwd=self.project, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT, check=False, env=self.env())  # fmt: skip
        self.runs.append(done)
        assert done.returncode == 0, done.stderr[-3000:]
        if resume is not None:
            return resume
        [new] = self.gemini_sessions() - before
        return new

    def gemini_sessions(self) -> set[str]:
        with open_service(self.url) as svc:
            keys = [row.key for row in svc.session_rows()]
        return {key.rsplit(":", 1)[1] for key in keys if key.startswith("agent:gemini:gemini:")}

    def last_user_parts(self) -> list[str]:
        """The texts of the newest user content of the model's latest request."""
        contents = self.api.model_requests()[-1]["contents"]
        user = [c for c in contents if c.get("role") == "user"][-1]
        return [p["text"] for p in user["parts"] if "text" in p]


@pytest.fixture
def world(gemini: list[str], database_url: str, tmp_path: Path) -> Iterator[World]:
    with FakeGeminiApi() as api:
        world = World(tmp_path, database_url, gemini, api)
        world.project.mkdir()
        # The user's own choices, which no installer makes: the API key as the way to sign
        # in, and trust in the project folder (Gemini CLI ignores an untrusted project's
        # settings). No telemetry, no update check: nothing leaves 127.0.0.1.
        user = world.home / ".gemini"
        user.mkdir(parents=True)
        (user / "settings.json").write_text(json.dumps({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        }))  # fmt: skip
        (user / "trustedFolders.json").write_text(json.dumps({str(world.project): "TRUST_FOLDER"}))
        yield world


#: Gemini CLI's notice, once, the first time it meets a project's hooks (it then trusts them).
FIRST_SIGHT = """WARNING: The following project-level hooks have been detected in this workspace:
  - session-awareness

These hooks will be executed. If you did not configure these hooks or do not trust this project,
please review the project settings (.gemini/settings.json) and remove them."""


def warnings(stderr: str) -> list[str]:
    """What Gemini CLI said on stderr about its configuration, hooks or MCP servers."""
    words = ("settings", "hook", "mcp", "session-awareness", "invalid", "error")
    return [line for line in stderr.splitlines() if any(w in line.lower() for w in words)]


def test_a_human_turn_in_one_gemini_session_reaches_the_others_next_request_once(
    world: World,
) -> None:
    """Two Gemini CLI sessions and a Claude Code session on one store, set up by the
    installers alone: a human turn in worker B reaches lead A's next model request as exactly
    one notice (the fake API sees it in the request); A's turn after that carries none; the
    lead's `session_status` over MCP, called by the model under the real CLI, returns the exact
    delta for A as caller; and Gemini CLI says nothing about the installed settings (R-A1)."""
    for cli in ("gemini-cli", "claude-code"):
        done = world.install(cli)
        assert (done.returncode, done.stderr) == (0, ""), done.stderr

    lead = world.turn("Plan the v2 pricing rollout.")
    worker = world.turn("Write the v2 pricing migration.")
    assert lead != worker
    lead_key_, worker_key = f"agent:gemini:gemini:{lead}", f"agent:gemini:gemini:{worker}"
    claude = lead_key("claude-lead")
    claude_hook = json.loads((world.project / ".claude" / "settings.json").read_text())
    command = claude_hook["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    start = claude_hook["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    _claude_code(start, fixture("session_start", session_id="claude-lead"), world)
    with open_service(world.url) as svc:
        assert {row.key for row in svc.session_rows()} == {lead_key_, worker_key, claude}
        assert svc.watch(lead_key_, worker_key)
        assert svc.watch(claude, worker_key)

    world.turn("Stop the migration and write the rollback plan first.", resume=worker)
    world.turn("Carry on.", resume=lead)
    notices = [NOTICE.findall(text) for text in world.last_user_parts()]
    assert [n for n in notices if n] == [[worker_key]]  # one notice, in one part
    [context] = [t for t in world.last_user_parts() if NOTICE.search(t)]
    assert context.startswith("<hook_context>") and "changesSince 0." in context
    assert "rollback" not in json.dumps(_history(world.url, worker_key))

    world.turn("Anything new?", resume=lead)
    assert not any(NOTICE.search(text) for text in world.last_user_parts())

    # The Claude Code session hears of the same turn, once, in its own CLI's output.
    heard = _claude_code(command, fixture("user_prompt_submit", session_id="claude-lead"), world)
    assert NOTICE.findall(heard["hookSpecificOutput"]["additionalContext"]) == [worker_key]

    # The model calls session_status over MCP; the server's caller is the lead.
    def status_call(request: dict[str, Any]) -> dict[str, Any]:
        names = [f["name"] for t in request.get("tools", [])
                 for f in t.get("functionDeclarations", [])]  # fmt: skip
        [name] = [n for n in names if n.endswith("session_status")]
        return call_reply(name, {"sessionKey": worker_key, "changesSince": 0})

    world.api.script.extend([status_call, text_reply("Reconciled.")])
    world.turn("Check the worker.", resume=lead, yolo=True)
    results = [
        p["functionResponse"]
        for c in world.api.model_requests()[-1]["contents"]
        for p in c.get("parts", [])
        if "functionResponse" in p
    ]
    assert results, "the model's session_status call got no result"
    answer = json.dumps(results[-1])
    assert worker_key in answer and "human_direct_message" in answer and "gemini-cli" in answer
    assert '"error"' not in answer and "invalid_caller" not in answer

    first, *later = world.runs
    assert FIRST_SIGHT in first.stderr  # the hooks are named by the `name` install gives them
    assert warnings(first.stderr.replace(FIRST_SIGHT, "")) == [], first.stderr[-3000:]
    for run in later:
        assert warnings(run.stderr) == [], run.stderr[-3000:]
    assert not (world.state / "hook.log").exists()


def _claude_code(command: str, event: dict[str, Any], world: World) -> dict[str, Any]:
    """The installed Claude Code hook, run by a shell as Claude Code runs it."""
    ran = subprocess.run(["/bin/sh", "-c", command], input=json.dumps(event),
                         capture_output=True, text=True, timeout=TIMEOUT, check=False,
                         env=world.env())  # fmt: skip
    assert (ran.returncode, ran.stderr) == (0, "")
    return json.loads(ran.stdout) if ran.stdout else {}


def _history(url: str, key: str) -> dict[str, Any]:
    with open_service(url) as svc:
        return svc.session_status(key, changes_since=0)


def test_a_hook_that_can_never_record_warns_the_user_and_the_turn_goes_on(world: World) -> None:
    """The installed hooks' URL edited by hand into an in-memory store: under the real CLI
    the turn completes, the hooks succeed, and Gemini CLI prints the hook's one line (its
    JSON `systemMessage`) to the user; once the URL is mended, the next turn's hooks record
    what was kept first: both sessions are in the store (R-L9, R-A1, ADR 049)."""
    done = world.install("gemini-cli")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    settings = world.project / ".gemini" / "settings.json"
    good = settings.read_text()
    option = f"--database-url {shlex.quote(world.url)}"
    assert option in good
    settings.write_text(good.replace(option, "--database-url sqlite:///:memory:"))

    world.api.script.append(text_reply("Planned."))
    args = [*world.gemini, "-m", MODEL, "-p", "Plan the v2 pricing rollout."]
    ran = subprocess.run(args, cwd=world.project, capture_output=True, text=True,
                         timeout=RUN_TIMEOUT, check=False, env=world.env())  # fmt: skip
    assert (ran.returncode, ran.stdout.strip()) == (0, "Planned."), ran.stderr[-3000:]
    said = "session-awareness hook: cannot record into the store as given: an in-memory database"
    assert said in ran.stderr, ran.stderr[-3000:]
    assert f"Hook system message: {said}" in ran.stderr  # as the CLI names what hooks say
    assert "failed" not in ran.stderr, ran.stderr[-3000:]  # the hooks themselves succeeded
    assert world.gemini_sessions() == set()

    settings.write_text(good)
    world.api.script.append(text_reply("Carrying on."))
    ran = subprocess.run([*world.gemini, "-m", MODEL, "-p", "Carry on."], cwd=world.project,
                         capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False,
                         env=world.env())  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "session-awareness hook:" not in ran.stderr
    assert len(world.gemini_sessions()) == 2  # the kept session's, then the mended turn's
