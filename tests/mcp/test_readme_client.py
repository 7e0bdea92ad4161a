"""The README's MCP client runs as written, against the demo's store, through the official SDK's
client and the installed `session-awareness` command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readmes_mcp_client_lists_the_tools_drains_and_reconciles(tmp_path: Path) -> None:
    """R-N3, R-S1: run after the demo, the snippet lists the tools, drains the manager's
    follow-up notice and prints the researcher's changes since 1, as the README says."""
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    demo = [sys.executable, "-m", "session_awareness.infrastructure.cli", "demo"]
    subprocess.run(
        [*demo, "--database-url", "sqlite:///demo.db"],
        cwd=tmp_path, env=env, capture_output=True, check=True, timeout=120,
    )  # fmt: skip
    section = README.read_text().split("## An MCP client", 1)[1].split("\n## ", 1)[0]
    [snippet] = re.findall(r"```python\n(.*?)```", section, re.S)
    done = subprocess.run(
        [sys.executable, "-c", snippet],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    tools, notices, status = done.stdout.splitlines()
    assert "session_status" in tools and "session_notices" in tools
    assert '"drained": true' in notices
    assert "changed (other actor)" in notices
    assert '"stateVersion": 3' in status and '"sequence": 2' in status
