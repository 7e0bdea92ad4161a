"""What the agent-CLI adapters (Claude Code, Gemini CLI) remember between process starts, in
small files.

Each CLI starts a hook process per event and one MCP server process per session, so the
pieces that must outlive a process live in a state directory
(`$SESSION_AWARENESS_STATE_DIR`, else `$XDG_STATE_HOME/session-awareness`, else
`~/.local/state/session-awareness`):

- `hosts/<pid>-<start>.json`: which session (and of which CLI: `cli`, absent in records
  written before Gemini CLI was served, meaning `claude-code`) a CLI process runs now. The
  `SessionStart` hook writes it for its parent and grandparent (a hook runs under a shell, or
  directly under the CLI); the MCP server, a direct child of the same CLI process, reads its
  parent's. It follows `/clear`, which gives the process a new session id.
- `sessions/<session_id>.json`: a compaction announced by `PreCompact`, so the `SessionStart`
  that follows it records nothing twice.
- `spool/`: hook signals that could not be recorded because the store was unreachable; the next
  hook run that reaches the store records them first (R-L8). No message text is kept.

This module imports nothing heavy: the hook's start-up time is the user's wait. A prompt's
hook relayed to the MCP server reads no more of it than `state_root`, `has_spooled`,
`parent_of` and `process_identity`, which need neither `pathlib` nor `subprocess` (loaded only
where a state file is written or read, or where there is no `/proc`).
"""

from __future__ import annotations

import json
import os
import re

#: `typing.TYPE_CHECKING` without importing `typing` (a hook run's imports are its wait);
#: mypy treats the name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path
    from typing import Any

STATE_DIR_ENV = "SESSION_AWARENESS_STATE_DIR"
#: Claude Code documents this for hooks and stdio MCP servers; an MCP server keeps the id it
#: was started with (it does not follow `/clear`), so the host record is preferred.
SESSION_ID_ENV = "CLAUDE_CODE_SESSION_ID"
#: Session and sub-agent ids as Claude Code writes them (UUIDs, hex); anything else is refused.
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
SPOOL_LIMIT = 1000
#: A kept signal's file name before its event and session: `<at, 15 digits>-<32 hex digits>`.
SPOOL_NAME_HEAD = 15 + 1 + 32
PROC = "/proc"
#: The CLI of a host record that names none (written before other CLIs were served).
DEFAULT_CLI = "claude-code"


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    from pathlib import Path  # noqa: PLC0415 -- a relayed hook run needs only `state_root`

    return Path(state_root(env))


def state_root(env: Mapping[str, str] | None = None) -> str:
    """The state directory (`state_dir`) as a path string."""
    env = os.environ if env is None else env
    given = env.get(STATE_DIR_ENV)
    if given:
        return given
    base = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "session-awareness")


def valid_id(value: object) -> bool:
    return isinstance(value, str) and ID_PATTERN.match(value) is not None


def process_identity(pid: int) -> str | None:
    """`<pid>-<start time>`, so a reused pid never inherits a record; None if unknown."""
    try:
        stat = _proc_stat(pid)
        fields = stat[stat.rindex(")") + 2 :].split()
        return f"{pid}-{fields[19]}"  # field 22 of stat: the start time in clock ticks
    except (OSError, ValueError, IndexError):
        pass
    started = _ps(pid, "lstart=")
    return f"{pid}-{re.sub(r'[^0-9A-Za-z]+', '', started)}" if started else None


