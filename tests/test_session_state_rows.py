"""`session_state` on PostgreSQL reads the head row and the page in one UNION ALL without
an outer ORDER BY (infrastructure/readmodel/session_state.py); SQL promises no order, so any
order the server returns must give the same answer."""

from __future__ import annotations

import random
from typing import Any
from uuid import uuid4

from session_awareness.infrastructure.readmodel.pg_recorder import postgres_dialect
from session_awareness.infrastructure.readmodel.session_state import StackedSessionState

HEAD = (None,) * 8 + (7, 2, 3)  # state_version 7, pruned watermark 2, earliest retained 3


def page_row(sequence: int) -> tuple[Any, ...]:
    return (
        sequence,
        "goal_changed",
        "system",
        None,
        None,
        1,
        "goal updated",
        None,
        None,
        None,
        None,
    )


class Rows(StackedSessionState):
    """The read model with its one statement answered from a list."""

    dialect = postgres_dialect("public")

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.rows = rows

    def fetch_tuples(self, template: str, params: Any = ()) -> list[tuple[Any, ...]]:
        return list(self.rows)


def test_the_page_is_in_sequence_order_whatever_order_the_rows_come_in() -> None:
    """R-S2: the delta's events in sequence order; R-S3: the earliest retained sequence
    and the head read with it."""
    rows = [HEAD] + [page_row(s) for s in (3, 4, 5, 6, 7)]
    expected = Rows(rows).session_state(uuid4(), after=2, limit=201)
    assert expected is not None and [c[0] for c in expected.changes] == [3, 4, 5, 6, 7]
    for seed in range(5):
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)  # noqa: S311 -- an order, not a secret
        assert Rows(shuffled).session_state(uuid4(), after=2, limit=201) == expected


def test_page_rows_without_a_head_row_are_an_unknown_session() -> None:
    """R-S4: an unknown (or deleted) session. The head row comes only from a live registry
    row: a deleted session keeps its head (ADR 005) and may still match page rows."""
    assert Rows([page_row(3), page_row(4)]).session_state(uuid4(), after=2, limit=201) is None
    assert Rows([]).session_state(uuid4(), after=2, limit=201) is None
