"""What an audit found: per-table counts, row differences and broken rules (R-R2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from session_awareness.application.invariants import Violation

MISSING, UNEXPECTED, CHANGED = "missing", "unexpected", "changed"


@dataclass(frozen=True, slots=True)
class Difference:
    """One key whose live row differs from the rebuilt one.

    `missing`: the rebuild has the row, the live table lacks it; `unexpected`: the live table
    has a row no recorded fact explains; `changed`: both have it and `columns` maps each
    differing column to `(live, rebuilt)`. `subject` names the session or pair, for people.
    """

    table: str
    problem: str
    key: dict[str, Any]
    columns: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    subject: str | None = None

    @classmethod
    def of(
        cls,
        table: str,
        keys: tuple[str, ...],
        live: dict[str, Any] | None,
        rebuilt: dict[str, Any] | None,
    ) -> Difference:
        row = live if live is not None else (rebuilt or {})
        key = {name: row[name] for name in keys}
        if live is None or rebuilt is None:
            return cls(table, MISSING if live is None else UNEXPECTED, key, {}, _subject(row))
        changed = {
            name: (value, rebuilt[name]) for name, value in live.items() if value != rebuilt[name]
        }
        return cls(table, CHANGED, key, changed, _subject(live))

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"table": self.table, "problem": self.problem, "key": self.key}
        if self.subject is not None:
            out["subject"] = self.subject
        if self.columns:
            out["columns"] = {
                name: {"live": live, "rebuilt": rebuilt}
                for name, (live, rebuilt) in self.columns.items()
            }
        return out


def _subject(row: dict[str, Any]) -> str | None:
    if "watcher_key" in row and "target_key" in row:
        return f"{row['watcher_key']} → {row['target_key']}"
    key = row.get("session_key")
    return key if isinstance(key, str) else None


@dataclass(frozen=True, slots=True)
class TableSummary:
    live_rows: int
    rebuilt_rows: int
    missing: int = 0
    unexpected: int = 0
    changed: int = 0

    @property
    def differences(self) -> int:
        return self.missing + self.unexpected + self.changed

    def as_dict(self) -> dict[str, int]:
        return {
            "liveRows": self.live_rows,
            "rebuiltRows": self.rebuilt_rows,
            "missing": self.missing,
            "unexpected": self.unexpected,
            "changed": self.changed,
        }


@dataclass(frozen=True, slots=True)
class AuditReport:
    """The outcome of `audit()`: clean when no row differs and no rule is broken."""

    events: int  # stored events replayed
    last_position: int  # the newest notification id replayed
    seconds: float
    tables: dict[str, TableSummary]
    differences: list[Difference]  # the first ones, in table and key order
    violations: list[Violation]  # the first ones, in recording order
    violation_count: int
    rebuilt: bool  # the live read models were replaced by the rebuilt ones

    @property
    def difference_count(self) -> int:
        return sum(summary.differences for summary in self.tables.values())

    @property
    def clean(self) -> bool:
        return self.difference_count == 0 and self.violation_count == 0

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "clean": self.clean,
            "rebuilt": self.rebuilt,
            "events": self.events,
            "lastPosition": self.last_position,
            "seconds": round(self.seconds, 3),
            "eventsPerSecond": round(self.events_per_second),
            "tables": {name: summary.as_dict() for name, summary in self.tables.items()},
            "differenceCount": self.difference_count,
            "differences": [difference.as_dict() for difference in self.differences],
            "violationCount": self.violation_count,
            "violations": [violation.as_dict() for violation in self.violations],
        }
