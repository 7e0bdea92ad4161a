"""`session-awareness hook claude-code | gemini-cli`: one agent CLI's hook event in, signals
recorded. One mapping serves both CLIs: their hooks have the same shape (JSON on stdin with
`session_id`, `transcript_path`, `cwd`, `hook_event_name`), and each CLI's events are mapped
onto the signal events below, which are named as Claude Code names them (`AgentCli.events`).

The session of a CLI session is `agent:<agent>:<cli>:<session_id>`, `<cli>` being `claude`
(Claude Code) or `gemini` (Gemini CLI), so sessions of both CLIs share one store and watch
each other; a Claude Code sub-agent's is that key plus `:subagent:<agent_id>`.

- `SessionStart`: the session is opened; `clear` resets the session it replaced (R-W6),
  `compact` (Claude Code) records `compacted`.
- A human prompt (Claude Code's `UserPromptSubmit`, Gemini CLI's `BeforeAgent`): a
  `human_direct_message` via the CLI's channel (`claude-code`, `gemini-cli`; R-L6); then the
  session's pending notices are handed over into the prompt as `additionalContext`: read,
  printed, and acknowledged only once printed (R-N8, R-N3), so a hook killed in between
  shows them again at the next prompt rather than losing them.
- A compaction (`PreCompact`, Gemini CLI's `PreCompress`): `compacted`, once per compaction.
- `SubagentStart` / `SubagentStop` (Claude Code): the spawn edge, so the parent watches its
  sub-agent (R-W1) / the end of the sub-agent's run.

A hook must never break the user's session (R-L8, R-A1): unknown events and malformed input
exit 0, say why in one line (on stderr for Claude Code; in the state directory's `hook.log`
for Gemini CLI, which shows a hook's stderr to the user when its stdout is empty) and record
nothing; when the store is unreachable the signal is kept in the state directory and recorded
by the next hook run that reaches it. Settings the hook can never record with (a store the
service refuses to open, an in-memory or read-only one, an empty `--database-url`, a bad
`--agent`) are the user's mistake, never silent (R-L9): the signal is kept, and the hook's
JSON output carries one line as its `systemMessage`, which both CLIs show the user as a
warning; the turn goes on (`tell`). So does the first run of each session's outage, and its
first prompt (ADR 050), and every run that loses a signal.
Only the documented JSON output is ever written to stdout. The prompt's text is never read
beyond its presence and whether it is a background sub-agent's report to its session
(`<task-notification>…`, which Claude Code submits as a prompt): no human turn.
"""

from __future__ import annotations

import json
import os
import time

from session_awareness.infrastructure.claude_state import ClaudeState, state_root, valid_id

#: `typing.TYPE_CHECKING` without importing `typing`; mypy treats the name as true. A hook run
#: is a process start, and a prompt relayed to the MCP server imports no more than this
#: module, `claude_state` and `claude_relay` (the standard library's `json`, `os`, `re`,
#: `socket`, `zlib`): no `dataclasses`, `typing`, `pathlib`, `logging` or `argparse`, no
#: third-party package. Recording in-process imports the service when it needs it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import IO, Any, Protocol

    from session_awareness.application import SessionAwareness
    from session_awareness.application.watching import Handover

    class Lines(Protocol):
        """Where a hook run's one-line reasons go: stderr, or a `HookLog`."""

        def write(self, text: str, /) -> int: ...


EVENTS = ("SessionStart", "UserPromptSubmit", "PreCompact", "SubagentStart", "SubagentStop")
SOURCES = ("startup", "resume", "clear", "compact")
#: The source of a prompt no human typed: Claude Code hands a background sub-agent's report
#: to its session as a prompt of its own, `<task-notification>…` (R-L6).
TASK_NOTIFICATION = "task-notification"
MAX_INPUT = 1 << 20  # a hook event is small; a prompt larger than this is still only counted
MAX_PATH = 4096
#: Where a Gemini CLI hook run says why it recorded nothing, in the state directory.
HOOK_LOG = "hook.log"
HOOK_LOG_LIMIT = 1 << 20


