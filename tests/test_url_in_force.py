"""Which database is in force: one decision (`session_awareness.configuration`) that the
library, the operator CLI, the hook relay and the installer share."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from session_awareness.configuration import DATABASE_URL_ENV, DEFAULT_DATABASE_URL, url_in_force
from session_awareness.infrastructure.claude_relay import effective_url
from session_awareness.infrastructure.cli.common import database_url
from session_awareness.infrastructure.install_claude import absolute_url

ROOT = Path(__file__).resolve().parents[1]
#: What reads a database URL, and what hides its password.
MOVED = ("environment_for", "sqlite_environment", "redact", "secret_of")


class TestTheUrlInForce:
    def test_the_given_url_wins_then_the_environment_then_the_default(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
        assert url_in_force(None) == DEFAULT_DATABASE_URL
        assert url_in_force(None, default=None) is None
        monkeypatch.setenv(DATABASE_URL_ENV, "sqlite:///from-env.db")
        assert url_in_force(None) == "sqlite:///from-env.db"
        assert url_in_force("sqlite:///given.db") == "sqlite:///given.db"

    def test_every_entry_point_reads_the_environment_alike(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """The CLI, the hook relay and the installer take the variable as the library does;
        only their defaults differ (the installer's is a file in the state directory)."""
        url = f"sqlite:///{tmp_path / 'env.db'}"
        monkeypatch.setenv(DATABASE_URL_ENV, url)
        assert database_url(None) == effective_url(None) == absolute_url(None) == url
        monkeypatch.delenv(DATABASE_URL_ENV)
        assert database_url(None) == DEFAULT_DATABASE_URL
        assert effective_url(None) is None
        assert absolute_url(None).startswith("sqlite:////")

    def test_the_variable_is_spelled_in_one_module(self) -> None:
        """No product module writes the variable's name but the configuration's."""
        spelled = [
            str(path.relative_to(ROOT))
            for folder in ("domain", "application", "infrastructure", "src")
            for path in (ROOT / folder).rglob("*.py")
            if '"SESSION_AWARENESS_DATABASE_URL"' in path.read_text()
        ]
        assert spelled == ["src/session_awareness/configuration.py"]

    def test_a_url_is_read_and_redacted_in_one_module(self) -> None:
        """R-E1: reading a URL into the store's environment and hiding its password are
        defined once, in the configuration; the facade, the CLI and the PostgreSQL settings
        use that one (a second `redact` could forget a way of writing a password)."""
        defined = [
            f"{path.relative_to(ROOT)}:{name}"
            for folder in ("domain", "application", "infrastructure", "src")
            for path in sorted((ROOT / folder).rglob("*.py"))
            for name in MOVED
            if re.search(rf"^def {name}\(url", path.read_text(), flags=re.MULTILINE)
        ]
        here = "src/session_awareness/configuration.py"
        assert defined == [f"{here}:{name}" for name in MOVED]
