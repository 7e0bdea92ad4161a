"""Real agent CLIs from the npm registry for the slow end-to-end tests: a pinned version,
installed once into a cache directory (`$SESSION_AWARENESS_TEST_CACHE`, else
`~/.cache/session-awareness-tests`), run with node. Outside CI a machine without node or npm
skips these tests; under CI (`CI` set) they fail instead, so they never skip silently there."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

CACHE_ENV = "SESSION_AWARENESS_TEST_CACHE"
NODE_MAJOR = 20


def unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"an agent CLI end-to-end test cannot run under CI: {why}")
    pytest.skip(why)


def npm_cli(package: str, version: str, entry: str) -> list[str]:
    """The command that runs `package@version`'s `entry` (a path inside the package) with
    node, installing the package first if the cache lacks it."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        unavailable(f"node and npm are needed to install and run {package}")
    assert node is not None and npm is not None
    found = subprocess.run([node, "--version"], capture_output=True, text=True, check=False)
    major = re.match(r"v(\d+)\.", found.stdout)
    if major is None or int(major.group(1)) < NODE_MAJOR:
        unavailable(f"{package} needs node >= {NODE_MAJOR}, not {found.stdout.strip()!r}")
    base = os.environ.get(CACHE_ENV) or str(Path.home() / ".cache" / "session-awareness-tests")
    prefix = Path(base) / f"{package.replace('/', '-').lstrip('@')}-{version}"
    script = prefix / "node_modules" / package / entry
    if not script.exists():
        done = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
             f"{package}@{version}"],
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        assert done.returncode == 0 and script.exists(), done.stderr[-2000:]
    return [node, str(script)]
