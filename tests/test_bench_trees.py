"""`python -m bench.trees` compares another commit's figures with ours: its interpreter must
import the other tree's sources (not this checkout's editable install), and its summary must
keep each tree's rounds apart."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from bench.lock_span import LockSpans
from bench.trees import REPO, interpreter_for, render, summary


def test_the_interpreter_imports_the_given_tree(tmp_path: Path) -> None:
    """Built for a copy of this tree's sources, it imports them from the copy."""
    tree = tmp_path / "tree"
    for layer in ("domain", "application", "infrastructure", "src"):
        shutil.copytree(REPO / layer, tree / layer)
    python = interpreter_for(tree, tmp_path / "env")
    done = subprocess.run(
        [str(python), "-c",
         "import os, session_awareness.application as a, eventsourcing; "
         "print(os.path.realpath(a.__file__))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == str((tree / "application" / "__init__.py").resolve())


def _result(ratio: float | None, ours: float) -> dict[str, Any]:
    return {"metric": "page (µs)", "backend": "sqlite", "unit": "µs", "target": "ratio <= 2",
            "ratio": ratio, "ours": ours}  # fmt: skip


def test_the_summary_keeps_each_tree_apart_and_takes_medians() -> None:
    rounds = {
        "abc1234": [[_result(2.0, 60.0)], [_result(3.0, 70.0)], [_result(2.5, 65.0)]],
        "this tree": [[_result(1.5, 40.0)], [_result(1.7, 45.0)], [_result(1.6, 50.0)]],
    }
    [row] = summary(rounds)
    assert row["abc1234"]["ratios_median"] == 2.5
    assert row["this tree"]["ratios_median"] == 1.6
    assert row["this tree"]["ours_median"] == 45.0
    table = render([row], ("abc1234", "this tree"))
    assert "| page (µs) | sqlite | 2.5 (2-3) | 1.6 (1.5-1.7) | 65 (60-70) | 45 (40-50) |" in table


def test_a_metric_without_a_ratio_shows_its_figures_alone() -> None:
    rounds = {"abc1234": [[_result(None, 1.2)]], "this tree": [[_result(None, 1.1)]]}
    [row] = summary(rounds)
    assert row["abc1234"]["ratios_median"] is None
    assert "| – | – | 1.2 (1.2-1.2) | 1.1 (1.1-1.1) |" in render([row], ("abc1234", "this tree"))


def test_a_lock_span_runs_from_the_lock_to_the_commits_answer() -> None:
    """`python -m bench.lock_span` times from sending the query that takes the lock to the
    answer of the one ending in `COMMIT`, whichever queries come between."""
    spans = LockSpans()
    spans.seen(
        "BEGIN; SET LOCAL lock_timeout = '5s'; LOCK TABLE t IN EXCLUSIVE MODE; INSERT", 1.0, 1.5
    )
    spans.seen("UPDATE heads SET v = 2", 1.6, 1.7)
    spans.seen("COMMIT", 1.8, 2.25)
    spans.seen("SELECT 1", 3.0, 3.1)  # a read: no lock, no span
    spans.seen("BEGIN; LOCK TABLE t IN EXCLUSIVE MODE; INSERT; UPDATE; COMMIT", 4.0, 4.5)
    assert spans.spans == [1.25, 0.5]
