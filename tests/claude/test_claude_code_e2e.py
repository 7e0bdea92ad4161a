"""Under the real Claude Code CLI: the pinned `@anthropic-ai/claude-code` from the npm registry
(installed once into a cache directory; its `bin/claude.exe` is the native executable), its
model API a scripted fake on 127.0.0.1 (no network, no key), configured only by
`session-awareness install claude-code --project`, its sessions sharing one store (R-A1).

Every turn is a non-interactive `claude -p` (a new session by `--session-id`, a later turn by
`--resume`), with `--output-format stream-json --include-hook-events`, which reports each
hook's exit code and output as Claude Code took them, and whether the MCP server connected.
Nothing leaves 127.0.0.1: the traffic switches are off, and any other host Claude Code would
reach goes through the fake as its proxy, which refuses and records it.

Slow (`make test-slow`). Outside CI it skips when node or npm is missing; under CI (`CI` set)
it fails instead, so it never skips silently there (`tests/gemini/npm.py`).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from session_awareness.application import open_service
from session_awareness.domain.watch import notice_text
from tests.claude.fake_api import FakeAnthropicApi, text_reply, tool_reply
from tests.gemini.npm import npm_cli, unavailable
from tests.hooks.helpers import TIMEOUT, UserMachine, lead_key

pytestmark = pytest.mark.slow

VERSION = "2.1.332"
RUN_TIMEOUT = 180
SERVER = "session-awareness"
#: How Claude Code names an MCP server's tool to the model: `mcp__<server>__<tool>`.
STATUS, WATCH = f"mcp__{SERVER}__session_status", f"mcp__{SERVER}__session_watch"
#: Claude Code's switches for the traffic a turn does not need (update checks, telemetry,
#: error reports, feedback), each documented in its environment variables.
QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
}
MISTAKE = "cannot record into the store as given: an in-memory database"


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command that runs the pinned Claude Code, installed from the npm registry into
    the cache directory the first time: the package's `bin`, a native executable that
    its install step put in place for this platform (so it runs without node)."""
    _, entry = npm_cli("@anthropic-ai/claude-code", VERSION, "bin/claude.exe")
    home = tmp_path_factory.mktemp("home")
    try:
        said = subprocess.run([entry, "--version"], capture_output=True, text=True,
                              timeout=TIMEOUT, check=False,
                              env={**QUIET, "PATH": os.environ["PATH"], "HOME": str(home)},
                              ).stdout  # fmt: skip
    except OSError as error:
        said = str(error)
    if not said.startswith(f"{VERSION} (Claude Code)"):
        unavailable(f"Claude Code's native executable does not run here: {said.strip()!r}")
    return [entry]


@dataclass
class Turn:
    """One `claude -p` run: its exit, stderr, and the stream-json messages it printed."""

    run: subprocess.CompletedProcess[str]
    messages: list[dict[str, Any]]

    @property
    def result(self) -> str:
        [done] = [m for m in self.messages if m.get("type") == "result"]
        assert done["subtype"] == "success", done
        return str(done["result"])

    def hooks(self) -> list[dict[str, Any]]:
        """Claude Code's report of each hook run: event, exit code, outcome, output."""
        return [m for m in self.messages if m.get("subtype") == "hook_response"]

    def mcp_servers(self) -> dict[str, str]:
        [init] = [m for m in self.messages if m.get("subtype") == "init"]
        return {s["name"]: s["status"] for s in init.get("mcp_servers", [])}


@dataclass
class World(UserMachine):
    """A user's machine, for Claude Code."""

    claude: list[str]
    api: FakeAnthropicApi
    turns: list[Turn] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in self.cli_env(("ANTHROPIC",), **QUIET).items()
               if "proxy" not in k.lower()}  # fmt: skip
        env.update(ANTHROPIC_API_KEY="fake", ANTHROPIC_BASE_URL=self.api.url,
                   HTTPS_PROXY=self.api.url, HTTP_PROXY=self.api.url,
                   NO_PROXY="127.0.0.1")  # fmt: skip
        return env

    def install(self, cli: str = "claude-code") -> subprocess.CompletedProcess[str]:
        return super().install(cli)

    def turn(self, prompt: str, session: str, *, resume: bool, allow: tuple[str, ...] = ()) -> Turn:
        """One non-interactive Claude Code turn in the project, in session `session` (a new
        one unless `resume`), the tools in `allow` permitted without asking."""
        args = [*self.claude, "-p", prompt, "--resume" if resume else "--session-id", session,
                "--output-format", "stream-json", "--verbose", "--include-hook-events"]  # fmt: skip
        if allow:
            args += ["--allowedTools", ",".join(allow)]
        done = subprocess.run(args, cwd=self.project, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT, check=False, env=self.env())  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        turn = Turn(done, [json.loads(line) for line in done.stdout.splitlines() if line])
        self.turns.append(turn)
        return turn

    def claude_sessions(self) -> set[str]:
        with open_service(self.url) as svc:
            keys = [row.key for row in svc.session_rows()]
        return {key.rsplit(":", 1)[1] for key in keys if key.startswith("agent:claude:claude:")}


