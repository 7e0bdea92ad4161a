"""`install` into settings that switch our hooks or our server off: the entries are written
(the switch is the user's to keep), and install says, one line each, what will keep them
from running, instead of a silent `updated` for hooks that never run (R-L9, R-A1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.hooks.test_install import cli, read, write

GEMINI = ".gemini/settings.json"
CLAUDE = ".claude/settings.json"

SWITCHES = [
    # (the CLI, the settings file under home or project, its switch, the warning's words)
    ("gemini-cli", "user", {"hooksConfig": {"enabled": False}},
     "hooksConfig.enabled is false: Gemini CLI runs no hooks"),
    ("gemini-cli", "user", {"hooksConfig": {"disabled": ["session-awareness"]}},
     "hooksConfig.disabled names session-awareness: its hooks do not run "
     "(/hooks enable session-awareness)"),
    ("gemini-cli", "project", {"mcp": {"excluded": ["session-awareness"]}},
     "mcp.excluded names session-awareness: its MCP server does not start"),
    ("gemini-cli", "user", {"mcp": {"allowed": ["docs"]}},
     "mcp.allowed does not name session-awareness: its MCP server does not start"),
    ("claude-code", "user", {"disableAllHooks": True},
     "disableAllHooks is true: Claude Code runs no hooks"),
    ("claude-code", "project", {"disabledMcpjsonServers": ["session-awareness"]},
     "disabledMcpjsonServers names session-awareness: its MCP server does not start"),
]  # fmt: skip


@pytest.mark.parametrize(("agent_cli", "where", "switch", "words"), SWITCHES)
def test_install_names_a_switch_that_keeps_its_entries_from_running(
    agent_cli: str, where: str, switch: dict[str, Any], words: str, tmp_path: Path
) -> None:
    """R-L9: Gemini CLI's `hooksConfig` (what `/hooks disable session-awareness` writes)
    and `mcp` lists, Claude Code's `disableAllHooks` and `disabledMcpjsonServers`, in the
    user's or the project's settings, are named in one warning line on stderr; install
    still exits 0, writes its entries, and keeps the switch."""
    home, project, state = tmp_path / "home", tmp_path / "shop", tmp_path / "state"
    project.mkdir()
    settings = (home if where == "user" else project) / (GEMINI if agent_cli == "gemini-cli"
                                                         else CLAUDE)  # fmt: skip
    write(settings, switch)
    done = cli("install", agent_cli, "--project", str(project), "--database-url",
               f"sqlite:///{tmp_path / 'x.db'}", home=home, state=state)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [f"warning: {settings}: {words}"]
    written = read(settings)
    assert {k: written[k] for k in switch} == switch
    ours = project / (GEMINI if agent_cli == "gemini-cli" else CLAUDE)
    assert "claude_hooks import main" in json.dumps(read(ours)["hooks"])


def test_install_into_settings_that_switch_nothing_off_says_nothing(tmp_path: Path) -> None:
    """R-L9: hooks enabled, other hooks disabled, our server allowed: no warning."""
    home, project = tmp_path / "home", tmp_path / "shop"
    project.mkdir()
    write(home / GEMINI, {
        "hooksConfig": {"enabled": True, "disabled": ["remind"]},
        "mcp": {"allowed": ["docs", "session-awareness"], "excluded": ["other"]},
    })  # fmt: skip
    done = cli("install", "gemini-cli", "--project", str(project), home=home,
               state=tmp_path / "state")  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
