"""The package as a host meets it: silent unless asked, its logging routes, and a SQLite
default that runs without the postgres extra. Each scenario runs in a fresh interpreter, so
nothing configured by the test run leaks in."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from session_awareness import LOGGER_NAME
from session_awareness.logs import LibraryLogger

#: A host that embeds the service and exercises every kind of call: records (a warning for a
#: refused goal summary among them), notices, queries, a refused tool call, an audit.
EMBEDDING = """
from session_awareness.application import open_service

svc = open_service(URL, waker=lambda watcher: None)
svc.open_session("agent:main:main")
svc.record_child_spawned("agent:main:subagent:w", parent="agent:main:main", run_id="r1")
svc.record_human_direct_message("agent:main:subagent:w", channel="telegram")
svc.record_goal_changed("agent:main:subagent:w", summary="not a fixed summary")
svc.drain_notices("agent:main:main")
svc.session_status("agent:main:subagent:w", changes_since=1)
svc.sessions_list()
svc.tools.call("session_status", {"changesSince": -1}, caller="agent:main:main")
assert svc.audit().clean
svc.close()
"""

#: Makes `import psycopg` (and the pool) fail, as on a machine without the postgres extra.
NO_PSYCOPG = """
import sys

class NoPsycopg:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("psycopg", "psycopg_pool", "psycopg_binary", "psycopg_c"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoPsycopg())
"""


def run_host(tmp_path: Path, *parts: str) -> subprocess.CompletedProcess[str]:
    """Run the script made of `parts` in a new interpreter, with URL naming a new file."""
    url = "sqlite:///" + str(tmp_path / "host.db")
    script = "\n".join([f"URL = {url!r}", *(textwrap.dedent(part) for part in parts)])
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


class TestSilentUnlessAsked:
    def test_an_unconfigured_host_sees_nothing_on_stdout_or_stderr(self, tmp_path: Path) -> None:
        """Every call, a warning among them, writes nothing the host did not write itself."""
        result = run_host(tmp_path, EMBEDDING, "print('host output')")
        assert result.returncode == 0, result.stderr
        assert result.stdout == "host output\n"
        assert result.stderr == ""

    def test_a_host_that_imports_logging_without_configuring_it_sees_nothing(
        self, tmp_path: Path
    ) -> None:
        """The library imports `logging` only when an event goes to it; a host that imported
        it but configured nothing still sees no warning on stderr (the `NullHandler` is in
        place before the first record, so logging's last-resort handler never runs)."""
        result = run_host(tmp_path, "import logging", EMBEDDING, "print('host output')")
        assert result.returncode == 0, result.stderr
        assert result.stdout == "host output\n"
        assert result.stderr == ""

    def test_logging_basic_config_shows_the_events_with_their_fields(self, tmp_path: Path) -> None:
        """With stdlib logging configured, each event is a record of the `session_awareness`
        logger at its level: the stable name, then key=value fields."""
        setup = """
        import logging
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
        """
        result = run_host(tmp_path, setup, EMBEDDING)
        assert result.returncode == 0, result.stderr
        assert result.stdout == ""
        lines = result.stderr.splitlines()
        assert any(
            line.startswith("INFO session_awareness signal_recorded ")
            and "kind=human_direct_message" in line
            and "session_key=agent:main:subagent:w" in line
            for line in lines
        )
        assert any(
            line.startswith("WARNING session_awareness signal_rejected ")
            and "kind=goal_changed" in line
            for line in lines
        )

    def test_basic_config_at_its_default_level_shows_warnings_not_info(
        self, tmp_path: Path
    ) -> None:
        """`logging.basicConfig()` at its default level shows the warning, not the info."""
        result = run_host(tmp_path, "import logging\nlogging.basicConfig()", EMBEDDING)
        assert result.returncode == 0, result.stderr
        assert "signal_rejected" in result.stderr
        assert "signal_recorded" not in result.stderr

    def test_a_host_structlog_configuration_renders_the_events_as_json(
        self, tmp_path: Path
    ) -> None:
        """A host that configured structlog gets the library's events through it, fields
        intact, here as JSON lines on stdout."""
        setup = """
        import structlog
        structlog.configure(processors=[structlog.processors.add_log_level,
                                        structlog.processors.JSONRenderer()])
        """
        result = run_host(tmp_path, setup, EMBEDDING)
        assert result.returncode == 0, result.stderr
        events = [json.loads(line) for line in result.stdout.splitlines()]
        [recorded] = [e for e in events if e["event"] == "signal_recorded" and e["sequence"] == 2]
        assert recorded["session_key"] == "agent:main:subagent:w"
        assert recorded["level"] == "info"
        assert result.stderr == ""

    def test_structlog_half_imported_by_another_thread_is_not_a_configuration(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """While one thread imports structlog, its module sits in `sys.modules` without its
        names; an event logged by another thread then takes the stdlib route, not an
        `AttributeError`."""
        records: list[logging.LogRecord] = []
        handler = logging.Handler()
        handler.emit = records.append  # type: ignore[method-assign]
        stdlib = logging.getLogger(LOGGER_NAME)
        # `setLevel`, not the attribute: the logger caches its `isEnabledFor` answers and only
        # `setLevel` clears them; an earlier test may have asked at the level it had then.
        level = stdlib.level
        stdlib.setLevel(logging.INFO)
        stdlib.addHandler(handler)
        logger = LibraryLogger()
        logger._stdlib_route()  # built with the real structlog
        monkeypatch.setitem(sys.modules, "structlog", types.ModuleType("structlog"))
        try:
            logger.info("half_imported", field=1)
        finally:
            stdlib.removeHandler(handler)
            stdlib.setLevel(level)
        assert [r.getMessage() for r in records] == ["half_imported field=1"]


class TestWithoutThePostgresExtra:
    def test_the_sqlite_default_works_without_psycopg(self, tmp_path: Path) -> None:
        """The embedding API, the tools, the audit and the CLI run on SQLite with psycopg
        unimportable, and never import it."""
        cli = """
        from session_awareness.infrastructure.cli import main
        assert main(["status", "agent:main:subagent:w", "--json", "--database-url", URL]) == 0
        assert main(["audit", "--json", "--database-url", URL]) == 0
        assert not [m for m in sys.modules if m.startswith("psycopg")], "psycopg was imported"
        """
        result = run_host(tmp_path, NO_PSYCOPG, EMBEDDING, cli)
        assert result.returncode == 0, result.stderr
        assert '"stateVersion": 2' in result.stdout
        assert '"clean": true' in result.stdout

    def test_a_postgresql_url_without_psycopg_says_which_extra_to_install(
        self, tmp_path: Path
    ) -> None:
        """Opening PostgreSQL without the extra is a ConfigurationError naming it, with the
        password still hidden."""
        attempt = """
        from session_awareness.application import ConfigurationError, open_service
        try:
            open_service("postgresql://app:s3cret@localhost:5432/agents")
        except ConfigurationError as error:
            print(error)
        """
        result = run_host(tmp_path, NO_PSYCOPG, attempt)
        assert result.returncode == 0, result.stderr
        assert "pip install 'session-awareness[postgres]'" in result.stdout
        assert "s3cret" not in result.stdout