@pytest.fixture
def world(claude: list[str], database_url: str, tmp_path: Path) -> Iterator[World]:
    with FakeAnthropicApi() as api:
        world = World(tmp_path, database_url, claude, api)
        world.project.mkdir()
        # The user's own choice, which no installer makes: the project's MCP servers approved
        # (Claude Code asks once before it starts a server from a project's `.mcp.json`).
        user = world.home / ".claude"
        user.mkdir(parents=True)
        (user / "settings.json").write_text(json.dumps({"enableAllProjectMcpServers": True}))
        yield world
        left = [(method, path) for method, path in api.other_requests() if method == "CONNECT"]
        assert left == [], "Claude Code reached for another host"


def texts(message: dict[str, Any]) -> list[str]:
    """The texts in a message of a model request: its content, its text blocks, and the text
    of its tool results."""
    content = message["content"]
    if isinstance(content, str):
        return [content]
    found: list[str] = []
    for block in content:
        if block.get("type") == "text":
            found.append(block["text"])
        elif block.get("type") == "tool_result":
            inner = block.get("content") or []
            if isinstance(inner, str):
                found.append(inner)
            else:
                found += [b["text"] for b in inner if b.get("type") == "text"]
    return found


def this_turn(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages a model request adds to the conversation so far: those after the last
    answer of the model (the prompt, and what Claude Code and its hooks put beside it)."""
    messages: list[dict[str, Any]] = request["messages"]
    answered = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    return messages[answered[-1] + 1 :] if answered else messages


def notices(messages: list[dict[str, Any]], key: str) -> int:
    """How many times the notice for `key` (as the hook hands it over) is in `messages`."""
    notice = notice_text(key, 0)
    return sum(text.count(notice) for m in messages for text in texts(m))


def tool_results(request: dict[str, Any]) -> list[Any]:
    """The JSON answers of the tool results in a model request's last message."""
    last = request["messages"][-1]
    return [json.loads(text) for text in texts(last)]


def test_a_human_turn_in_a_claude_code_worker_reaches_the_leads_next_request_once(
    world: World,
) -> None:
    """A lead and a worker Claude Code session on one store, set up by the installer alone:
    the lead's model watches the worker over MCP; a human prompt in the worker reaches the
    lead's next model request as exactly one notice (R-L6, R-N1), which Claude Code adds as
    the `UserPromptSubmit` hook's context; the lead's following request carries none (R-N3,
    R-N8); the model's `session_status` over MCP returns the exact delta for the lead as
    caller (R-S1); every hook's output is taken by Claude Code with no error (R-A1)."""
    done = world.install()
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    lead, worker = str(uuid.uuid4()), str(uuid.uuid4())
    lead_key_, worker_key = lead_key(lead), lead_key(worker)

    world.turn("Write the v2 pricing migration.", worker, resume=False)
    world.api.script.extend([tool_reply(WATCH, {"sessionKey": worker_key}), text_reply("On it.")])
    watching = world.turn("Watch the worker.", lead, resume=False, allow=(WATCH,))
    assert watching.result == "On it."
    [answer] = tool_results(world.api.model_requests()[-1])
    assert "error" not in answer, answer
    assert world.claude_sessions() == {lead, worker}

    world.turn("Stop the migration and write the rollback plan first.", worker, resume=True)
    world.turn("Carry on.", lead, resume=True)
    told = world.api.model_requests()[-1]
    assert notices(this_turn(told), worker_key) == 1
    assert notices(told["messages"], worker_key) == 1

    world.turn("Anything new?", lead, resume=True)
    after = world.api.model_requests()[-1]
    assert notices(this_turn(after), worker_key) == 0
    assert notices(after["messages"], worker_key) == 1  # the earlier turn's, in the history

    # The model reconciles over MCP: the worker's delta, and its own session as the caller.
    world.api.script.extend([
        tool_reply(STATUS, {"sessionKey": worker_key, "changesSince": 0}),
        tool_reply(STATUS, {"sessionKey": "current"}),
        text_reply("Reconciled."),
    ])  # fmt: skip
    checked = world.turn("Check the worker.", lead, resume=True, allow=(STATUS,))
    assert checked.result == "Reconciled."
    *_, first, second, last = world.api.model_requests()
    assert notices(this_turn(first), worker_key) == 0
    [delta], [own] = tool_results(second), tool_results(last)
    with open_service(world.url) as svc:
        expected = svc.session_status(worker_key, changes_since=0)
    assert delta == expected
    events = delta["stateChanges"]["events"]
    assert [(e["kind"], e["payload"]) for e in events] == [
        ("human_direct_message", {"channel": "claude-code"})
    ]
    assert own["sessionKey"] == lead_key_ and "error" not in own
    assert "rollback" not in json.dumps(delta)

    for turn in world.turns:
        assert turn.mcp_servers() == {SERVER: "connected"}, turn.mcp_servers()
        ran = [(h["hook_event"], h["exit_code"], h["outcome"], h["stderr"]) for h in turn.hooks()]
        assert {event for event, *_ in ran} == {"SessionStart", "UserPromptSubmit"}, ran
        assert all(tuple(rest) == (0, "success", "") for _, *rest in ran), ran
        assert turn.run.stderr == ""


def test_a_hook_that_can_never_record_is_reported_and_the_turn_goes_on(world: World) -> None:
    """The installed hooks' URL edited by hand into an in-memory store: under the real CLI
    the turn completes, the hooks succeed, and Claude Code tells the user the hook's one line
    (its JSON `systemMessage`; under `claude -p`, a prompt's, as an informational message);
    once the URL is mended, the next turn's hooks record what was kept first: both sessions
    are in the store (R-L9, R-A1, ADR 049)."""
    done = world.install()
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    settings = world.project / ".claude" / "settings.json"
    good = settings.read_text()
    option = f"--database-url {shlex.quote(world.url)}"
    assert option in good
    settings.write_text(good.replace(option, "--database-url sqlite:///:memory:"))

    world.api.script.append(text_reply("Planned."))
    broken = world.turn("Plan the v2 pricing rollout.", str(uuid.uuid4()), resume=False)
    assert broken.result == "Planned."
    reported = [(h["hook_event"], h["exit_code"], h["outcome"]) for h in broken.hooks()]
    assert reported == [("SessionStart", 0, "success"), ("UserPromptSubmit", 0, "success")]
    for hook in broken.hooks():
        [line] = hook["stderr"].splitlines()
        assert line.startswith("session-awareness hook: ") and MISTAKE in line, line
        assert line.endswith("signal kept"), line
        assert json.loads(hook["stdout"]) == {"systemMessage": line}
    told = [m["content"] for m in broken.messages if m.get("subtype") == "informational"]
    assert told == [f"UserPromptSubmit says: {line}"], told
    assert world.claude_sessions() == set()

    settings.write_text(good)
    world.api.script.append(text_reply("Carrying on."))
    mended = world.turn("Carry on.", str(uuid.uuid4()), resume=False)
    assert mended.result == "Carrying on."
    assert [(h["exit_code"], h["stderr"]) for h in mended.hooks()] == [(0, "")] * 2
    assert len(world.claude_sessions()) == 2  # the kept session's, then the mended turn's


def test_an_outage_is_told_at_a_sessions_first_prompt_and_not_again(world: World) -> None:
    """The store out of reach of the hooks (their URL edited to a closed port): the session's
    first prompt tells the user that no notice reaches it until the store is back, as an
    informational message; its next prompt in the same outage does not; once the store is
    back, the next turn records what was kept (R-L9, R-L10, ADR 050)."""
    done = world.install()
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    settings = world.project / ".claude" / "settings.json"
    good = settings.read_text()
    option = f"--database-url {shlex.quote(world.url)}"
    down = "'postgresql://nobody@127.0.0.1:1/none?connect_timeout=1'"
    settings.write_text(good.replace(option, f"--database-url {down}"))
    session, supervisor = str(uuid.uuid4()), lead_key("supervisor")
    with open_service(world.url) as svc:  # watched, so each human prompt is recorded (R-L6)
        svc.open_session(lead_key(session))
        svc.open_session(supervisor)
        assert svc.watch(supervisor, lead_key(session))

    def told(turn: Turn) -> list[str]:
        return [m["content"] for m in turn.messages if m.get("subtype") == "informational"]

    world.api.script.extend([text_reply("Planned."), text_reply("Still planning.")])
    first = world.turn("Plan the v2 pricing rollout.", session, resume=False)
    [line] = told(first)
    assert line.startswith("UserPromptSubmit says: session-awareness hook: store unavailable, ")
    assert line.endswith("(no notice reaches this session until it is back)"), line
    assert told(world.turn("Go on.", session, resume=True)) == []
    assert all(h["exit_code"] == 0 for t in world.turns for h in t.hooks())

    settings.write_text(good)
    world.api.script.append(text_reply("Back."))
    world.turn("And now?", session, resume=True)
    with open_service(world.url) as svc:
        events = svc.session_status(lead_key(session), changes_since=0)["stateChanges"]["events"]
    assert [e["kind"] for e in events] == ["human_direct_message"] * 3  # the 2 kept, then this


#: The model's call of Claude Code's `Agent` tool: a sub-agent, which this CLI runs in the
#: background and reports back to the session in a turn of its own when it is done.
DELEGATE = tool_reply(
    "Agent",
    {"description": "Survey the code", "prompt": "List the files.",
     "subagent_type": "general-purpose"},
)  # fmt: skip


def delegate(world: World, session: str) -> Turn:
    """A turn of `session` in which the model starts a sub-agent; `claude -p` ends once the
    sub-agent is done and its report has had its own model turn."""
    world.api.script.extend([DELEGATE, text_reply("Delegated."), text_reply("Surveyed.")])
    return world.turn("Survey the code with a sub-agent.", session, resume=True, allow=("Agent",))


def test_a_sub_agent_is_a_child_session_its_lead_watches(world: World) -> None:
    """The model starts a sub-agent under the real CLI: Claude Code's `SubagentStart` and
    `SubagentStop` hooks record it as the lead's child session `…:subagent:<agent_id>`, its
    run spawned and then completed, with no hook error (R-W1, R-A1)."""
    done = world.install()
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    lead = str(uuid.uuid4())
    world.turn("Plan the v2 pricing rollout.", lead, resume=False)
    ran = delegate(world, lead)

    hooks = [(h["hook_event"], h["exit_code"], h["stderr"]) for h in ran.hooks()]
    assert {event for event, *_ in hooks} >= {"SubagentStart", "SubagentStop"}, hooks
    assert all((code, stderr) == (0, "") for _, code, stderr in hooks), hooks
    with open_service(world.url) as svc:
        [child] = [row for row in svc.session_rows() if row.parent_key == lead_key(lead)]
        events = svc.session_status(child.key, changes_since=0)["stateChanges"]["events"]
    assert child.key == f"{lead_key(lead)}:subagent:{child.run_id}"
    assert (child.kind, child.run_status) == ("subagent", "completed")
    assert [e["kind"] for e in events] == ["child_spawned", "run_completed"]


def test_a_sub_agents_report_is_no_human_turn(world: World) -> None:
    """A watched session whose model starts a sub-agent: the one human prompt is one
    `human_direct_message`; the sub-agent's report, which Claude Code hands the session as a
    prompt of its own (`UserPromptSubmit` with a `<task-notification>` prompt), is no human
    turn (R-L6)."""
    done = world.install()
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    lead, supervisor = str(uuid.uuid4()), lead_key("supervisor")
    world.turn("Plan the v2 pricing rollout.", lead, resume=False)
    with open_service(world.url) as svc:
        svc.open_session(supervisor)
        assert svc.watch(supervisor, lead_key(lead))

    delegate(world, lead)
    with open_service(world.url) as svc:
        events = svc.session_status(lead_key(lead), changes_since=0)["stateChanges"]["events"]
    assert [e["kind"] for e in events] == ["human_direct_message"]


def test_clear_resets_the_session_it_replaced(world: World) -> None:
    """`/clear` under the real CLI gives the process a new session: its `SessionStart` hook
    (source `clear`) opens the new one and resets the one it replaced, whose watches go, so
    a human turn in the session it watched is no longer recorded for it (R-W6, R-L6)."""
    done = world.install()
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    lead, worker = str(uuid.uuid4()), "agent:claude:worker"
    world.turn("Plan the v2 pricing rollout.", lead, resume=False)
    with open_service(world.url) as svc:
        svc.open_session(worker)
        assert svc.watch(lead_key(lead), worker)

    cleared = world.turn("/clear", lead, resume=True)
    hooks = [(h["hook_name"], h["exit_code"], h["stderr"]) for h in cleared.hooks()]
    assert ("SessionStart:clear", 0, "") in hooks, hooks
    [fresh] = world.claude_sessions() - {lead}
    with open_service(world.url) as svc:
        assert svc.record_human_direct_message(worker, channel="terminal") is None
        assert svc.pending_notices(lead_key(lead)) == []
        assert svc.pending_notices(lead_key(fresh)) == []