class Record:
    """A record of named fields, immutable once built, compared and shown by them: what
    `@dataclass(frozen=True, slots=True)` generates, written out, because importing
    `dataclasses` (and `inspect` with it) is a tenth of a relayed hook run."""

    __slots__: tuple[str, ...] = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _set(self, **fields: object) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in self.__slots__))

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({shown})"


class AgentCli(Record):
    """What differs between the agent CLIs a hook serves; the rest is one code path.

    - `name`: the `hook`/`install` argument, the human turn's channel, the transcript source;
    - `segment`: the CLI's part of a session key: `agent:<agent>:<segment>:<session_id>`;
    - `events`: the CLI's hook event -> the signal event it maps to;
    - `sources`: the `SessionStart` sources it sends;
    - `prompt_event`: the event whose output carries the notices (`hookEventName`);
    - `stderr_shown`: whether the CLI shows a hook's stderr to the user;
    - `compaction_triggers`: the compaction event's `trigger`s that mean a compaction
      happens (None: every one).
    """

    __slots__ = (  # noqa: RUF023 -- in the order the fields are declared
        "name",
        "segment",
        "default_agent",
        "events",
        "sources",
        "prompt_event",
        "stderr_shown",
        "compaction_triggers",
    )
    name: str
    segment: str
    default_agent: str
    events: Mapping[str, str]
    sources: tuple[str, ...]
    prompt_event: str
    stderr_shown: bool
    compaction_triggers: tuple[str, ...] | None

    def __init__(
        self,
        *,
        name: str,
        segment: str,
        default_agent: str,
        events: Mapping[str, str],
        sources: tuple[str, ...],
        prompt_event: str,
        stderr_shown: bool,
        compaction_triggers: tuple[str, ...] | None = None,
    ) -> None:
        self._set(
            name=name,
            segment=segment,
            default_agent=default_agent,
            events=events,
            sources=sources,
            prompt_event=prompt_event,
            stderr_shown=stderr_shown,
            compaction_triggers=compaction_triggers,
        )


CLAUDE_CODE = AgentCli(
    name="claude-code",
    segment="claude",
    default_agent="claude",
    events={event: event for event in EVENTS},
    sources=SOURCES,
    prompt_event="UserPromptSubmit",
    stderr_shown=False,
)
GEMINI_CLI = AgentCli(
    name="gemini-cli",
    segment="gemini",
    default_agent="gemini",
    events={
        "SessionStart": "SessionStart",
        "BeforeAgent": "UserPromptSubmit",
        "PreCompress": "PreCompact",
    },
    sources=("startup", "resume", "clear"),
    prompt_event="BeforeAgent",
    stderr_shown=True,
    # Gemini CLI fires `PreCompress` with `auto` before every turn's compression check, also
    # when it then compresses nothing; only `/compress` (`manual`) always compresses.
    compaction_triggers=("manual",),
)
CLIS = {cli.name: cli for cli in (CLAUDE_CODE, GEMINI_CLI)}


class HookInputError(ValueError):
    """The input is not a hook event this command maps."""


class NothingToRecord(Exception):
    """A well-formed event that records nothing (Gemini CLI's `auto` `PreCompress`)."""


def session_key(agent: str, session_id: str, cli: AgentCli = CLAUDE_CODE) -> str:
    return f"agent:{agent}:{cli.segment}:{session_id}"


def subagent_key(parent_key: str, agent_id: str) -> str:
    return f"{parent_key}:subagent:{agent_id}"


