"""`session-awareness install claude-code | gemini-cli` / `uninstall …`: the hooks and the MCP
server entry in the agent CLI's configuration, merged into what is there, never clobbering it.

Where each CLI reads them (its settings and MCP documentation):

| CLI, scope | hooks (`hooks` in a settings file) | MCP server (`mcpServers`) |
|---|---|---|
| Claude Code, `--project DIR` (default: here) | `DIR/.claude/settings.json` | `DIR/.mcp.json` |
| Claude Code, `--user` | `~/.claude/settings.json` | `~/.claude.json` (top level) |
| Gemini CLI, `--project DIR` (default: here) | `DIR/.gemini/settings.json` | the same file |
| Gemini CLI, `--user` | `~/.gemini/settings.json` | the same file |

Gemini CLI's hook `timeout` is in milliseconds, Claude Code's in seconds; a Gemini CLI hook
also carries a `name` (what `/hooks disable` takes) and its server entry has no `type` (a
`command` is a stdio server).

Our entries are recognised by what they run (the hook module or `session-awareness hook`,
the server named `session-awareness`), so installing again replaces them (keeping what the
user added to the server's entry), and uninstalling removes them and nothing else; a file or
event list left empty by that goes too. Both point at this installation's Python and at one
database URL (a relative SQLite path is made absolute, since Claude Code starts sessions in
many directories).
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import shlex
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from session_awareness.configuration import check_recordable, sqlite_file, url_in_force
from session_awareness.infrastructure.claude_hooks import CLAUDE_CODE, AgentCli
from session_awareness.infrastructure.claude_state import STATE_DIR_ENV, state_dir

SERVER_NAME = "session-awareness"
HOOK_MODULE = "session_awareness.infrastructure.claude_hooks"
#: What the hook command runs: the hook module's `main`, imported by `-c` rather than run by
#: `-m`, whose `runpy` (with `importlib.util` and `contextlib`) is about 2 ms of every hook
#: run's start-up (issue 39); `-P` keeps the working directory, the user's project, off
#: `sys.path`, so none of its files can stand in for a module the hook imports. `exiting`:
#: the process ends with the event, so `main` spares it the shutdown's garbage collection.
HOOK_ENTRY = f"from {HOOK_MODULE} import main; raise SystemExit(main(exiting=True))"
CLI_MODULE = "session_awareness.infrastructure.cli"
#: How to get what the MCP server entry runs (`session-awareness mcp` needs the `mcp` package).
MCP_EXTRA = "pip install 'session-awareness[mcp]'"
#: How long a CLI lets our hook run before it gives up on it (and the turn goes on).
HOOK_TIMEOUT_SECONDS = 10
#: The `--agent` of `session-awareness mcp` when none is given.
MCP_DEFAULT_AGENT = "claude"


class InstallError(Exception):
    """A configuration file cannot be merged (it is not a JSON object)."""


@dataclass(frozen=True, slots=True)
class Change:
    path: Path
    before: dict[str, Any] | None
    after: dict[str, Any] | None

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        old = _dump(self.before).splitlines(keepends=True) if self.before is not None else []
        new = _dump(self.after).splitlines(keepends=True) if self.after is not None else []
        return "".join(difflib.unified_diff(old, new, str(self.path), str(self.path)))


def apply_all(changes: list[Change]) -> None:
    """Write every changed file, or leave them all as they were: the hooks without their
    MCP server (or the reverse) would be a half-done install. Each new content is written
    to a scratch file beside its file first; then the files are replaced (or removed) one by
    one, and a failure puts back the ones already replaced. `InstallError` names the file
    that could not be written."""
    changed = [change for change in changes if change.changed]
    originals = {c.path: c.path.read_bytes() if c.path.exists() else None for c in changed}
    made: list[Path] = []  # folders created for a file, removed again on failure
    scratches: dict[Path, Path] = {}
    done: list[Path] = []
    current = changed[0].path if changed else None
    try:
        for change in changed:
            current = change.path
            if change.after is None:
                continue
            target = written(change.path)
            made += [p for p in reversed(target.parents) if not p.exists()]
            target.parent.mkdir(parents=True, exist_ok=True)
            scratch = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            scratches[change.path] = scratch
            scratch.write_text(_dump(change.after), encoding="utf-8")
            if target.exists():  # a private file (tokens in a server's env) stays private
                scratch.chmod(stat.S_IMODE(target.stat().st_mode))
        for change in changed:
            current = change.path
            if change.path in scratches:
                scratches[change.path].replace(written(change.path))
                del scratches[change.path]
            else:
                change.path.unlink(missing_ok=True)
            done.append(change.path)
    except OSError as error:
        kept = _put_back(done, originals, scratches, made)
        raise InstallError(f"cannot write {current}: {error.strerror or error}; {kept}") from None


def written(path: Path) -> Path:
    """The file a change to `path` writes: the file a symbolic link names (a settings file
    kept in a dotfiles checkout stays linked, and the checkout gets the change), else
    `path`."""
    return path.resolve() if path.is_symlink() else path


def _put_back(
    done: list[Path], originals: dict[Path, bytes | None], scratches: dict[Path, Path],
    made: list[Path],
) -> str:  # fmt: skip
    """Undo a part-done `apply_all`; what the error message says was changed."""
    for scratch in scratches.values():
        scratch.unlink(missing_ok=True)
    left = []
    for path in done:
        try:
            original = originals[path]
            if original is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(original)
        except OSError:
            left.append(str(path))
    for folder in reversed(made):
        try:
            folder.rmdir()
        except OSError:
            break
    if left:
        return f"{', '.join(left)} could not be put back as it was"
    return "nothing was changed"


def config_paths(
    *, project: Path | None, user: bool, home: Path | None = None, cli: AgentCli = CLAUDE_CODE
) -> tuple[Path, Path]:
    """(settings file for the hooks, MCP configuration file) of the chosen scope."""
    if cli is not CLAUDE_CODE:  # Gemini CLI: one settings.json holds both
        base = (home or Path.home()) if user else (project or Path.cwd()).resolve()
        settings = base / ".gemini" / "settings.json"
        return settings, settings
    if user:
        home = home or Path.home()
        return home / ".claude" / "settings.json", home / ".claude.json"
    root = (project or Path.cwd()).resolve()
    return root / ".claude" / "settings.json", root / ".mcp.json"


def absolute_url(url: str | None) -> str:
    """The database URL the installed commands use, with a SQLite path made absolute."""
    url = url_in_force(url, default=None) or (
        f"sqlite:///{(state_dir() / 'session-awareness.db').resolve()}"
    )
    parts = urlsplit(url)
    if parts.scheme != "sqlite" or parts.path in ("", "/", "/:memory:"):
        return url
    path = Path(unquote(parts.path[1:]))
    if path.is_absolute():
        return url
    query = f"?{parts.query}" if parts.query else ""  # `?mode=rw` goes with the path
    return f"sqlite:///{quote(str(path.resolve()))}{query}"


def check_database_url(url: str) -> None:
    """Refuse, before anything is written, a URL the hooks and the MCP server could not
    record into: one the service cannot open (`ConfigurationError`, as `open_service` says
    it), an in-memory SQLite database (each hook run would record into a new, empty one) or
    a read-only one (`check_recordable`, which every in-process hook run checks too, and
    then says so on each run, R-L9)."""
    check_recordable(url)
    if not url.startswith("sqlite://"):
        try:
            from session_awareness.infrastructure.pg_config import (  # noqa: PLC0415
                parse_postgres_url,
            )
        except ImportError:  # the postgres extra: its absence is the server's to say
            return
        parse_postgres_url(url)


def prepare_database(url: str) -> None:
    """Create the folder of a SQLite database, so the first hook run can create the file."""
    path = sqlite_file(url)
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)


def mcp_extra_installed() -> bool:
    """Whether the MCP server entry can start here: the mcp extra's `mcp` package is there."""
    try:
        return importlib.util.find_spec("mcp") is not None
    except (ImportError, ValueError):  # a finder that refuses it, or a half-imported module
        return False


