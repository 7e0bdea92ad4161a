"""What `install` warns of, one line each, after writing its entries: settings that keep them
from running (a switch the user set in the CLI's settings), and our hooks in the CLI's other
scope with another command, which would run beside them on every event (R-L9)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from session_awareness.configuration import redact
from session_awareness.infrastructure.claude_hooks import CLAUDE_CODE, AgentCli
from session_awareness.infrastructure.install_claude import (
    SERVER_NAME,
    InstallError,
    config_paths,
    is_ours,
    load_settings,
)


def switched_off(cli: AgentCli, *, project: Path | None, user: bool,
                 home: Path | None = None) -> list[str]:  # fmt: skip
    """What, in the settings the CLI reads for the installed scope, keeps our hooks or our
    server from running: one line each (`install` warns with them). The entries are
    installed all the same; these switches are the user's, to keep or to turn back."""
    paths = [config_paths(project=None, user=True, home=home, cli=cli)[0]]
    if not user:
        paths.append(config_paths(project=project, user=False, cli=cli)[0])
        if cli is CLAUDE_CODE:
            paths.append(paths[-1].with_name("settings.local.json"))
    lines: list[str] = []
    for path in dict.fromkeys(paths):
        try:
            settings = load_settings(path) or {}
        except InstallError:  # install itself says so when it is the file it writes
            continue
        lines += [f"{path}: {why}" for why in _switches(cli, settings)]
    return lines


def installed_elsewhere(cli: AgentCli, *, project: Path | None, user: bool, command: str,
                        home: Path | None = None) -> list[str]:  # fmt: skip
    """Our hooks in the other scope's settings (the user's, when installing a project; the
    working directory's project, when installing for the user) with another command than
    `command`: the CLI runs both on every event (it merges the scopes' hooks, dropping only
    identical commands), so each is recorded twice, or into two stores. One line each."""
    home = home or Path.home()
    if user:
        other, _ = config_paths(project=Path.cwd(), user=False, cli=cli)
        if other == config_paths(project=None, user=True, home=home, cli=cli)[0]:
            return []  # the working directory is the home: one file, no other scope
    else:
        other, _ = config_paths(project=None, user=True, home=home, cli=cli)
    try:
        settings = load_settings(other) or {}
    except InstallError:
        return []
    hooks = settings.get("hooks")
    groups = [g for gs in hooks.values() if isinstance(gs, list) for g in gs] if isinstance(
        hooks, dict) else []  # fmt: skip
    theirs = {str(h["command"]) for g in groups if isinstance(g, dict)
              and isinstance(g.get("hooks"), list) for h in g["hooks"] if is_ours(h)}  # fmt: skip
    return [f"{other}: holds the session-awareness hooks too, {_unlike(found, command, cli)}: "
            "both run on every event (uninstall one of them)"
            for found in sorted(theirs - {command})]  # fmt: skip


def _unlike(found: str, command: str, cli: AgentCli) -> str:
    """How an installed hook command differs from ours, in the words of its options."""

    def option(text: str, name: str) -> str | None:
        try:
            words = shlex.split(text)
        except ValueError:
            return None
        return words[words.index(name) + 1] if name in words[:-1] else None

    there = option(found, "--database-url")
    if there != option(command, "--database-url"):
        return f"recording into {redact(there) if there else 'another store'}"
    if option(found, "--agent") != option(command, "--agent"):
        return f"as agent {option(found, '--agent') or cli.default_agent}"
    return "run by another command"


def _switches(cli: AgentCli, settings: dict[str, Any]) -> list[str]:
    def listed(section: str, key: str) -> list[object] | None:
        part = settings.get(section)
        found = part.get(key) if isinstance(part, dict) else None
        return found if isinstance(found, list) else None

    if cli is CLAUDE_CODE:
        found = []
        if settings.get("disableAllHooks") is True:
            found.append("disableAllHooks is true: Claude Code runs no hooks")
        denied = settings.get("disabledMcpjsonServers")
        if isinstance(denied, list) and SERVER_NAME in denied:
            found.append(f"disabledMcpjsonServers names {SERVER_NAME}: its MCP server "
                         "does not start")  # fmt: skip
        return found
    found = []
    config = settings.get("hooksConfig")
    if isinstance(config, dict) and config.get("enabled") is False:
        found.append("hooksConfig.enabled is false: Gemini CLI runs no hooks")
    if SERVER_NAME in (listed("hooksConfig", "disabled") or []):
        found.append(f"hooksConfig.disabled names {SERVER_NAME}: its hooks do not run "
                     f"(/hooks enable {SERVER_NAME})")  # fmt: skip
    if SERVER_NAME in (listed("mcp", "excluded") or []):
        found.append(f"mcp.excluded names {SERVER_NAME}: its MCP server does not start")
    allowed = listed("mcp", "allowed")
    if allowed is not None and SERVER_NAME not in allowed:
        found.append(f"mcp.allowed does not name {SERVER_NAME}: its MCP server does not start")
    return found