class Signal(Record):
    """What one hook event asks to record: its mapped fields, never message content. `cli`
    is the CLI's name; None (as in signals kept before): Claude Code."""

    __slots__ = (  # noqa: RUF023 -- in the order the fields are declared
        "event",
        "session_id",
        "at",
        "source",
        "agent_id",
        "agent_type",
        "operation",
        "previous",
        "idempotency_key",
        "transcript_path",
        "cli",
    )
    event: str
    session_id: str
    at: int
    source: str | None
    agent_id: str | None
    agent_type: str | None
    operation: str | None
    previous: str | None
    idempotency_key: str | None
    transcript_path: str | None
    cli: str | None

    def __init__(
        self,
        event: str,
        session_id: str,
        at: int,
        *,
        source: str | None = None,
        agent_id: str | None = None,
        agent_type: str | None = None,
        operation: str | None = None,
        previous: str | None = None,
        idempotency_key: str | None = None,
        transcript_path: str | None = None,
        cli: str | None = None,
    ) -> None:
        self._set(
            event=event,
            session_id=session_id,
            at=at,
            source=source,
            agent_id=agent_id,
            agent_type=agent_type,
            operation=operation,
            previous=previous,
            idempotency_key=idempotency_key,
            transcript_path=transcript_path,
            cli=cli,
        )

    def replace(self, **changes: str | None) -> Signal:
        """This signal with `changes` (`dataclasses.replace`)."""
        return Signal(**{**{n: getattr(self, n) for n in FIELDS}, **changes})

    @property
    def host(self) -> AgentCli:
        return CLIS[self.cli or CLAUDE_CODE.name]

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FIELDS if getattr(self, name) is not None}

    @classmethod
    def from_json(cls, data: object) -> Signal:
        """A signal kept or relayed earlier, checked again: `ValueError` when malformed."""
        if not isinstance(data, dict) or set(data) - set(FIELDS):
            raise ValueError("not a hook signal")
        fields = {name: data.get(name) for name in FIELDS}
        texts = [
            v for k, v in fields.items() if k not in ("at", "transcript_path") and v is not None
        ]
        if (
            fields["event"] not in EVENTS
            or not valid_id(fields["session_id"])
            or isinstance(fields["at"], bool)
            or not isinstance(fields["at"], int)
            or not all(isinstance(v, str) and 0 < len(v) <= 256 for v in texts)
            or (
                fields["source"] is not None
                and fields["source"] not in (*SOURCES, TASK_NOTIFICATION)
            )
            or (fields["cli"] is not None and fields["cli"] not in CLIS)
            or (fields["event"].startswith("Subagent") and not valid_id(fields["agent_id"]))
            or (
                fields["transcript_path"] is not None
                and _transcript_path(fields["transcript_path"]) is None
            )
        ):
            raise ValueError("not a hook signal")
        return cls(**fields)  # type: ignore[arg-type]  # checked field by field above


FIELDS = Signal.__slots__


def parse(raw: str, state: ClaudeState, *, now_ms: int, cli: AgentCli = CLAUDE_CODE) -> Signal:
    """The signal a `cli` hook event maps to; `HookInputError` (one line) when it maps to
    none."""
    try:
        data = json.loads(raw)
    except ValueError:
        raise HookInputError("input is not JSON") from None
    if not isinstance(data, dict):
        raise HookInputError("input is not a JSON object")
    named = data.get("hook_event_name")
    event = cli.events.get(named) if isinstance(named, str) else None
    if event is None:
        raise HookInputError(f"unmapped hook event {str(named)[:64]!r}")
    session_id = data.get("session_id")
    if not valid_id(session_id):
        raise HookInputError("session_id is missing or not a session id")
    assert isinstance(session_id, str)  # noqa: S101 -- narrowed by valid_id
    signal = _parsed(event, session_id, data, state, now_ms=now_ms, cli=cli)
    if cli is not CLAUDE_CODE:
        signal = signal.replace(cli=cli.name)
    transcript = _transcript_path(data.get("transcript_path"))
    if transcript is None:
        return signal
    return signal.replace(transcript_path=transcript)


def _transcript_path(path: object) -> str | None:
    """The transcript path the CLI gives every event (both write JSONL): a `.jsonl` path of
    one line, else None (it is remembered, so sessions_history can read the session's
    transcript)."""
    if not isinstance(path, str) or not path.endswith(".jsonl") or len(path) > MAX_PATH:
        return None
    if path != path.strip() or any(ord(c) < 32 or ord(c) == 127 for c in path):
        return None
    return path


