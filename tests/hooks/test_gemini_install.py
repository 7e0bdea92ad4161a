"""`install gemini-cli` / `uninstall gemini-cli`: the hooks and the MCP server entry merged
into Gemini CLI's one settings.json, never clobbering it, and the installed command works as
written (R-A1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from session_awareness.application import open_service
from tests.hooks.helpers import TIMEOUT, hook_env
from tests.hooks.test_gemini_hook import gemini_fixture, gemini_key
from tests.hooks.test_install import cli, read, write

THEIRS = {
    "general": {"vimMode": True},
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "hooks": {
        "BeforeAgent": [{"hooks": [{"type": "command", "command": "./remind.sh"}]}],
        "BeforeTool": [
            {"matcher": "write_file", "hooks": [{"type": "command", "command": "./check.sh"}]}
        ],
    },
    "mcpServers": {"docs": {"command": "docs-server", "args": ["--stdio"]}},
}
OUR_EVENTS = {"SessionStart", "BeforeAgent", "PreCompress"}


class TestProjectInstall:
    def test_install_merges_and_uninstall_restores_exactly(self, tmp_path: Path) -> None:
        """Our hooks join the project's own and our server theirs, in one settings.json, in
        Gemini CLI's shapes (a named hook, its timeout in milliseconds; a server entry with
        no `type`); installing twice changes nothing more; uninstalling leaves the file as it
        was."""
        project, url = tmp_path / "shop", f"sqlite:///{tmp_path / 'sessions.db'}"
        settings = project / ".gemini" / "settings.json"
        write(settings, THEIRS)
        args = ("install", "gemini-cli", "--project", str(project), "--database-url", url)
        outputs = []
        for _ in range(2):
            done = cli(*args, home=tmp_path, state=tmp_path / "state")
            assert (done.returncode, done.stderr) == (0, ""), done.stderr
            outputs.append(done.stdout)
        assert outputs[1] == f"{settings}: unchanged\n"
        merged = read(settings)
        assert (merged["general"], merged["security"]) == (THEIRS["general"], THEIRS["security"])
        assert merged["hooks"]["BeforeTool"] == THEIRS["hooks"]["BeforeTool"]
        assert set(merged["hooks"]) == OUR_EVENTS | {"BeforeTool"}
        first, ours = merged["hooks"]["BeforeAgent"]
        assert first == THEIRS["hooks"]["BeforeAgent"][0]
        [hook] = ours["hooks"]
        assert (hook["name"], hook["type"], hook["timeout"]) == (
            "session-awareness",
            "command",
            10_000,
        )
        assert "claude_hooks import main" in hook["command"]
        assert "gemini-cli --database-url" in hook["command"]
        assert merged["mcpServers"]["docs"] == THEIRS["mcpServers"]["docs"]
        server = merged["mcpServers"]["session-awareness"]
        assert set(server) == {"command", "args", "env"}
        assert server["command"] == sys.executable
        assert server["args"][-2:] == ["--agent", "gemini"] and url in server["args"]

        done = cli(
            "uninstall", "gemini-cli", "--project", str(project), home=tmp_path,
            state=tmp_path / "state",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert read(settings) == THEIRS

    @pytest.mark.parametrize(
        "written",
        [
            "session-awareness hook gemini-cli --database-url sqlite:////tmp/s.db",
            "/opt/venv/bin/session-awareness hook gemini-cli --agent team",
            "python -m session_awareness.infrastructure.cli hook gemini-cli",
        ],
    )
    def test_a_hook_written_by_hand_with_the_cli_is_replaced_not_doubled(
        self, written: str, tmp_path: Path
    ) -> None:
        """R-A1: a hook the user wrote as the docs name it (`session-awareness hook
        gemini-cli …`) is ours: install replaces it (it ran beside the installed one, so
        every event was recorded twice) and uninstall removes it; their own hooks stay."""
        project = tmp_path / "shop"
        settings = project / ".gemini" / "settings.json"
        theirs = {"type": "command", "command": "./remind.sh"}
        write(settings, {"hooks": {"BeforeAgent": [
            {"hooks": [{"type": "command", "command": written}]}, {"hooks": [theirs]},
        ]}})  # fmt: skip
        done = cli("install", "gemini-cli", "--project", str(project), home=tmp_path,
                   state=tmp_path / "state")  # fmt: skip
        assert done.returncode == 0, done.stderr
        commands = [h["command"] for g in read(settings)["hooks"]["BeforeAgent"]
                    for h in g["hooks"]]  # fmt: skip
        assert len(commands) == 2 and commands[0] == "./remind.sh", commands
        assert "claude_hooks import main" in commands[1]
        done = cli("uninstall", "gemini-cli", "--project", str(project), home=tmp_path,
                   state=tmp_path / "state")  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert read(settings) == {"hooks": {"BeforeAgent": [{"hooks": [theirs]}]}}

    @pytest.mark.parametrize(
        ("text", "why"),
        [
            ("{ // a comment\n}", "not valid JSON"),
            ("[]", "does not hold a JSON object"),
            ('{"hooks": []}', "hooks is not a JSON object"),
            ('{"mcpServers": ["docs"]}', "mcpServers is not a JSON object"),
        ],
    )
    def test_a_malformed_settings_file_is_left_alone(
        self, text: str, why: str, tmp_path: Path
    ) -> None:
        """A settings.json that is not the JSON object expected is reported (exit 1, saying
        nothing changed) and not touched."""
        project = tmp_path / "shop"
        settings = project / ".gemini" / "settings.json"
        settings.parent.mkdir(parents=True)
        settings.write_text(text)
        for verb in ("install", "uninstall"):
            done = cli(verb, "gemini-cli", "--project", str(project), home=tmp_path,
                       state=tmp_path / "state")  # fmt: skip
            assert done.returncode == 1 and why in done.stderr
            assert "nothing was changed" in done.stderr
            assert settings.read_text() == text

    def test_dry_run_prints_the_change_and_writes_nothing(self, tmp_path: Path) -> None:
        """--dry-run shows one diff, of the one file, and leaves the project untouched."""
        project = tmp_path / "shop"
        project.mkdir()
        done = cli("install", "gemini-cli", "--project", str(project), "--dry-run",
                   home=tmp_path, state=tmp_path / "state")  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.count("+++ " + str(project / ".gemini" / "settings.json")) == 1
        assert '"BeforeAgent"' in done.stdout and '"mcpServers"' in done.stdout
        assert list(project.iterdir()) == []


class TestUserInstall:
    def test_user_scope_writes_the_home_file_and_the_hook_runs_as_written(
        self, tmp_path: Path
    ) -> None:
        """--user writes ~/.gemini/settings.json (keeping its other keys); the hook command,
        run by a shell as Gemini CLI does, records into the one database and prints
        nothing; uninstalling restores the file."""
        home, state, url = tmp_path / "home", tmp_path / "state", f"sqlite:///{tmp_path / 'x.db'}"
        write(home / ".gemini" / "settings.json", {"ui": {"theme": "GitHub"}})
        done = cli(
            "install", "gemini-cli", "--user", "--agent", "team", "--database-url", url,
            home=home, state=state,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        settings = read(home / ".gemini" / "settings.json")
        assert settings["ui"] == {"theme": "GitHub"}
        assert settings["mcpServers"]["session-awareness"]["args"][-2:] == ["--agent", "team"]
        [group] = settings["hooks"]["SessionStart"]
        command = group["hooks"][0]["command"]

        ran = subprocess.run(
            ["/bin/bash", "-c", command],
            input=json.dumps(gemini_fixture("session_start", session_id="u1")),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
            env=hook_env(state),
        )
        assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")
        with open_service(url) as svc:
            assert [row.key for row in svc.session_rows()] == [gemini_key("u1", "team")]

        done = cli("uninstall", "gemini-cli", "--user", home=home, state=state)
        assert done.returncode == 0, done.stderr
        assert read(home / ".gemini" / "settings.json") == {"ui": {"theme": "GitHub"}}

    def test_claude_code_and_gemini_cli_installs_leave_each_other_alone(
        self, tmp_path: Path
    ) -> None:
        """Both CLIs installed in one project: each install and uninstall touches only its own
        CLI's files."""
        project, state = tmp_path / "shop", tmp_path / "state"
        project.mkdir()
        for name in ("claude-code", "gemini-cli"):
            assert cli("install", name, "--project", str(project), home=tmp_path,
                       state=state).returncode == 0  # fmt: skip
        claude = read(project / ".claude" / "settings.json"), read(project / ".mcp.json")
        assert cli("uninstall", "gemini-cli", "--project", str(project), home=tmp_path,
                   state=state).returncode == 0  # fmt: skip
        assert not (project / ".gemini" / "settings.json").exists()
        assert (read(project / ".claude" / "settings.json"), read(project / ".mcp.json")) == claude


