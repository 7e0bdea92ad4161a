"""`--profile`: where the time of a scenario's measured operation goes.

Uses pyinstrument when it is installed (`pip install pyinstrument`), else the standard
library's cProfile; the report goes to `bench/results/profiles/<scenario>-<backend>.txt`.
"""

from __future__ import annotations

import cProfile
import importlib.util
import io
import pstats
from collections.abc import Callable

from bench.context import RESULTS_DIR, Context

PROFILES_DIR = RESULTS_DIR / "profiles"


def profile(ctx: Context, name: str, backend: str, action: Callable[[], object]) -> None:
    """Run `action` under a profiler when the run asked for profiles; write the report."""
    if not ctx.profile:
        return
    PROFILES_DIR.mkdir(parents=True, exist_ok=True)
    path = PROFILES_DIR / f"{name}-{backend}.txt"
    if importlib.util.find_spec("pyinstrument") is not None:
        from pyinstrument import Profiler  # noqa: PLC0415 -- optional dev tool

        profiler = Profiler(interval=0.0002)
        profiler.start()
        action()
        profiler.stop()
        text = profiler.output_text(unicode=False, color=False, show_all=False)
    else:
        cprofile = cProfile.Profile()
        cprofile.enable()
        action()
        cprofile.disable()
        buffer = io.StringIO()
        pstats.Stats(cprofile, stream=buffer).sort_stats("cumulative").print_stats(60)
        text = buffer.getvalue()
    path.write_text(text)