def _parsed(
    event: str,
    session_id: str,
    data: dict[str, Any],
    state: ClaudeState,
    *,
    now_ms: int,
    cli: AgentCli,
) -> Signal:
    if event == "SessionStart":
        source = data.get("source")
        if source not in cli.sources:
            raise HookInputError(
                f"SessionStart source {str(source)[:32]!r} is not one of {cli.sources}"
            )
        previous = state.remember_session(session_id, cli.name)
        operation = None
        if source == "compact":
            operation = state.take_compaction(session_id) or _compaction_id(data, "compact")
        return Signal(
            event,
            session_id,
            now_ms,
            source=source,
            operation=operation,
            previous=previous if source == "clear" else None,
        )
    if event == "UserPromptSubmit":
        state.follow_session(session_id, cli.name)
        prompt = data.get("prompt")
        told = isinstance(prompt, str) and prompt.startswith(f"<{TASK_NOTIFICATION}>")
        return Signal(
            event,
            session_id,
            now_ms,
            source=TASK_NOTIFICATION if told else None,
            idempotency_key=f"{cli.name}:{uuid4()}",
        )
    if event == "PreCompact":
        trigger = data.get("trigger")
        if cli.compaction_triggers is not None and trigger not in cli.compaction_triggers:
            raise NothingToRecord
        operation = _compaction_id(data, str(trigger or ""))
        state.announce_compaction(session_id, operation)
        return Signal(event, session_id, now_ms, operation=operation)
    agent_id = data.get("agent_id")
    if not valid_id(agent_id):
        raise HookInputError(f"{event} needs agent_id, a sub-agent id")
    agent_type = data.get("agent_type")
    label = agent_type if isinstance(agent_type, str) and valid_id(agent_type) else None
    return Signal(event, session_id, now_ms, agent_id=str(agent_id), agent_type=label)


def _compaction_id(data: dict[str, Any], trigger: str) -> str:
    """One id per compaction: the transcript's size when it was announced (a repeated
    announcement of the same compaction finds the same size)."""
    path = data.get("transcript_path")
    try:
        size = _file_size(path) if isinstance(path, str) else None
    except OSError:
        size = None
    return f"{trigger or 'compact'}:{size if size is not None else uuid4().replace('-', '')}"


def _file_size(path: str) -> int:
    return os.stat(os.path.expanduser(path)).st_size


def uuid4() -> str:
    """A random UUID (version 4) in its usual text form, as `str(uuid.uuid4())` gives it,
    without importing `uuid`."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def apply(svc: SessionAwareness, signal: Signal, *, agent: str, drain: bool = True) -> list[str]:
    """Record the signal; for a prompt, drain and return the session's notices (R-N3)."""
    cli = signal.host
    key = session_key(agent, signal.session_id, cli)
    if signal.event == "SessionStart":
        if signal.source == "clear" and signal.previous:
            _reset_if_live(svc, session_key(agent, signal.previous, cli), agent)
        svc.open_session(key, agent_id=agent, kind="main")
        _note_transcript(svc, key, signal, agent)
        if signal.source == "compact" and signal.operation:
            svc.record_compacted(key, operation_id=signal.operation, agent_id=agent)
        return []
    svc.open_session(key, agent_id=agent, kind="main")
    _note_transcript(svc, key, signal, agent)
    if signal.event == "UserPromptSubmit":
        if signal.source != TASK_NOTIFICATION:  # a sub-agent's report is no human turn
            svc.record_human_direct_message(
                key,
                channel=cli.name,
                occurred_at=signal.at,
                idempotency_key=signal.idempotency_key,
                agent_id=agent,
            )
        return svc.drain_notices(key) if drain else []
    if signal.event == "PreCompact":
        svc.record_compacted(key, operation_id=str(signal.operation), agent_id=agent)
        return []
    child = subagent_key(key, str(signal.agent_id))
    if signal.event == "SubagentStart":
        svc.open_session(
            child, agent_id=agent, kind="subagent", label=signal.agent_type, parent=key
        )
        svc.record_child_spawned(child, parent=key, run_id=str(signal.agent_id), agent_id=agent)
    else:
        svc.record_run_terminal(
            child, run_id=str(signal.agent_id), outcome="completed", agent_id=agent
        )
    return []