def hook_command(database_url: str, agent: str, cli: AgentCli = CLAUDE_CODE) -> str:
    words = [sys.executable, "-P", "-c", HOOK_ENTRY, cli.name, "--database-url", database_url]
    if agent != cli.default_agent:
        words += ["--agent", agent]
    prefix = ""
    if os.environ.get(STATE_DIR_ENV):
        prefix = f"{STATE_DIR_ENV}={shlex.quote(os.environ[STATE_DIR_ENV])} "
    return prefix + shlex.join(words)


def server_entry(
    database_url: str, agent: str, visibility: str, cli: AgentCli = CLAUDE_CODE
) -> dict[str, Any]:
    args = ["-m", CLI_MODULE, "mcp", "--database-url", database_url, "--visibility", visibility]
    if agent != MCP_DEFAULT_AGENT:
        args += ["--agent", agent]
    entry: dict[str, Any] = {"command": sys.executable, "args": args}
    if cli is CLAUDE_CODE:
        entry = {"type": "stdio", **entry}
    if os.environ.get(STATE_DIR_ENV):
        entry["env"] = {STATE_DIR_ENV: os.environ[STATE_DIR_ENV]}
    return entry


def plan(
    *,
    settings: Path,
    mcp_config: Path,
    database_url: str | None,
    agent: str | None = None,
    visibility: str = "agent",
    remove: bool = False,
    cli: AgentCli = CLAUDE_CODE,
) -> list[Change]:
    """The changes installing (or, with `remove`, uninstalling) makes to the two files (one
    file, when the CLI keeps hooks and servers together)."""
    agent = agent or cli.default_agent
    url = absolute_url(database_url)
    before = {path: load_settings(path) for path in (settings, mcp_config)}
    after = dict(before)
    hooks = _without_our_hooks(before[settings], settings)
    if not remove:
        hooks = _with_hooks(hooks, hook_command(url, agent, cli), cli, settings)
    after[settings] = hooks
    after[mcp_config] = _with_server(
        after[mcp_config], mcp_config, None if remove else server_entry(url, agent, visibility, cli)
    )
    # A file left empty goes, unless it is a link: the link stays, naming an empty object.
    return [
        Change(path, before[path], after[path] or ({} if path.is_symlink() else None))
        for path in before
    ]


