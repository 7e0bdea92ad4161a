"""`install claude-code` / `uninstall claude-code`: merged into Claude Code's files, never
clobbering them, and the installed commands work as written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from session_awareness.application import open_service
from tests.hooks.helpers import TIMEOUT, fixture, hook_env, lead_key

CLI = [sys.executable, "-m", "session_awareness.infrastructure.cli"]
THEIRS_SETTINGS = {
    "permissions": {"allow": ["Bash(make test)"]},
    "hooks": {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "./remind.sh"}]}],
        "Stop": [{"matcher": "", "hooks": [{"type": "command", "command": "./notify.sh"}]}],
    },
}
THEIRS_MCP = {"mcpServers": {"docs": {"type": "stdio", "command": "docs-server", "args": []}}}


#: Runs the CLI with `import mcp` failing, as in an installation without the mcp extra.
CLI_WITHOUT_MCP = [
    sys.executable,
    "-c",
    """
import sys

class NoMcp:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "mcp":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoMcp())
from session_awareness.infrastructure.cli import main
raise SystemExit(main())
""",
]


def cli(
    *args: str, home: Path, state: Path, command: list[str] = CLI
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        env={**hook_env(state), "HOME": str(home)},
    )


def write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))


def read(path: Path) -> Any:
    return json.loads(path.read_text())


class TestProjectInstall:
    def test_install_merges_and_uninstall_restores_exactly(self, tmp_path: Path) -> None:
        """Our hooks join the project's own, our server joins theirs; installing twice changes
        nothing more; uninstalling leaves the files as they were."""
        project, url = tmp_path / "shop", f"sqlite:///{tmp_path / 'sessions.db'}"
        settings, mcp_json = project / ".claude" / "settings.json", project / ".mcp.json"
        write(settings, THEIRS_SETTINGS)
        write(mcp_json, THEIRS_MCP)
        args = ("install", "claude-code", "--project", str(project), "--database-url", url)
        for _ in range(2):
            done = cli(*args, home=tmp_path, state=tmp_path / "state")
            assert done.returncode == 0, done.stderr
        merged = read(settings)
        assert merged["permissions"] == THEIRS_SETTINGS["permissions"]
        assert merged["hooks"]["Stop"] == THEIRS_SETTINGS["hooks"]["Stop"]
        prompt_hooks = [
            h["command"] for g in merged["hooks"]["UserPromptSubmit"] for h in g["hooks"]
        ]
        assert prompt_hooks[0] == "./remind.sh" and len(prompt_hooks) == 2
        assert set(merged["hooks"]) == {
            "UserPromptSubmit",
            "Stop",
            "SessionStart",
            "PreCompact",
            "SubagentStart",
            "SubagentStop",
        }
        servers = read(mcp_json)["mcpServers"]
        assert servers["docs"] == THEIRS_MCP["mcpServers"]["docs"]
        ours = servers["session-awareness"]
        assert ours["command"] == sys.executable and url in ours["args"]

        done = cli(
            "uninstall",
            "claude-code",
            "--project",
            str(project),
            home=tmp_path,
            state=tmp_path / "state",
        )
        assert done.returncode == 0, done.stderr
        assert (read(settings), read(mcp_json)) == (THEIRS_SETTINGS, THEIRS_MCP)

    def test_dry_run_prints_the_change_and_writes_nothing(self, tmp_path: Path) -> None:
        """--dry-run shows a diff of each file and leaves the project untouched."""
        project = tmp_path / "shop"
        project.mkdir()
        done = cli(
            "install",
            "claude-code",
            "--project",
            str(project),
            "--dry-run",
            home=tmp_path,
            state=tmp_path / "state",
        )
        assert done.returncode == 0, done.stderr
        assert "+++ " + str(project / ".mcp.json") in done.stdout
        assert '"UserPromptSubmit"' in done.stdout
        assert list(project.iterdir()) == []

    def test_a_file_that_is_not_json_is_left_alone(self, tmp_path: Path) -> None:
        """A settings file that does not parse is reported and not overwritten."""
        project = tmp_path / "shop"
        settings = project / ".claude" / "settings.json"
        settings.parent.mkdir(parents=True)
        settings.write_text("{ // a comment\n}")
        done = cli(
            "install",
            "claude-code",
            "--project",
            str(project),
            home=tmp_path,
            state=tmp_path / "state",
        )
        assert done.returncode != 0 and "not valid JSON" in done.stderr
        assert settings.read_text() == "{ // a comment\n}"
        assert not (project / ".mcp.json").exists()

    def test_a_project_directory_that_does_not_exist_is_bad_input_and_nothing_is_created(
        self, tmp_path: Path
    ) -> None:
        """A mistyped --project is a usage error (exit 2, one line) that creates no directory."""
        missing = tmp_path / "shpo"
        for verb in ("install", "uninstall"):
            done = cli(
                verb,
                "claude-code",
                "--project",
                str(missing),
                home=tmp_path,
                state=tmp_path / "state",
            )
            assert (done.returncode, done.stdout) == (2, "")
            assert f"Directory '{missing}' does not exist" in done.stderr
            assert done.stderr.count("\n") == 1
        assert not missing.exists()

    def test_without_the_mcp_extra_install_warns_and_still_installs_the_hooks(
        self, tmp_path: Path
    ) -> None:
        """The MCP server entry cannot start without the mcp extra: one warning line on stderr
        names the extra; the hooks and the entry are installed all the same."""
        project = tmp_path / "shop"
        project.mkdir()
        done = cli(
            "install",
            "claude-code",
            "--project",
            str(project),
            home=tmp_path,
            state=tmp_path / "state",
            command=CLI_WITHOUT_MCP,
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr == (
            "warning: the MCP server entry needs the mcp extra: "
            "pip install 'session-awareness[mcp]'\n"
        )
        assert "SessionStart" in read(project / ".claude" / "settings.json")["hooks"]
        assert "session-awareness" in read(project / ".mcp.json")["mcpServers"]

    def test_with_the_mcp_extra_install_prints_no_warning(self, tmp_path: Path) -> None:
        """Where the extra is installed, installing writes nothing to stderr."""
        project = tmp_path / "shop"
        project.mkdir()
        done = cli(
            "install", "claude-code", "--project", str(project), home=tmp_path,
            state=tmp_path / "state",
        )  # fmt: skip
        assert (done.returncode, done.stderr) == (0, "")


class TestUserInstall:
    def test_user_scope_writes_the_home_files_and_the_hook_runs_as_written(
        self, tmp_path: Path
    ) -> None:
        """--user writes ~/.claude/settings.json and ~/.claude.json (keeping its other keys);
        the hook command, run by a shell as Claude Code does, records into the one database."""
        home, state, url = tmp_path / "home", tmp_path / "state", f"sqlite:///{tmp_path / 'x.db'}"
        write(home / ".claude.json", {"numStartups": 3, "projects": {}})
        done = cli(
            "install", "claude-code", "--user", "--database-url", url, home=home, state=state
        )
        assert done.returncode == 0, done.stderr
        config = read(home / ".claude.json")
        assert config["numStartups"] == 3 and "session-awareness" in config["mcpServers"]
        [group] = read(home / ".claude" / "settings.json")["hooks"]["SessionStart"]
        command = group["hooks"][0]["command"]

        ran = subprocess.run(
            ["/bin/sh", "-c", command],
            input=json.dumps(fixture("session_start", session_id="u1")),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
            env=hook_env(state),
        )
        assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")
        with open_service(url) as svc:
            assert [row.key for row in svc.session_rows()] == [lead_key("u1")]

        done = cli("uninstall", "claude-code", "--user", home=home, state=state)
        assert done.returncode == 0, done.stderr
        assert read(home / ".claude.json") == {"numStartups": 3, "projects": {}}
        assert not (home / ".claude" / "settings.json").exists()


class TestTheInstalledHookCommand:
    def test_a_project_file_named_like_a_module_the_hook_imports_changes_nothing(
        self, tmp_path: Path
    ) -> None:
        """The hook runs in the user's project, whose files are not the hook's code: a
        `json.py` in the working directory does not stand in for the module (the command
        keeps the working directory off `sys.path`), and the event is recorded (R-A1)."""
        home, state, url = tmp_path / "home", tmp_path / "state", f"sqlite:///{tmp_path / 'x.db'}"
        done = cli(
            "install", "claude-code", "--user", "--database-url", url, home=home, state=state
        )
        assert done.returncode == 0, done.stderr
        [group] = read(home / ".claude" / "settings.json")["hooks"]["SessionStart"]
        project = tmp_path / "project"
        project.mkdir()
        (project / "json.py").write_text("raise SystemExit('the project json.py was imported')\n")

        ran = subprocess.run(
            ["/bin/sh", "-c", group["hooks"][0]["command"]],
            input=json.dumps(fixture("session_start", session_id="p1")),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
            env=hook_env(state),
            cwd=project,
        )
        assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")
        with open_service(url) as svc:
            assert [row.key for row in svc.session_rows()] == [lead_key("p1")]