def _note_transcript(svc: SessionAwareness, key: str, signal: Signal, agent: str) -> None:
    """Remember the session's transcript (an event only when it changed), so sessions_history
    reads it (ADR 018); the path, never the content."""
    if signal.transcript_path is not None:
        svc.note_transcript(key, source=signal.host.name, ref=signal.transcript_path,
                            agent_id=agent)  # fmt: skip


def _reset_if_live(svc: SessionAwareness, key: str, agent: str) -> None:
    from contextlib import suppress  # noqa: PLC0415

    from session_awareness.application import UnknownSessionError  # noqa: PLC0415

    with suppress(UnknownSessionError):
        svc.reset_session(key, agent_id=agent)


def prompt_context(
    notices: list[str], cli: AgentCli = CLAUDE_CODE, warning: str | None = None
) -> str:
    """The documented output of the CLI's prompt event (`UserPromptSubmit`, `BeforeAgent`)
    that adds the notices to the model's context; with `warning`, told the user too."""
    output: dict[str, Any] = {
        "hookSpecificOutput": {
            "hookEventName": cli.prompt_event,
            "additionalContext": "\n".join(notices),
        }
    }
    if warning is not None:
        output["systemMessage"] = f"session-awareness hook: {warning}"
    return json.dumps(output)


def run(
    stdin: IO[str],
    stdout: IO[str],
    stderr: Lines,
    *,
    agent: str,
    database_url: str | None,
    state: ClaudeState,
    verbose: bool = False,
    cli: AgentCli = CLAUDE_CODE,
) -> int:
    """Handle one hook event; always 0 (R-L8, R-A1). What the user must see (settings the
    hook can never record with, the first run of a session's outage, a lost signal) is
    `tell`: a warning the CLI shows, the signal kept for the first run that can record it."""
    signal = _read(stdin, stderr, state, cli)
    if signal is None:
        return 0
    mistake = settings_mistake(agent, database_url)
    if mistake is not None:
        return tell(f"{mistake}; {keep(signal, state)[1]}", stdout, stderr)
    try:
        from session_awareness.infrastructure.claude_relay import forward  # noqa: PLC0415

        relayed = forward(signal.to_json(), agent=agent, database_url=database_url, state=state)
    except Exception:  # noqa: BLE001 -- the relay is an optimisation: record in-process
        relayed = None
    warning = None
    if relayed is not None and relayed.other_store:  # recorded in-process, and told
        relayed, warning = None, OTHER_STORE
    if relayed is not None:  # print, then confirm: the server acknowledges on that (R-N8)
        if deliver(stdout, relayed.notices, cli):
            relayed.confirm()
        else:
            relayed.close()
        return 0
    quiet_logs(verbose=verbose)
    return in_process(signal, agent, database_url, state, cli, stdout, stderr, warning)


#: What a hook tells the user when its session's MCP server serves another store (R-L9).
OTHER_STORE = (
    "this session's MCP server serves another store than the hooks' --database-url, so its "
    "session tools do not see what the hooks record: give both the same URL (`install` "
    "writes both)"
)


def in_process(  # noqa: PLR0917 -- the run's context, passed on
    signal: Signal,
    agent: str,
    database_url: str | None,
    state: ClaudeState,
    cli: AgentCli,
    stdout: IO[str],
    stderr: Lines,
    warning: str | None,
) -> int:
    """Record the signal in-process and hand its notices over; `warning`, when given, is
    told the user too: with the notices' output, else on its own."""
    printed = False

    def show(notices: list[str]) -> bool:
        nonlocal printed
        printed = bool(notices) and deliver(stdout, notices, cli, warning)
        return printed

    try:
        _record(signal, agent=agent, database_url=database_url, state=state, deliver=show)
    except Unacknowledged as error:
        stderr.write(
            "session-awareness hook: notices shown, not acknowledged (shown again): "
            f"{_one_line(str(error.__cause__))}\n"
        )
    except Misconfigured as error:
        why = f"cannot record into the store as given: {_one_line(str(error.__cause__))}"
        return tell(f"{why}; {keep(signal, state)[1]}", stdout, stderr)
    except Exception as error:  # noqa: BLE001 -- kept for the next run, never raised
        return outage(signal, state, error, stdout, stderr)
    return 0 if warning is None or printed else tell(warning, stdout, stderr)


