"""A pytest plugin that runs the test suite with bench-only proposals switched on, to check
that a proposal keeps the behaviour before the lead applies it:

    BENCH_PROPOSALS=all .venv/bin/python -m pytest -p bench.proposals_plugin tests/contract
"""

from __future__ import annotations

import os

from bench import proposals

NAMES = [name for name in os.environ.get("BENCH_PROPOSALS", "").split(",") if name]
if NAMES:
    proposals.apply(NAMES)


def pytest_report_header() -> str:
    return f"bench proposals switched on: {', '.join(proposals.APPLIED) or 'none'}"
