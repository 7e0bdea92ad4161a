"""`install` / `uninstall` change a CLI's configuration where it lives and as it was kept: a
private file stays private, a file kept elsewhere behind a symbolic link (a dotfiles
checkout) is changed there, the link kept, and its text is UTF-8 whatever the locale (R-A1)."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import pytest

from tests.hooks.helpers import TIMEOUT, hook_env
from tests.hooks.test_install import CLI, cli, read

#: Each CLI's user-scope files: the hooks' settings, and the MCP servers'.
USER_FILES = {
    "claude-code": (".claude/settings.json", ".claude.json"),
    "gemini-cli": (".gemini/settings.json",),
}
#: What a user's own file holds that is nobody else's to read: a server's token.
THEIRS = {"mcpServers": {"tracker": {"command": "tracker-mcp", "env": {"TOKEN": "s3cret"}}}}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("agent_cli", sorted(USER_FILES))
class TestUserFiles:
    def test_a_private_file_stays_private_through_install_and_uninstall(
        self, agent_cli: str, tmp_path: Path
    ) -> None:
        """R-A1: a user's 0600 settings (Claude Code keeps ~/.claude.json so; an MCP server's
        env may hold a token) are still 0600 after `install --user` and after `uninstall`,
        not widened to the umask's 0644 of a new file."""
        home, state = tmp_path / "home", tmp_path / "state"
        files = [home / name for name in USER_FILES[agent_cli]]
        for path in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(THEIRS))
            path.chmod(0o600)
        url = f"sqlite:///{tmp_path / 'x.db'}"
        done = cli("install", agent_cli, "--user", "--database-url", url, home=home, state=state)
        assert done.returncode == 0, done.stderr
        assert {str(p): mode(p) for p in files} == {str(p): 0o600 for p in files}
        assert "session-awareness" in read(files[-1])["mcpServers"]
        done = cli("uninstall", agent_cli, "--user", home=home, state=state)
        assert done.returncode == 0, done.stderr
        assert {str(p): (mode(p), read(p)) for p in files} == {
            str(p): (0o600, THEIRS) for p in files
        }

    def test_a_linked_file_is_changed_where_it_lives_and_stays_linked(
        self, agent_cli: str, tmp_path: Path
    ) -> None:
        """R-A1: settings kept in a dotfiles checkout and linked into the home get our
        entries in the checkout, the links kept; `uninstall` restores the checkout's files
        and keeps the links, even where nothing else was in them."""
        home, state, dotfiles = tmp_path / "home", tmp_path / "state", tmp_path / "dotfiles"
        dotfiles.mkdir()
        links = [home / name for name in USER_FILES[agent_cli]]
        kept = {}
        for number, link in enumerate(links):
            target = dotfiles / f"file-{number}.json"
            target.write_text(json.dumps(THEIRS) if number else "{}")
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(target)
            kept[link] = (target, read(target))
        url = f"sqlite:///{tmp_path / 'x.db'}"
        done = cli("install", agent_cli, "--user", "--database-url", url, home=home, state=state)
        assert done.returncode == 0, done.stderr
        for link, (target, before) in kept.items():
            assert link.is_symlink() and link.resolve() == target
            assert read(target) != before
        assert sorted(p.name for p in dotfiles.iterdir()) == sorted(
            t.name for t, _ in kept.values()
        )  # no scratch file left beside them
        done = cli("uninstall", agent_cli, "--user", home=home, state=state)
        assert done.returncode == 0, done.stderr
        for link, (target, before) in kept.items():
            assert link.is_symlink() and link.resolve() == target
            assert read(target) == before


def test_a_settings_file_is_read_and_written_as_utf8_whatever_the_locale(tmp_path: Path) -> None:
    """R-A1: under an ASCII locale (`LC_ALL=C`, no UTF-8 mode), a settings file holding
    UTF-8 text (a theme named `Café`) is merged, not refused as 'not valid JSON': JSON files
    are UTF-8, and both CLIs read them so; the text comes back as it was."""
    project, state = tmp_path / "shop", tmp_path / "state"
    settings = project / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    theirs = {"ui": {"theme": "Café ☕"}}
    settings.write_text(json.dumps(theirs, ensure_ascii=False), encoding="utf-8")
    ascii_locale = {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    done = subprocess.run(
        [*CLI, "install", "gemini-cli", "--project", str(project)],
        capture_output=True, text=True, timeout=TIMEOUT, check=False,
        env={**hook_env(state), "HOME": str(tmp_path), **ascii_locale},
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert json.loads(settings.read_text(encoding="utf-8"))["ui"] == theirs["ui"]