def _with_server(
    config: dict[str, Any] | None, path: Path, entry: dict[str, Any] | None
) -> dict[str, Any]:
    """The configuration with our server entry replaced by `entry` (or removed, for None)."""
    after: dict[str, Any] = json.loads(json.dumps(config or {}))
    servers = after.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise InstallError(f"{path}: mcpServers is not a JSON object; nothing was changed")
    servers = dict(servers or {})
    before = servers.pop(SERVER_NAME, None)
    if entry is not None:
        servers[SERVER_NAME] = _keeping_theirs(entry, before)
    after["mcpServers"] = servers
    if not servers:
        del after["mcpServers"]
    return after


#: The keys of a server entry `install` writes; any other the user added is kept.
SERVER_KEYS = ("type", "command", "args", "env")


def _keeping_theirs(entry: dict[str, Any], before: object) -> dict[str, Any]:
    """Our new server entry, with what the user added to the one it replaces: keys we never
    write (Gemini CLI's `trust`, `timeout`, `includeTools`, …) and variables of its `env`
    other than ours, so installing again (another store, another agent) loses none of it."""
    if not isinstance(before, dict):
        return entry
    theirs = {k: v for k, v in before.items() if k not in SERVER_KEYS}
    env = before.get("env")
    if isinstance(env, dict):
        env = {k: v for k, v in env.items() if k != STATE_DIR_ENV} | entry.get("env", {})
    else:
        env = entry.get("env")
    return {**entry, **theirs} | ({"env": env} if env else {})


def load_settings(path: Path) -> dict[str, Any] | None:
    """A configuration file's JSON object (None: no file); `InstallError` when it cannot
    be read or is not a JSON object."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")  # JSON is UTF-8
    except OSError as error:  # a folder, or a file this user may not read
        raise InstallError(
            f"cannot read {path}: {error.strerror or error}; nothing was changed"
        ) from None
    except ValueError as error:
        raise InstallError(f"{path} is not valid JSON ({error}); nothing was changed") from None
    if not isinstance(data, dict):
        raise InstallError(f"{path} does not hold a JSON object; nothing was changed")
    return data


def is_ours(hook: object) -> bool:
    """A hook that runs ours: the hook module (every command `install` has written), or the
    operator CLI's `hook` command (`session-awareness hook …`, as the docs name it, and as a
    user may have written it by hand), which would otherwise run beside the installed one."""
    if not isinstance(hook, dict):
        return False
    command = str(hook.get("command", ""))
    if HOOK_MODULE in command:
        return True
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return any(
        (Path(word).name == SERVER_NAME or word == CLI_MODULE)
        and words[at + 1 : at + 2] == ["hook"]
        for at, word in enumerate(words)
    )


def _without_our_hooks(settings: dict[str, Any] | None, path: Path) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(settings or {}))
    hooks = out.get("hooks")
    if hooks is None:
        return out
    if not isinstance(hooks, dict):
        raise InstallError(f"{path}: the settings' hooks is not a JSON object; nothing was changed")
    for event in list(hooks):
        groups = hooks[event] if isinstance(hooks[event], list) else None
        if groups is None:
            continue
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                group["hooks"] = [h for h in group["hooks"] if not is_ours(h)]
                if not group["hooks"]:
                    continue
            kept.append(group)
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks:
        del out["hooks"]
    return out


def _with_hooks(
    settings: dict[str, Any], command: str, cli: AgentCli, path: Path
) -> dict[str, Any]:
    hooks = settings.setdefault("hooks", {})
    for event in cli.events:  # an event's hooks are a list of groups ({"hooks": [...]})
        if not isinstance(hooks.get(event, []), list):
            raise InstallError(
                f"{path}: the settings' hooks.{event} is not a JSON array; nothing was changed"
            )
    if cli is CLAUDE_CODE:
        hook: dict[str, Any] = {"type": "command", "command": command,
                                "timeout": HOOK_TIMEOUT_SECONDS}  # fmt: skip
    else:  # Gemini CLI: a name to enable or disable it by, the timeout in milliseconds
        hook = {"name": SERVER_NAME, "type": "command", "command": command,
                "timeout": HOOK_TIMEOUT_SECONDS * 1000}  # fmt: skip
    for event in cli.events:
        hooks.setdefault(event, []).append({"hooks": [dict(hook)]})
    return settings


def _dump(data: dict[str, Any] | None) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
