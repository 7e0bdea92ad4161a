"""The run's record: `results/<name>.json` (every round) and `results/<name>.md` (the table)."""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import subprocess
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench.context import RESULTS_DIR
from bench.harness import Result


def machine() -> dict[str, Any]:
    """What the figures ran on; the load average says how noisy the neighbours were."""
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "sqlite": sqlite3.sqlite_version,
        "eventsourcing": version("eventsourcing"),
        "psycopg": version("psycopg"),
    }
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        models = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                  if line.startswith("model name")]  # fmt: skip
        info["cpu"] = models[0] if models else platform.processor()
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        total = meminfo.read_text().split("MemTotal:", 1)[1].split()[0]
        info["memory_gib"] = round(int(total) / 1024 / 1024, 1)
    return info


def postgres_version(bindir: Path | None) -> str | None:
    if bindir is None:
        return None
    done = subprocess.run(  # noqa: S603 -- a fixed tool from the cluster's bin directory
        [str(bindir / "postgres"), "--version"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or None


def write(name: str, results: list[Result], run: dict[str, Any]) -> tuple[Path, Path]:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    document = {"run": run, "results": [r.as_json() for r in results]}
    json_path = RESULTS_DIR / f"{name}.json"
    json_path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    md_path = RESULTS_DIR / f"{name}.md"
    md_path.write_text(markdown(results, run))
    return json_path, md_path


def _number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "–"
    if abs(value) >= 1000:
        text = f"{value:,.0f}"
    elif abs(value) >= 100:
        text = f"{value:.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return f"{text} {unit}".strip()


def markdown(results: list[Result], run: dict[str, Any]) -> str:
    m = run["machine"]
    lines = [
        f"Run {run['started']} · {run['mode']} · {run['duration_s']:.0f} s · "
        f"{m.get('cpu', '?')} × {m.get('cpus')} · {m.get('memory_gib')} GiB · "
        f"load {run['load_before']} → {run['load_after']} · Python {m['python']} · "
        f"SQLite {m['sqlite']} · {run.get('postgres') or 'no PostgreSQL'} · "
        f"eventsourcing {m['eventsourcing']} · psycopg {m['psycopg']}",
        "",
        "| metric | backend | ours | baseline | ratio | target | result |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for r in results:
        ratio = "–" if r.ratio is None else f"{r.ratio:.2f}"
        verdict = "info" if r.target == "info" else "pass" if r.passed else "**FAIL**"
        lines.append(
            f"| {r.metric} | {r.backend} | {_number(r.ours, r.unit)} | "
            f"{_number(r.baseline, r.unit)} | {ratio} | {r.target} | {verdict} |"
        )
    targets = [r for r in results if r.target != "info"]
    lines += ["", f"{sum(r.passed for r in targets)} of {len(targets)} targets met."]
    if run.get("proposals"):
        lines += [
            "",
            f"**Bench-only monkeypatches applied** ({', '.join(run['proposals'])}): these "
            "figures measure proposals from `bench/PROPOSALS.md`, not the product as committed.",
        ]
    return "\n".join(lines) + "\n"


def stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