def parent_of(pid: int) -> int | None:
    if pid == os.getpid():
        return os.getppid()
    try:
        stat = _proc_stat(pid)
        return int(stat[stat.rindex(")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        pass
    parent = _ps(pid, "ppid=")
    return int(parent) if parent.isdigit() else None


def _proc_stat(pid: int) -> str:
    with open(f"{PROC}/{pid}/stat", encoding="utf-8", errors="replace") as file:
        return file.read()


def _ps(pid: int, column: str) -> str:
    """One `ps` column where there is no /proc (macOS); empty when it cannot be read."""
    import subprocess  # noqa: PLC0415 -- only where there is no /proc

    try:
        done = subprocess.run(  # noqa: S603 -- a fixed argument list
            ["ps", "-o", column, "-p", str(pid)],  # noqa: S607 -- ps from PATH, as a shell would
            capture_output=True,
            text=True,
            timeout=2,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()


class ClaudeState:
    """The state directory of the Claude Code adapters: `root`, given as a `Path` or a path
    string (a relayed hook run never builds a `Path`)."""

    def __init__(self, root: Path | str) -> None:
        self._root = root

    @property
    def root(self) -> Path:
        from pathlib import Path  # noqa: PLC0415 -- a relayed hook run needs only `root_text`

        if not isinstance(self._root, Path):
            self._root = Path(self._root)
        return self._root

    @property
    def root_text(self) -> str:
        return os.fspath(self._root)

    # -- which session a Claude Code process runs -------------------------------------------

    def remember_session(self, session_id: str, cli: str = DEFAULT_CLI) -> str | None:
        """Record `session_id` of `cli` for this hook's parent and grandparent; return the
        session of that CLI the nearest of them ran before, if it was another (what `/clear`
        replaced)."""
        previous: str | None = None
        for host in _hook_hosts():
            before = self.session_of_host(host)
            if previous is None and before is not None and before != (cli, session_id):
                previous = before[1] if before[0] == cli else None
            self._write(self._file("hosts", f"{host}.json"), _host_record(session_id, cli))
        self._forget_ended_hosts()
        return previous

    def follow_session(self, session_id: str, cli: str = DEFAULT_CLI) -> None:
        """A prompt of `session_id`: where this hook's parent or grandparent is recorded as
        running another session of `cli`, record this one. Gemini CLI's `/resume` switches
        its session without a `SessionStart`; its MCP server, which reads the record, would
        go on serving the session the user left."""
        for host in _hook_hosts():
            before = self.session_of_host(host)
            if before is not None and before[0] == cli and before[1] != session_id:
                self._write(self._file("hosts", f"{host}.json"), _host_record(session_id, cli))

    def _forget_ended_hosts(self) -> None:
        """Remove the records of host processes that have ended: every session start writes
        two (under Claude Code, the hook's shell is one), and nothing else removes them. A
        record whose pid is alive stays, even if a new process took the pid (its start time
        in the name then tells it apart, `process_identity`)."""
        folder = os.path.join(self.root_text, "hosts")
        try:
            with os.scandir(folder) as entries:
                names = [entry.name for entry in entries if entry.name.endswith(".json")]
        except OSError:
            return
        for name in names:
            pid = name.partition("-")[0]
            if not pid.isdigit():
                continue
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                self._forget(os.path.join(folder, name))
            except (OSError, OverflowError):  # alive (another user's), or no such number
                continue

    @staticmethod
    def _forget(path: str) -> None:
        try:  # noqa: SIM105 -- `contextlib` would be one more import on a relayed hook's path
            os.unlink(path)
        except OSError:  # another hook removed it first
            pass

    def session_of_host(self, host: str) -> tuple[str, str] | None:
        """(the CLI, its session id) a host process runs, as its record says."""
        found = self._read(self._file("hosts", f"{host}.json"))
        session_id, cli = found.get("sessionId"), found.get("cli", DEFAULT_CLI)
        return (cli, session_id) if valid_id(session_id) and valid_id(cli) else None

    def session_of_parent(self) -> tuple[str, str] | None:
        """(CLI, session) the process that started this one runs (for the MCP server)."""
        host = process_identity(os.getppid())
        return self.session_of_host(host) if host is not None else None

    # -- compactions announced by PreCompact -----------------------------------------------

    def announce_compaction(self, session_id: str, operation_id: str) -> None:
        self._write(self.root / "sessions" / f"{session_id}.json", {"compaction": operation_id})

    def take_compaction(self, session_id: str) -> str | None:
        path = self.root / "sessions" / f"{session_id}.json"
        found = self._read(path).get("compaction")
        path.unlink(missing_ok=True)
        return found if isinstance(found, str) else None

    # -- signals kept while the store was unreachable --------------------------------------

    def spool(self, entry: dict[str, Any]) -> int:
        """Keep one hook signal (the mapped fields only, never message text); returns how
        many of the oldest kept signals were dropped to stay within `SPOOL_LIMIT`."""
        folder = self.root / "spool"
        folder.mkdir(parents=True, exist_ok=True)
        kept = sorted(folder.glob("*.json"))
        dropped = kept[: max(0, len(kept) - SPOOL_LIMIT + 1)]
        for old in dropped:
            old.unlink(missing_ok=True)
        name = (
            f"{entry['at']:015d}-{os.urandom(16).hex()}-{entry['event']}-{entry['session_id']}.json"
        )
        self._write(folder / name, entry)
        return len(dropped)

    def keeps_signals_of(self, session_id: str, event: str | None = None) -> bool:
        """Whether a kept signal of the session (of `event`, when given) waits in the spool:
        its file is named by both (`spool`); a file an older version kept, named by neither,
        is not seen."""
        tail = f"-{session_id}.json"
        try:
            with os.scandir(os.path.join(self.root_text, "spool")) as entries:
                for entry in entries:
                    kind, dash, rest = entry.name[SPOOL_NAME_HEAD + 1 :].partition("-")
                    if dash and f"-{rest}" == tail and (event is None or kind == event):
                        return True
        except OSError:  # no spool folder: nothing kept
            pass
        return False

    def has_spooled(self) -> bool:
        try:
            with os.scandir(os.path.join(self.root_text, "spool")) as entries:
                return any(entry.name.endswith(".json") for entry in entries)
        except OSError:  # no spool folder: nothing kept
            return False

    def take_spooled(self) -> list[dict[str, Any]]:
        """Claim every kept signal, oldest first; a concurrent hook claims each at most once."""
        claimed: list[dict[str, Any]] = []
        if not self.has_spooled():
            return claimed
        folder = self.root / "spool"
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            mine = path.with_suffix(f".{os.getpid()}.claimed")
            try:
                path.rename(mine)
            except OSError:
                continue  # another hook took it
            entry = self._read(mine)
            mine.unlink(missing_ok=True)
            if entry:
                claimed.append(entry)
        return claimed

    # -- files -------------------------------------------------------------------------------

    # Plain `os` calls on path strings: a hook run that records in-process (`SessionStart`
    # writes its host records) builds no `Path` (ADR 039).

    def _file(self, *parts: str) -> str:
        return os.path.join(self.root_text, *parts)

    def _write(self, path: Path | str, data: dict[str, Any]) -> None:
        path = os.fspath(path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        scratch = f"{os.path.splitext(path)[0]}.{os.getpid()}.tmp"
        with open(scratch, "w", encoding="utf-8") as file:
            file.write(json.dumps(data))
        os.replace(scratch, path)  # atomic: a reader sees the old record or the new one

    def _read(self, path: Path | str) -> dict[str, Any]:
        try:
            with open(path, encoding="utf-8") as file:
                data = json.loads(file.read())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}


def _hook_hosts() -> Iterator[str]:
    """The identities of this hook's parent and grandparent (a hook runs under a shell, or
    directly under its CLI), as far as they are known."""
    pid: int | None = os.getpid()
    for _ in range(2):
        pid = parent_of(pid) if pid is not None else None
        host = process_identity(pid) if pid is not None and pid > 1 else None
        if host is None:
            return
        yield host


def _host_record(session_id: str, cli: str) -> dict[str, str]:
    record = {"sessionId": session_id}
    if cli != DEFAULT_CLI:
        record["cli"] = cli  # old readers, which know only Claude Code, ignore the field
    return record


def host_session(
    state: ClaudeState, env: Mapping[str, str] | None = None
) -> tuple[str, str] | None:
    """(CLI, session id) this process serves: the session its parent runs now (the
    `SessionStart` hook's record, which follows `/clear`, and names Claude Code or Gemini
    CLI), else Claude Code's `$CLAUDE_CODE_SESSION_ID` (Gemini CLI gives its MCP servers no
    session id)."""
    env = os.environ if env is None else env
    found = state.session_of_parent()
    if found is not None:
        return found
    given = env.get(SESSION_ID_ENV)
    return (DEFAULT_CLI, given) if valid_id(given) else None
