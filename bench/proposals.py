"""BENCH-ONLY monkeypatches that measure the proposals of `bench/PROPOSALS.md`.

Nothing here is product code. Each patch swaps in a replacement for one product or library
method in this process only (writer and replay subprocesses re-apply it), so that a
proposal's effect can be measured before the lead applies the real change. Every replacement
checks whether its proposal is active and otherwise does exactly what the original does, so
`bench.ab` can switch a proposal on and off round by round in one process.

    python -m bench --proposals session-snapshots --only history
    python -m bench.ab session-snapshots --only history
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: The proposals switched on in this process, in the order they were applied.
APPLIED: list[str] = []
_INSTALLED: set[str] = set()


def active(name: str) -> bool:
    return name in APPLIED


def _session_snapshots() -> None:
    """P8: a Session snapshot every 1,000 events (read when a service opens), so a restarted
    process loads a long session from a snapshot and at most 999 events."""
    from session_awareness.application.service import SessionAwareness  # noqa: PLC0415
    from session_awareness.domain.session import Session  # noqa: PLC0415

    class Intervals(dict[Any, int]):
        def __bool__(self) -> bool:
            return active("session-snapshots")

        def get(self, key: Any, default: Any = None) -> Any:
            return super().get(key, default) if self else default

    SessionAwareness.snapshotting_intervals = Intervals({Session: 1000})


#: Each proposal and the installer of its (switchable) replacement.
#: P1, P5, P6 and P7 are in the product now (P1 and P6-P7 in another form: ADRs 012, 013),
#: and P2 no longer applies (the write path is the service's own); their patches are gone.
PATCHES: dict[str, Callable[[], None]] = {
    "session-snapshots": _session_snapshots,
}
#: What `all` means: the recommended proposals not yet in the product (none left).
ALL: list[str] = []


def install(names: list[str]) -> None:
    """Install the replacements of `names` (still switched off)."""
    for name in names:
        if name not in PATCHES:
            raise SystemExit(f"unknown proposal {name!r}; known: all, {', '.join(PATCHES)}")
        installer = PATCHES[name]
        if installer.__name__ not in _INSTALLED:
            installer()
            _INSTALLED.add(installer.__name__)


def apply(names: list[str]) -> list[str]:
    """Switch the named proposals on (`all`: every one that keeps the design)."""
    expanded = [n for name in names for n in (ALL if name == "all" else [name])]
    install(expanded)
    for name in expanded:
        if name not in APPLIED:
            APPLIED.append(name)
    return list(APPLIED)


def switch_off(names: list[str]) -> None:
    for name in names:
        if name in APPLIED:
            APPLIED.remove(name)