def outage(
    signal: Signal, state: ClaudeState, error: Exception, stdout: IO[str], stderr: Lines
) -> int:
    """The store could not be reached: keep the signal; tell the user at the first run of
    the session's outage and at its first prompt, since no notice reaches the session until
    the store is back, and whenever a signal was lost (ADR 050); else say it on `stderr`."""
    # Told at the outage's first run of the session, and at its first prompt: a CLI may
    # not show what a session's start says (Claude Code under `claude -p` does not).
    prompt = "UserPromptSubmit" if signal.event == "UserPromptSubmit" else None
    told = state.keeps_signals_of(signal.session_id, prompt)
    whole, what = keep(signal, state)
    why = f"store unavailable, {what}: {_one_line(str(error))}"
    if not whole:
        return tell(why, stdout, stderr)
    if not told:
        return tell(f"{why} (no notice reaches this session until it is back)", stdout, stderr)
    stderr.write(f"session-awareness hook: {why}\n")
    return 0


def _read(stdin: IO[str], stderr: Lines, state: ClaudeState, cli: AgentCli) -> Signal | None:
    """The event's signal; None, said on `stderr` when it is a mistake, for nothing to record."""
    try:
        return parse(stdin.read(MAX_INPUT), state, now_ms=int(time.time() * 1000), cli=cli)
    except HookInputError as error:
        stderr.write(f"session-awareness hook: ignored: {error}\n")
    except NothingToRecord:
        pass
    except Exception as error:  # noqa: BLE001 -- a hook never breaks the user's session
        stderr.write(f"session-awareness hook: ignored: {type(error).__name__}: {error}\n")
    return None


def settings_mistake(agent: str, database_url: str | None) -> str | None:
    """What is wrong with the hook's own options, seen before any store is asked."""
    if not valid_agent(agent):
        return "--agent must be an agent id (no ':', spaces or control characters)"
    if database_url == "":
        return "--database-url is empty"
    return None


#: A hook's exit code for arguments it cannot read (it then has no output to write): both
#: CLIs report the hook failed and go on with the turn (a non-blocking error; 2 blocks it).
UNREAD = 1


def keep(signal: Signal, state: ClaudeState) -> tuple[bool, str]:
    """Keep the signal for the next run that can record it: whether nothing was lost, and
    what to say of it. A spool that cannot be written loses the signal; a full one drops
    its oldest (`SPOOL_LIMIT`)."""
    try:
        dropped = state.spool(signal.to_json())
    except OSError as error:
        return False, f"signal lost, the state directory cannot keep it ({_one_line(str(error))})"
    if dropped:
        return False, f"signal kept, but the spool was full: its {dropped} oldest lost"
    return True, "signal kept"


def tell(why: str, stdout: IO[str], stderr: Lines) -> int:
    """Show `why` to the user: the hook's JSON output with a `systemMessage`, which both CLIs
    display as a warning and which no model reads, and the line where the run's reasons go.
    For settings the hook can never record with, the first run of a session's outage and a
    lost signal: a caller's mistake is never silent, nor is a picture going stale (R-L9),
    and the turn goes on (R-A1). Always 0, the exit code whose JSON the CLIs read."""
    line = f"session-awareness hook: {why}"
    stderr.write(line + "\n")
    try:
        stdout.write(json.dumps({"systemMessage": line}) + "\n")
        stdout.flush()
    except (OSError, ValueError):
        pass
    return 0


def deliver(stdout: IO[str], notices: list[str], cli: AgentCli, warning: str | None = None) -> bool:
    """Print the notices as the prompt's context (and `warning` for the user), flushed: True
    once they are out (or there are none), False when stdout refused them (they are then not
    acknowledged, R-N8)."""
    if not notices:
        return True
    try:
        stdout.write(prompt_context(notices, cli, warning) + "\n")
        stdout.flush()
    except (OSError, ValueError):
        return False
    return True


