"""The documents a clone holds: every rule id cited anywhere is defined in docs/rules.md, and
every relative link of the README and docs/ resolves; every ADR has a status, is short and is
in the index."""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import re
import shlex
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import structlog
import structlog.testing

from session_awareness.application import open_service
from session_awareness.testing import FakeClock

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
        """The families and their counts: K 3, L 10, W 7, N 8, S 5, R 3, C 2, E 1, U 5, T 4, M 4,
        O 2, A 1."""
        ids = re.findall(r"\*\*(R-[A-Z]\d+)\.\*\*", RULES.read_text())
        families = {
            "K": 3, "L": 10, "W": 7, "N": 8, "S": 5, "R": 3, "C": 2, "E": 1, "U": 5, "T": 4, "M": 4,
            "O": 2, "A": 1,
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


class TestTheApiPage:
    """docs/api.md is checked against the code, so it cannot drift from it."""

    PAGE = ROOT / "docs" / "api.md"

    def test_every_parameter_the_page_names_is_the_calls_own(self) -> None:
        """A call written out as `name(parameters)` names only parameters the method (or
        `open_service`) has, spelled as the code spells them."""
        from session_awareness.application import SessionAwareness, open_service  # noqa: PLC0415

        wrong = []
        for name, arguments in re.findall(r"`(\w+)\(([^`]*)\)`", self.PAGE.read_text()):
            call = open_service if name == "open_service" else getattr(SessionAwareness, name, None)
            if call is None or "…" in arguments:
                continue
            named = {
                part.split("=")[0].strip()
                for part in arguments.split(",")
                if part.strip() not in ("", "*")
            }
            real = set(inspect.signature(call).parameters) - {"self"}
            wrong += [f"{name}({parameter})" for parameter in sorted(named - real)]
        assert wrong == []

    def test_every_option_of_open_service_is_documented(self) -> None:
        """Each keyword of `open_service` is named on the API page or a page it links to."""
        from session_awareness.application import open_service  # noqa: PLC0415

        pages = " ".join(path.read_text() for path in (ROOT / "docs").glob("*.md"))
        missing = [
            name
            for name in inspect.signature(open_service).parameters
            if not re.search(rf"`{name}[`=(]|\b{name}=", pages)
        ]
        assert missing == []

    def test_the_readme_reads_in_minutes(self) -> None:
        """The README stays an introduction: at most 250 lines, the reference in docs/."""
        assert len((ROOT / "README.md").read_text().splitlines()) <= 250


ADRS = ROOT / "docs" / "adr"
#: The status line every ADR carries under its title.
ADR_STATUS = re.compile(
    r"\*\*Status:\*\* (accepted( \(\d{4}-\d{2}-\d{2}\))?"
    r"|(superseded|amended) by ADR \d{3}(, ADR \d{3})*|proposed)"
)
#: About 400 words, as `wc -w` counts them, with room for a table's pipes.
ADR_MAX_WORDS = 450


def adrs() -> list[Path]:
    return sorted(ADRS.glob("[0-9][0-9][0-9]-*.md"))


class TestDecisionRecords:
    """docs/adr: a newcomer reads each decision in minutes and sees whether it still holds."""

    def test_every_adr_opens_with_its_title_and_a_status_line(self) -> None:
        """Title line `# NNN. …` (NNN its file's number), then one status of the allowed forms."""
        wrong = []
        for path in adrs():
            lines = [line for line in path.read_text().splitlines() if line.strip()]
            title_ok = lines[0].startswith(f"# {path.name[:3]}. ")
            if not title_ok or not ADR_STATUS.fullmatch(lines[1]):
                wrong.append(f"{path.name}: {lines[:2]}")
        assert adrs() and wrong == []

    def test_a_later_adr_is_named_by_a_status(self) -> None:
        """`superseded by` / `amended by` name ADRs that exist and come later."""
        numbers = {path.name[:3] for path in adrs()}
        wrong = []
        for path in adrs():
            status = next(line for line in path.read_text().splitlines() if "**Status:**" in line)
            for later in re.findall(r"ADR (\d{3})", status):
                if later not in numbers or later <= path.name[:3]:
                    wrong.append(f"{path.name}: ADR {later}")
        assert wrong == []

    def test_every_adr_is_about_four_hundred_words_at_most(self) -> None:
        """Counted as `wc -w` counts: whitespace-separated tokens."""
        long = {p.name: n for p in adrs() if (n := len(p.read_text().split())) > ADR_MAX_WORDS}
        assert long == {}

    def test_the_index_lists_every_adr_and_its_links_resolve(self) -> None:
        """docs/adr/README.md links each ADR file once, with the status the ADR states."""
        index = (ADRS / "README.md").read_text()
        targets = LINK.findall(index)
        assert all((ADRS / t.split("#")[0]).resolve().exists() for t in targets)
        listed = [t for t in targets if re.fullmatch(r"\d{3}-[^/]+\.md", t)]
        assert sorted(listed) == [path.name for path in adrs()]
        for path in adrs():
            status = ADR_STATUS.search(path.read_text())
            assert status is not None
            row = next(line for line in index.splitlines() if f"]({path.name})" in line)
            assert f"| {status.group(1)} |" in row, path.name


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
        """R-L9: the README's "Embedding it" code runs as written, the WARNING lines it
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


#: A citation of a document outside the repository: the design brief and the specification the
#: project started from live elsewhere; the repository's own are docs/rules.md, the ADRs and
#: docs/architecture.md.
FOREIGN = re.compile(r"\bSPEC\b|\bDESIGN\s+D\d|\b(?:SPEC|DESIGN|STYLE)\.md\b")
#: A file and line number (`watching.py:88`, `service.py:149-154`): lines move, names stay.
FILE_LINE = re.compile(r"\b[\w/]+\.(?:py|md|toml|sql):\d+")
ADR = re.compile(r"\bADRs? (\d{3})\b")
DOC_PATH = re.compile(r"\bdocs/[\w./-]+\.md\b")
SKIPPED = {".venv", "build", ".git", "dist", "node_modules", ".pytest_cache", ".mypy_cache"}


def repository_texts() -> list[Path]:
    """Every file of the repository a reader reads: code, tests, docs, configuration."""
    found = [
        path
        for pattern in ("*.py", "*.md", "*.toml")
        for path in ROOT.rglob(pattern)
        if not SKIPPED & set(path.relative_to(ROOT).parts)
    ]
    return sorted({*found, ROOT / "Makefile", ROOT / ".ci" / "run"} - {Path(__file__).resolve()})


class TestCitations:
    def test_nothing_cites_a_document_the_repository_lacks(self) -> None:
        """No text cites the specification or design brief the project started from, or a file
        by line number; every ADR and docs/ page it names is in the repository."""
        numbers = {path.name[:3] for path in adrs()}
        wrong = []
        for path in repository_texts():
            text = path.read_text()
            where = str(path.relative_to(ROOT))
            wrong += [f"{where}: {m[0]!r}" for m in FOREIGN.finditer(text)]
            wrong += [f"{where}: {m[0]!r}" for m in FILE_LINE.finditer(text)]
            wrong += [f"{where}: ADR {n}" for n in ADR.findall(text) if n not in numbers]
            wrong += [
                f"{where}: {m[0]}" for m in DOC_PATH.finditer(text) if not (ROOT / m[0]).exists()
            ]
        assert wrong == []


class TestTheToolsPage:
    """docs/tools.md's tool calls (`{arguments}` → `{result}`) are what the tools answer, run
    in the page's order as one story: the manager spawns a worker at 09:01 (the demo's day),
    sends it two messages, a human writes to it at 09:02, and the manager looks."""

    PAGE = ROOT / "docs" / "tools.md"
    #: The tool each sample calls, in the page's order.
    TOOLS = ("sessions_spawn", "sessions_send", "sessions_send", "session_status",
             "sessions_list", "subagents", "subagents", "session_status")  # fmt: skip

    def samples(self) -> list[tuple[Any, Any]]:
        pairs = []
        for block in re.findall(r"```json\n(.*?)```", self.PAGE.read_text(), re.S):
            for call, answer in re.findall(r"^(\{.*?)\n→ (.*?)(?=^\{|\Z)", block, re.M | re.S):
                pairs.append((json.loads(call), json.loads(answer)))
        return pairs

    def test_every_call_answers_as_the_page_shows(self, tmp_path: Path) -> None:
        """R-T1, R-T2, R-W2, R-S1, R-S4: each result is the page's, field for field (a
        string `…` on the page stands for any text)."""
        clock = FakeClock(datetime(2026, 11, 30, 9, 1, tzinfo=UTC))
        manager, worker = "agent:main:main", "agent:main:subagent:worker"

        def start_child(caller_key: str, request: dict[str, Any]) -> tuple[str, str]:
            return worker, "run-1"

        def deliver(
            sender_key: str, target_key: str, message: str, *, timeout_seconds: Any = None
        ) -> Any:
            if not timeout_seconds:
                return target_key
            return {"sessionKey": target_key, "status": "ok", "reply": "3 of 5 files done"}

        samples = self.samples()
        assert len(samples) == len(self.TOOLS)
        with structlog.testing.capture_logs(), open_service(
            f"sqlite:///{tmp_path / 'sessions.db'}", clock=clock, visibility="tree",
            spawner=start_child, dispatcher=deliver, canceller=lambda *_: None,
        ) as svc:  # fmt: skip
            svc.open_session(manager)
            for tool, (arguments, shown) in zip(self.TOOLS, samples, strict=True):
                if tool == "session_status" and arguments.get("changesSince") == 1:
                    clock.advance(minutes=1)
                    svc.record_human_direct_message(worker, channel="telegram")
                answer = svc.tools.call(tool, arguments, caller=manager)
                assert answer == elided(shown, answer), (tool, arguments)


def elided(shown: Any, real: Any) -> Any:
    """`shown` with each string `…` replaced by what `real` holds there."""
    if shown == "…":
        return real
    if isinstance(shown, dict) and isinstance(real, dict):
        return {k: elided(v, real.get(k)) for k, v in shown.items()}
    if isinstance(shown, list) and isinstance(real, list) and len(shown) == len(real):
        return [elided(s, r) for s, r in zip(shown, real, strict=True)]
    return shown


class TestTheReadmesCommands:
    def test_the_demos_last_line_is_the_command_the_readme_gives_and_it_runs(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`make demo` (`.venv/bin/session-awareness demo --database-url sqlite:///demo.db`)
        ends with the README's "command to try next", which answers on the demo's store."""
        from session_awareness.infrastructure.cli import main  # noqa: PLC0415

        [command] = re.findall(r"a command to try\s+next:\s+`([^`]+)`", README.read_text())
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr("sys.argv", [".venv/bin/session-awareness"])
        assert main(["demo", "--database-url", "sqlite:///demo.db"]) == 0
        last = capsys.readouterr().out.splitlines()[-1]
        assert last.split(None, 2)[:2] == ["try", "it"]
        assert last.split(None, 2)[2] == command
        assert main(shlex.split(command)[1:]) == 0
        assert "changes since 1: 2 events" in capsys.readouterr().out


