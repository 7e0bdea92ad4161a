"""`install` says, one line each, what will keep its entries from working as one: a
setting that switches our hooks or our server off (the entries are written, the switch is
the user's to keep), and our hooks in the CLI's other scope with another command (both run
on every event), instead of a silent `updated` (R-L9, R-A1)."""

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


@pytest.mark.parametrize("agent_cli", ["gemini-cli", "claude-code"])
class TestInstalledInTheOtherScope:
    def test_a_project_install_names_the_users_hooks_that_record_elsewhere(
        self, agent_cli: str, tmp_path: Path
    ) -> None:
        """R-L9: installed for the user into one store, then for a project into another:
        the CLI runs both scopes' hooks (only identical commands are merged), so every
        event would be recorded in both stores; the project's install names the user's
        file and its store (its password hidden) in one line, and installs all the same."""
        home, project, state = tmp_path / "home", tmp_path / "shop", tmp_path / "state"
        project.mkdir()
        theirs = "postgresql://me:pw@db.example/sessions"
        done = cli("install", agent_cli, "--user", "--database-url", theirs, home=home,
                   state=state)  # fmt: skip
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
        url = f"sqlite:///{tmp_path / 'x.db'}"
        done = cli("install", agent_cli, "--project", str(project), "--database-url", url,
                   home=home, state=state)  # fmt: skip
        assert done.returncode == 0, done.stderr
        user = home / (GEMINI if agent_cli == "gemini-cli" else CLAUDE)
        assert done.stderr.splitlines() == [
            f"warning: {user}: holds the session-awareness hooks too, recording into "
            "postgresql://me:***@db.example/sessions: both run on every event (uninstall "
            "one of them)"
        ]
        ours = project / (GEMINI if agent_cli == "gemini-cli" else CLAUDE)
        assert url in json.dumps(read(ours)["hooks"])

    def test_the_same_hooks_in_both_scopes_or_another_agent(
        self, agent_cli: str, tmp_path: Path
    ) -> None:
        """R-L9: the same command in both scopes is merged into one by the CLI: no
        warning; another `--agent` records each event as another session: named."""
        home, project, state = tmp_path / "home", tmp_path / "shop", tmp_path / "state"
        project.mkdir()
        url = f"sqlite:///{tmp_path / 'x.db'}"
        for scope in (("--user",), ("--project", str(project))):
            done = cli("install", agent_cli, *scope, "--database-url", url, home=home,
                       state=state)  # fmt: skip
            assert (done.returncode, done.stderr) == (0, ""), done.stderr
        done = cli("install", agent_cli, "--project", str(project), "--database-url", url,
                   "--agent", "team", home=home, state=state)  # fmt: skip
        assert done.returncode == 0, done.stderr
        [line] = done.stderr.splitlines()
        default = "gemini" if agent_cli == "gemini-cli" else "claude"
        assert f"holds the session-awareness hooks too, as agent {default}: " in line
