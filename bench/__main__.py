"""`python -m bench [--quick] [--only NAME[,NAME]] [--backend B] [--profile] [--proposals P]`.

A full run writes `bench/results/latest.json` and `bench/results/latest.md`; a `--quick`,
`--only`, `--backend` or `--proposals` run writes `bench/results/partial.*` instead, so a smoke
run never replaces the committed table.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import time
import traceback
from types import ModuleType

from bench import harness, report
from bench.context import BACKENDS, run_context
from bench.harness import Result

SCENARIOS = {
    "record": "bench.s_record",
    "record4": "bench.s_record4",
    "history": "bench.s_history",
    "changes": "bench.s_changes",
    "fanout": "bench.s_fanout",
    "drain": "bench.s_drain",
    "replay": "bench.s_replay",
    "reference": "bench.s_reference",
}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--only", default="", help=f"comma-separated: {', '.join(SCENARIOS)}")
    parser.add_argument("--backend", choices=BACKENDS, help="one backend only")
    parser.add_argument("--profile", action="store_true", help="write profiles of our side")
    parser.add_argument(
        "--proposals", default="", help="comma-separated bench-only patches (bench/proposals.py)"
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    # A terminated run still stops its PostgreSQL cluster and removes its files.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    harness.quiet_logs()
    applied: list[str] = []
    if args.proposals:
        from bench import proposals  # noqa: PLC0415 -- only when asked for

        applied = proposals.apply([p.strip() for p in args.proposals.split(",") if p.strip()])
    backends = (args.backend,) if args.backend else BACKENDS
    partial = args.quick or bool(args.only) or bool(args.backend) or bool(applied)
    started, load_before = time.monotonic(), os.getloadavg()[0]
    results: list[Result] = []
    errors = 0
    with run_context(quick=args.quick, backends=backends, profile=args.profile) as ctx:
        pg_version = report.postgres_version(ctx.pg.bindir if ctx.pg else None)
        for name in names:
            module: ModuleType = importlib.import_module(SCENARIOS[name])
            began = time.monotonic()
            print(f"[bench] {name} …", flush=True)
            try:
                found = module.run(ctx)
            except Exception:  # noqa: BLE001 -- one broken scenario must not hide the others
                traceback.print_exc()
                errors += 1
                continue
            for result in found:
                result.details["scenario_seconds"] = round(time.monotonic() - began, 1)
                print(
                    f"[bench]   {result.metric} [{result.backend}]: ours {result.ours:.4g} "
                    f"{result.unit}, baseline {result.baseline if result.baseline is None else f'{result.baseline:.4g}'}, "  # noqa: E501
                    f"ratio {result.ratio if result.ratio is None else f'{result.ratio:.3g}'} "
                    f"({result.target}): {'pass' if result.passed else 'FAIL'}",
                    flush=True,
                )
            results.extend(found)
    run = {
        "started": report.stamp(),
        "mode": ("quick" if args.quick else "full") + (f", only {args.only}" if args.only else ""),
        "backends": list(backends),
        "duration_s": time.monotonic() - started,
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "machine": report.machine(),
        "postgres": pg_version,
        "proposals": applied,
        "errors": errors,
    }
    json_path, md_path = report.write("partial" if partial else "latest", results, run)
    print(md_path.read_text())
    print(f"[bench] wrote {json_path} and {md_path} in {run['duration_s']:.0f} s")
    if errors:
        return 1
    return 1 if args.strict and not all(r.passed for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