class TestTheClaudeCodePage:
    """docs/claude-code.md's story: the two answers the lead gets (steps 4 and 5) are what
    the tools give, `<worker 1>` standing for the worker's session id."""

    PAGE = ROOT / "docs" / "claude-code.md"

    def test_the_leads_delta_and_the_workers_turn_are_as_shown(self, tmp_path: Path) -> None:
        """R-S1, R-L6, R-T4: the lead watches worker 1; the human's turn at 09:02 is one
        `human_direct_message` via `claude-code`, and `sessions_history` with `limit: 1`
        shows it, as the page's JSON says."""
        status, history = (
            json.loads(block.replace("<worker 1>", "w1"))
            for block in re.findall(r"```json\n(.*?)```", self.PAGE.read_text(), re.S)
        )
        lead, worker = "agent:claude:claude:lead", "agent:claude:claude:w1"
        transcript = tmp_path / "w1.jsonl"
        turns = [f"turn {n}" for n in range(1, 7)]
        turns.append("stop the migration, write the rollback plan first")
        transcript.write_text("".join(
            json.dumps({"type": "user", "uuid": f"u-{n:03}", "timestamp": "2026-11-30T09:02:00Z",
                        "message": {"role": "user", "content": text}}) + "\n"
            for n, text in enumerate(turns, 1)
        ))  # fmt: skip
        clock = FakeClock(datetime(2026, 11, 30, 9, 2, tzinfo=UTC))
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
        with (
            structlog.testing.capture_logs(),
            open_service(url, clock=clock, visibility="agent") as svc,  # as `install` runs it
        ):
            svc.open_session(lead)
            svc.open_session(worker)
            svc.note_transcript(worker, source="claude-code", ref=str(transcript))
            assert svc.watch(lead, worker)
            svc.record_human_direct_message(worker, channel="claude-code")
            [notice] = svc.drain_notices(lead)
            assert notice.endswith(f'sessionKey "{worker}" changesSince 0.')
            asked = {"sessionKey": worker, "changesSince": 0}
            assert svc.tools.call("session_status", asked, caller=lead) == status
            asked = {"sessionKey": worker, "limit": 1}
            assert svc.tools.call("sessions_history", asked, caller=lead) == history
