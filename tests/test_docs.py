"""The documents a clone holds: every rule id cited anywhere is defined in docs/rules.md, and
every relative link of the README and docs/ resolves."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
        """The families and their counts: K 3, L 8, W 7, N 7, S 5, R 3, C 2, U 5, T 4."""
        ids = re.findall(r"\*\*(R-[A-Z]\d+)\.\*\*", RULES.read_text())
        families = {"K": 3, "L": 8, "W": 7, "N": 7, "S": 5, "R": 3, "C": 2, "U": 5, "T": 4}
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
