"""The documents a clone holds: every rule id cited anywhere is defined in docs/rules.md, and
every relative link of the README and docs/ resolves."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from session_awareness.application import open_service

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RULES = ROOT / "docs" / "rules.md"
RULE_ID = re.compile(r"\bR-[A-Z]\d+\b")
#: `[text](target)` with a relative target (no scheme, no pure anchor).
LINK = re.compile(r"\]\((?![a-z]+:|#)([^)\s]+)\)")


def documents() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


def cited_ids() -> dict[str, set[str]]:
    """Each rule id and the files (documents and tests) that cite it."""
    cited: dict[str, set[str]] = {}
    for path in [*documents(), *sorted((ROOT / "tests").rglob("*.py"))]:
        for rule in RULE_ID.findall(path.read_text()):
            cited.setdefault(rule, set()).add(str(path.relative_to(ROOT)))
    return cited


class TestRules:
    def test_every_cited_rule_id_is_defined_in_the_rules(self) -> None:
        """A rule id in the README, CHANGELOG, docs or a test names a rule of docs/rules.md."""
        defined = set(
            re.findall(r'<a id="(r-[a-z]\d+)"></a>\*\*(R-[A-Z]\d+)\.\*\*', RULES.read_text())
        )
        assert all(anchor == rule.lower() for anchor, rule in defined)
        undefined = {
            rule: files
            for rule, files in cited_ids().items()
            if rule.lower() not in {a for a, _ in defined}
        }
        assert undefined == {}

    def test_every_rule_is_defined_exactly_once(self) -> None:
        """The families and their counts: K 3, L 8, W 7, N 7, S 5, R 3, C 2, E 3, U 5, T 3."""
        ids = re.findall(r"\*\*(R-[A-Z]\d+)\.\*\*", RULES.read_text())
        families = {
            "K": 3, "L": 8, "W": 7, "N": 7, "S": 5, "R": 3, "C": 2, "E": 3, "U": 5, "T": 3,
        }  # fmt: skip
        expected = [f"R-{f}{n}" for f, count in families.items() for n in range(1, count + 1)]
        assert sorted(ids) == sorted(expected)


class TestLinks:
    def test_every_relative_link_resolves_in_a_clone(self) -> None:
        """No link of the README or docs/ points outside the repository or at nothing."""
        broken = []
        for path in documents():
            for target in LINK.findall(path.read_text()):
                resolved = (path.parent / target.split("#")[0]).resolve()
                if not resolved.is_relative_to(ROOT) or not resolved.exists():
                    broken.append(f"{path.relative_to(ROOT)}: {target}")
        assert broken == []

    def test_the_readme_names_no_file_outside_the_repository(self) -> None:
        """The README points at docs/rules.md for the rules, not at a file a clone lacks."""
        text = (ROOT / "README.md").read_text()
        assert "../shared" not in text
        assert "docs/rules.md" in text


@contextlib.contextmanager
def stdlib_logging() -> Iterator[None]:
    """The library's events on the standard library's logger, as for a host that has not
    configured structlog (another test may have), then the configuration as it was."""
    saved, was = structlog.get_config(), structlog.is_configured()
    structlog.reset_defaults()
    try:
        yield
    finally:
        if was:
            structlog.configure(**saved)


class TestEmbeddingExample:
    def test_the_readmes_embedding_example_runs_and_its_strict_test_passes(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        """R-E1: the README's "Embedding it" code runs as written, the WARNING lines it
        shows are what a typo logs, and its strict test passes."""
        section = README.read_text().split("## Embedding it", 1)[1].split("\n## ", 1)[0]
        blocks = re.findall(r"```python\n(.*?)```", section, re.S)
        [shown] = re.findall(r"```text\n(.*?)```", section, re.S)
        monkeypatch.chdir(tmp_path)
        scope: dict[str, Any] = {}
        for block in blocks:
            exec(compile(block, "README.md", "exec"), scope)  # noqa: S102 -- the README's own code
        (tmp_path / "strict").mkdir()
        scope["test_a_typo_in_the_parent_fails_the_test"](tmp_path / "strict")
        caplog.clear()
        caplog.set_level(logging.WARNING, logger="session_awareness")
        with stdlib_logging(), open_service("sqlite:///:memory:") as svc:
            svc.open_session("agent:main:main")
            svc.record_goal_changed("agent:main:mian", summary="goal updated")
            worker = "agent:main:subagent:worker"
            svc.record_child_spawned(worker, parent="agent:main:mian", run_id="r1")
        logged = [f"{r.levelname}:{r.name}:{r.getMessage()}" for r in caplog.records]
        assert logged == shown.strip().splitlines()
