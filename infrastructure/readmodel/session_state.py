"""`session_state` (a `changesSince` answer) in ONE statement: the page columns (a
`ChangeRow`), the head, the pruned watermark and the earliest retained sequence. One
snapshot without an explicit transaction (one round trip on PostgreSQL, not five), and the
page is bounded by the head read in that same snapshot, so it never runs ahead of it (R-S1).

Each backend mixes in the form that is cheapest for it: `JoinedSessionState` (SQLite) or
`StackedSessionState` (PostgreSQL); both read through the backend's `fetch_tuples`. Measured
again call by call (`python -m bench.changes_forms`, ADR 043), each is about a fifth faster
than the other on its own backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any
from uuid import UUID

from session_awareness.application.ports import Head, SessionState
from session_awareness.infrastructure.readmodel.dialect import Rendered

_first = itemgetter(0)
_NO_PAGE = 2**62  # an `after` beyond every sequence: the head row alone

#: The head joined to every row of the page; the head row LEFT JOINs the page, so a session
#: without matching rows still gives one row (its page columns NULL). The scalar subquery
#: is uncorrelated: evaluated once. In-process, the cheapest: 170 us for a 200-event page,
#: against 230 us for the stacked form.
_JOINED = (
    "SELECT e.sequence, e.kind, e.actor_type, e.actor_id, e.run_id, e.occurred_at, e.summary, "
    "e.payload, h.state_version, h.pruned_watermark, "
    "(SELECT MIN(sequence) FROM {s}session_state_events WHERE session_id = ?) "
    "FROM {s}session_registry r JOIN {s}session_state_heads h ON h.session_id = r.session_id "
    "LEFT JOIN {s}session_state_events e ON e.session_id = r.session_id "
    "AND e.sequence > ? AND e.sequence <= h.state_version "
    "WHERE r.session_id = ? AND r.deleted = 0 ORDER BY e.sequence LIMIT ?"
)
#: The head row (its page columns NULL), then the page (its head columns NULL), so the head
#: is sent once rather than with every row (231 against 268 us over a socket). No outer
#: ORDER BY (a sort of the whole page, ~40 us): the rows come in branch order, and
#: `session_state` puts them in order itself when they do not.
_STACKED = (
    "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, h.state_version, "
    "h.pruned_watermark, (SELECT MIN(sequence) FROM {s}session_state_events WHERE session_id = ?) "
    "FROM {s}session_registry r JOIN {s}session_state_heads h ON h.session_id = r.session_id "
    "WHERE r.session_id = ? AND r.deleted = 0 "
    "UNION ALL SELECT * FROM (SELECT e.sequence, e.kind, e.actor_type, e.actor_id, e.run_id, "
    "e.occurred_at, e.summary, e.payload, CAST(NULL AS {int}), CAST(NULL AS {int}), "
    "CAST(NULL AS {int}) FROM {s}session_state_events e "
    "WHERE e.session_id = ? AND e.sequence > ? AND e.sequence <= (SELECT h.state_version "
    "FROM {s}session_state_heads h WHERE h.session_id = ?) ORDER BY e.sequence LIMIT ?) page"
)


class _SessionState(Rendered):
    def fetch_tuples(self, template: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """One statement, atomic on its own, outside an explicit transaction; rows as tuples.
        Each backend runs it its cheapest way."""
        raise NotImplementedError

    def session_state(
        self, session_id: UUID, *, after: int | None, limit: int
    ) -> SessionState | None:
        """Head, pruned watermark, earliest retained sequence and the page after `after`
        (none when None); None for an unknown or deleted session."""
        found = self._head_and_page(
            self.dialect.bind_id(session_id), _NO_PAGE if after is None else after, max(limit, 1)
        )
        if found is None:
            return None
        first, page = found
        head = Head(first[8], first[9])
        if after is None:
            return SessionState(head, [], None)
        return SessionState(head, [row[:8] for row in page], first[10])

    def _head_and_page(
        self, sid: Any, since: int, limit: int
    ) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]] | None:
        raise NotImplementedError


class JoinedSessionState(_SessionState):
    def _head_and_page(
        self, sid: Any, since: int, limit: int
    ) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]] | None:
        rows = self.fetch_tuples(_JOINED, (sid, since, sid, limit))
        if not rows:
            return None
        return rows[0], (rows if rows[0][0] is not None else [])


class StackedSessionState(_SessionState):
    def _head_and_page(
        self, sid: Any, since: int, limit: int
    ) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]] | None:
        rows = self.fetch_tuples(_STACKED, (sid, sid, sid, since, sid, limit))
        if rows and rows[0][0] is None:  # the head row first, as UNION ALL yields them
            page = rows[1:]
        else:  # any other order (SQL promises none); no head row: unknown or deleted
            heads = [row for row in rows if row[0] is None]
            if not heads:
                return None
            rows = [heads[0], *(row for row in rows if row[0] is not None)]
            page = rows[1:]
        page.sort(key=_first)  # one linear pass when already in order, as it comes
        return rows[0], page
