"""`python -m bench.trees REV [--only NAMES] [--backend B] [--quick] [--rounds N]`: the same
scenarios measured on another tree of this repository and on this one, alternately, in the
same minutes.

`bench/results/latest.md` tables taken on different days are not comparable: this machine's
speed wanders by a factor of two or three from one hour to the next, and not evenly (the
C code of SQLite and the interpreter drift apart), so even a ratio against a baseline
measured in the same run moves. To tell whether a change of code moved a figure, this
runs `python -m bench --only NAMES` on `REV` (a worktree of it, in a temporary folder)
and on the working tree, one after the other, `--rounds` times, and reports each metric's
ratio (and our side's figure) per tree: the median of the rounds, and their range.

`REV`'s tree is imported through a throwaway virtual environment that sees this one's
installed dependencies and `REV`'s own sources, whatever its layout (older trees have no
`src/session_awareness`). Each tree writes its own `bench/results/partial.*`; the report
goes to `bench/results/trees.json` (ignored).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.context import RESULTS_DIR
from bench.harness import median

REPO = Path(__file__).resolve().parent.parent
LAYERS = ("domain", "application", "infrastructure")


def _git(*args: str, cwd: Path = REPO) -> str:
    git = shutil.which("git") or "git"
    done = subprocess.run(  # noqa: S603 -- git with fixed verbs and a revision the user gave
        [git, *args], cwd=cwd, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def interpreter_for(tree: Path, folder: Path) -> Path:
    """A Python that imports `session_awareness` from `tree`: a venv whose one `.pth` puts a
    package folder built of links to the tree's sources first, then this environment's
    site-packages (for the dependencies; their `.pth` files, the editable install of this
    tree among them, are not processed from a `.pth` line)."""
    package = folder / "package" / "session_awareness"
    package.mkdir(parents=True)
    root = tree / "src" / "session_awareness"
    if root.is_dir():
        for entry in root.iterdir():
            (package / entry.name).symlink_to(entry)
    for layer in LAYERS:
        (package / layer).symlink_to(tree / layer)
    venv = folder / "venv"
    subprocess.run(  # noqa: S603 -- this interpreter making a venv
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True
    )
    python = venv / "bin" / "python"
    site = subprocess.run(  # noqa: S603 -- the new interpreter naming its site-packages
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    ours = sysconfig.get_paths()["purelib"]
    Path(site, "bench_trees.pth").write_text(f"{package.parent}\n{ours}\n")
    return python


@contextlib.contextmanager
def other_tree(rev: str, folder: Path) -> Iterator[tuple[str, Path, Path]]:
    """`(short commit, its interpreter, its worktree)` for `rev`, in `folder`; the worktree
    is removed afterwards."""
    commit = _git("rev-parse", "--short", f"{rev}^{{commit}}")
    tree = folder / "tree"
    _git("worktree", "add", "--detach", "--quiet", str(tree), commit)
    try:
        yield commit, interpreter_for(tree, folder), tree
    finally:
        _git("worktree", "remove", "--force", str(tree))


@contextlib.contextmanager
def sides(rev: str | None, folder: Path) -> Iterator[list[tuple[str, Path, Path]]]:
    """`(name, interpreter, tree)` of each side an A/B alternates: `rev`'s (when given),
    then this tree's."""
    with contextlib.ExitStack() as stack:
        found = [stack.enter_context(other_tree(rev, folder))] if rev else []
        yield [*found, ("this tree", Path(sys.executable), REPO)]


def _child_env() -> dict[str, str]:
    """The environment of a tree's interpreter: without `PYTHONPATH`, which would put
    another tree's sources before its own."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def run_script(python: Path, script: Path, args: list[str], cwd: Path) -> dict[str, Any]:
    """Run `script` (a file of this checkout's bench) on a tree's interpreter, in `cwd`; the
    JSON object it prints last."""
    done = subprocess.run(  # noqa: S603 -- a tree's interpreter running one of our files
        [str(python), str(script), *args], cwd=cwd, env=_child_env(),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{script.name} failed on {cwd}:\n{done.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def run_bench(python: Path, tree: Path, args: list[str]) -> list[dict[str, Any]]:
    """One `python -m bench …` on `tree`; its results (partial.json)."""
    done = subprocess.run(  # noqa: S603 -- a tree's own bench, arguments from our parser
        [str(python), "-m", "bench", *args], cwd=tree, env=_child_env(),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"bench failed on {tree}:\n{done.stderr[-3000:]}")
    results: list[dict[str, Any]] = json.loads(
        (tree / "bench" / "results" / "partial.json").read_text()
    )["results"]
    return results


def summary(rounds: dict[str, list[list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """Per metric and tree: the median and range of the ratio and of our side's figure."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for tree, runs in rounds.items():
        for results in runs:
            for result in results:
                row = rows.setdefault(
                    (result["metric"], result["backend"]),
                    {"metric": result["metric"], "backend": result["backend"],
                     "unit": result["unit"], "target": result["target"]},
                )  # fmt: skip
                side = row.setdefault(tree, {"ratios": [], "ours": []})
                if result["ratio"] is not None:
                    side["ratios"].append(result["ratio"])
                side["ours"].append(result["ours"])
    for row in rows.values():
        for tree in rounds:
            side = row.get(tree)
            if side is None:
                continue
            for name in ("ratios", "ours"):
                values = side[name]
                side[f"{name}_median"] = median(values) if values else None
    return list(rows.values())


def _figure(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _span(values: list[float]) -> str:
    return f"{_figure(min(values))}-{_figure(max(values))}" if values else "–"


def median_and_range(values: list[float]) -> str:
    """`median (min-max)`, as every A/B table shows a side's rounds."""
    return f"{_figure(median(values))} ({_span(values)})"


def render(rows: list[dict[str, Any]], names: tuple[str, str]) -> str:
    lines = [
        f"| metric | backend | ratio, {names[0]} | ratio, {names[1]} | ours, {names[0]} "
        f"| ours, {names[1]} | unit | target |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        cells = []
        for field in ("ratios", "ours"):
            for tree in names:
                side = row.get(tree) or {}
                values = side.get(field)
                cells.append(median_and_range(values) if values else "–")
        lines.append(
            f"| {row['metric']} | {row['backend']} | {' | '.join(cells)} | {row['unit']} "
            f"| {row['target']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.trees", description=__doc__.split("\n")[0]
    )
    parser.add_argument("rev", help="the other tree: a commit, branch or tag of this repository")
    parser.add_argument("--only", required=True, help="comma-separated scenarios (python -m bench)")
    parser.add_argument("--backend", help="one backend only")
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each tree (default 3)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    bench_args = ["--only", args.only]
    if args.backend:
        bench_args += ["--backend", args.backend]
    if args.quick:
        bench_args.append("--quick")
    with (
        tempfile.TemporaryDirectory(prefix="bench-trees-") as scratch,
        sides(args.rev, Path(scratch)) as both,
    ):
        names = (both[0][0], both[1][0])
        rounds: dict[str, list[list[dict[str, Any]]]] = {name: [] for name in names}
        for number in range(1, args.rounds + 1):
            for name, interpreter, tree in both:
                print(f"[trees] round {number}/{args.rounds}: {name}", file=sys.stderr)
                rounds[name].append(run_bench(interpreter, tree, bench_args))
    rows = summary(rounds)
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / "trees.json").write_text(
        json.dumps({"rev": names[0], "args": bench_args, "rounds": rounds, "summary": rows},
                   indent=2, default=str)
    )  # fmt: skip
    print(f"{args.rounds} rounds each, alternating, medians (range):\n")
    print(render(rows, names))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