class Misconfigured(Exception):
    """The store cannot be recorded into as the hook's settings name it (its cause says why):
    a URL the service refuses, an in-memory or a read-only database. Every run with these
    settings would fail alike, so it is the user's to mend, not an outage to wait out."""


class Unacknowledged(Exception):
    """The notices were shown, and their acknowledgement failed: they stay pending and are
    shown again at the next prompt (R-N8); the signal itself was recorded."""


def notices_session(signal: Signal, agent: str) -> str | None:
    """The session whose notices the signal's hook run hands over: a prompt's own (R-N3,
    R-N8); None for every other event."""
    if signal.event != "UserPromptSubmit":
        return None
    return session_key(agent, signal.session_id, signal.host)


def hand_over(svc: SessionAwareness, signal: Signal, *, agent: str) -> tuple[str, Handover] | None:
    """Record the signal; for a prompt, its session and that session's notices read, not
    acknowledged (R-N8): the caller hands them on, then acknowledges them. None for every
    other event. Both paths use it: in-process (`_record`) and the MCP server's relay."""
    apply(svc, signal, agent=agent, drain=False)
    if svc.kept_signals:
        raise RuntimeError("the store failed while recording")
    key = notices_session(signal, agent)
    return None if key is None else (key, svc.hand_over_notices(key))


def _record(
    signal: Signal,
    *,
    agent: str,
    database_url: str | None,
    state: ClaudeState,
    deliver: Callable[[list[str]], bool],
) -> None:
    """Record the signal in-process; for a prompt, read its session's notices, `deliver`
    them, then acknowledge them (R-N8): a hook killed before the acknowledgement leaves them
    pending, to be shown again."""
    from session_awareness.application import open_service  # noqa: PLC0415 -- the heavy part
    from session_awareness.configuration import (  # noqa: PLC0415
        ConfigurationError,
        check_recordable,
        url_in_force,
    )

    try:
        check_recordable(url_in_force(database_url))
        svc = open_service(database_url, spool=False, maintenance="manual")
    except ConfigurationError as error:
        raise Misconfigured from error
    # The hook keeps what the store refused in its own spool (below, ClaudeState): the
    # service's would hold it a second time (R-L10). A hook's process lives for one event:
    # the host's long-lived service (the MCP server) runs the sweep and the prune, never a
    # prompt's hook, whose own sweep would race its record (ADR 038).
    with svc:
        for kept in state.take_spooled():
            try:
                apply(svc, Signal.from_json(kept), agent=agent, drain=False)
            except Exception:
                state.spool(kept)
                raise
        handed = hand_over(svc, signal, agent=agent)
        if handed is None:
            return
        key, handover = handed
        if not handover.notices or not deliver(list(handover.notices)):
            return
        try:
            svc.acknowledge_handed(key, handover)
        except Exception as error:
            raise Unacknowledged from error


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300] or "unknown error"


def quiet_logs(*, verbose: bool) -> None:
    """With `--verbose`, the service's events go to stderr; without, nowhere (the library is
    silent until asked, and structlog is then never imported): the hook's own stderr line is
    all Claude Code shows."""
    if not verbose:
        return
    import logging  # noqa: PLC0415
    import sys  # noqa: PLC0415

    import structlog  # noqa: PLC0415

    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.KeyValueRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


def main(argv: list[str] | None = None, *, exiting: bool = False) -> int:
    """`python -m session_awareness.infrastructure.claude_hooks claude-code|gemini-cli
    [--agent A] [--database-url URL] [--verbose]`: what the installed hooks run (they call
    `main` with `python -P -c`, which spares the start-up `runpy`: `install_claude`). The
    same as `session-awareness hook …`, without the operator CLI's imports (a hook run is a
    process start, so its import chain is the user's wait). The arguments the installed hooks
    pass are read directly; anything else goes to `argparse` (with `gettext`, `locale` and
    `shutil`, a third of a relayed run's imports), which reads them the same way.

    `exiting`: the process ends when this returns (the installed hooks, `-m`). Its shutdown
    would then collect garbage over every object still alive, a full pass per step of
    tearing the modules down: after recording in-process, the thousands of classes and
    functions the service's imports built (the domain's event dataclasses above all), none
    of them garbage, about a tenth of the run (issue 39). They are frozen instead
    (`gc.freeze()`), out of the collector's sight: the store is closed and the output
    written by then, and the process's end frees them all the same."""
    code = _main(argv)
    if exiting:
        import gc  # noqa: PLC0415

        gc.freeze()
    return code


