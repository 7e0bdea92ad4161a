"""`session-awareness console`: refused beyond loopback without a token (R-O1)."""

from __future__ import annotations

import pytest

from session_awareness.infrastructure.cli import main
from session_awareness.infrastructure.cli.console import TOKEN_ENV
from session_awareness.infrastructure.console import guard


class TestConsoleCommand:
    @pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "::"])  # noqa: S104 -- the point
    def test_refuses_to_listen_beyond_loopback_without_a_token(
        self, host: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-O1: exit 2 before anything is opened or bound, naming both ways to give one."""
        monkeypatch.delenv(TOKEN_ENV, raising=False)
        code = main(["console", "--host", host, "--database-url", "sqlite:///nowhere.db"])
        assert code == 2
        error = capsys.readouterr().err
        assert "--token" in error and TOKEN_ENV in error

    def test_names_the_same_environment_variable_as_the_guard(self) -> None:
        """R-O1: `--help` needs none of the console's imports, so the name is written twice."""
        assert TOKEN_ENV == guard.TOKEN_ENV