class TestInstallAgain:
    def test_what_the_user_added_to_the_server_entry_survives_another_install(
        self, tmp_path: Path
    ) -> None:
        """R-A1: the user trusted our server (`trust`, so Gemini CLI stops asking before each
        call), bounded it (`timeout`) and gave it a variable; installing again into another
        store replaces our command and arguments and keeps those; uninstalling removes the
        entry whole."""
        project, state = tmp_path / "shop", tmp_path / "state"
        project.mkdir()
        settings = project / ".gemini" / "settings.json"
        first, second = (f"sqlite:///{tmp_path / name}" for name in ("a.db", "b.db"))
        assert cli("install", "gemini-cli", "--project", str(project), "--database-url", first,
                   home=tmp_path, state=state).returncode == 0  # fmt: skip
        edited = read(settings)
        entry = edited["mcpServers"]["session-awareness"]
        entry.update(trust=True, timeout=30_000)
        entry["env"]["HTTPS_PROXY"] = "http://proxy:3128"
        write(settings, edited)
        done = cli("install", "gemini-cli", "--project", str(project), "--database-url", second,
                   home=tmp_path, state=state)  # fmt: skip
        assert done.returncode == 0, done.stderr
        entry = read(settings)["mcpServers"]["session-awareness"]
        assert second in entry["args"] and first not in entry["args"]
        assert (entry["trust"], entry["timeout"]) == (True, 30_000)
        assert entry["env"] == {"SESSION_AWARENESS_STATE_DIR": str(state),
                                "HTTPS_PROXY": "http://proxy:3128"}  # fmt: skip
        done = cli("uninstall", "gemini-cli", "--project", str(project), home=tmp_path,
                   state=state)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert not settings.exists()