def _main(argv: list[str] | None) -> int:
    import sys  # noqa: PLC0415

    plain = _plain_arguments(sys.argv[1:] if argv is None else argv)
    if plain is not None:
        host, options = plain
        return run_for(
            CLIS[host],
            agent=options.get("--agent"),
            database_url=options.get("--database-url"),
            verbose="--verbose" in options,
        )
    import argparse  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="session-awareness hook")
    parser.add_argument("host", choices=sorted(CLIS))
    parser.add_argument("--agent", default=None)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--verbose", action="store_true")
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # argparse said why on stderr (or helped, code 0)
        return 0 if done.code in (0, None) else UNREAD  # never 2: that blocks the turn
    return run_for(
        CLIS[args.host],
        agent=args.agent,
        database_url=args.database_url,
        verbose=args.verbose,
    )


def _plain_arguments(argv: list[str]) -> tuple[str, dict[str, str]] | None:
    """The host and the options of `HOST [--agent A] [--database-url URL] [--verbose]`, each
    option spelled out and its value not starting with `-`; None for any other form (help,
    an abbreviation, an unknown option, a mistake), which `argparse` then reads."""
    if not argv or argv[0] not in CLIS:
        return None
    options: dict[str, str] = {}
    rest = iter(argv[1:])
    for word in rest:
        name, equals, value = word.partition("=")
        if name == "--verbose" and not equals:
            options[name] = ""
            continue
        if name not in ("--agent", "--database-url"):
            return None
        if not equals:
            value = next(rest, "-")
        if value.startswith("-"):
            return None
        options[name] = value
    return argv[0], options


def run_for(cli: AgentCli, *, agent: str | None, database_url: str | None, verbose: bool) -> int:
    """One hook run of `cli` on the process's stdin/stdout; where the CLI shows a hook's
    stderr to the user, the one-line reasons go to the state directory's `hook.log` instead
    (`--verbose` still logs on stderr); what the user must see is `tell`'s JSON output."""
    import sys  # noqa: PLC0415

    agent = cli.default_agent if agent is None else agent
    try:
        root = state_root()
        errors: Lines = HookLog(os.path.join(root, HOOK_LOG)) if cli.stderr_shown else sys.stderr
    except Exception as error:  # noqa: BLE001 -- a hook never breaks the user's session
        sys.stderr.write(f"session-awareness hook: ignored: {_one_line(str(error))}\n")
        return 0
    return run(
        sys.stdin,
        sys.stdout,
        errors,
        agent=agent,
        database_url=database_url,
        state=ClaudeState(root),
        verbose=verbose,
        cli=cli,
    )


class HookLog:
    """A hook's reason lines appended to a file (created on the first line, restarted past
    `HOOK_LOG_LIMIT`); a file that cannot be written loses the line, never the turn."""

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, text: str) -> int:
        from pathlib import Path  # noqa: PLC0415 -- only when there is a reason to keep

        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        path = Path(self.path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists() and path.stat().st_size > HOOK_LOG_LIMIT:
                path.replace(path.with_suffix(".log.1"))
            with path.open("a", encoding="utf-8") as file:
                file.write(f"{stamp} {text}")
        except OSError:
            pass
        return len(text)


def valid_agent(agent: str) -> bool:
    """An agent id: no `:`, no whitespace or control characters (R-K1)."""
    return 0 < len(agent) <= 128 and not any(
        c == ":" or c.isspace() or not c.isprintable() for c in agent
    )


if __name__ == "__main__":
    raise SystemExit(main(exiting=True))
