"""A write for many keys in one statement (`Write.unnest`, PostgreSQL): the idempotency keys of
a replay's page or of a batch of records go as arrays, and an array form is used only where
it ends as the rows one at a time would (R-R2: a rebuild is exact)."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

from session_awareness.application import SessionAwareness, open_service
from session_awareness.infrastructure.readmodel import writes
from session_awareness.infrastructure.readmodel.audit_tables import ScratchStore
from session_awareness.infrastructure.readmodel.dialect import Dialect

LEAD = "agent:main:main"
CHILD = "agent:main:subagent:worker"


class Statements:
    """A cursor that keeps the statements it is given: (sql, how many rows)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []

    def execute(self, sql: str, params: Any) -> None:
        self.sent.append((sql, 1))

    def executemany(self, sql: str, rows: list[Any]) -> None:
        self.sent.append((sql, len(rows)))


def arrays_sent(batches: dict[writes.Write, list[Any]]) -> list[bool]:
    """Whether each batch went as ONE statement for all of its keys: its rows as arrays
    (`unnest`) or as one JSON text (`jsonb_array_elements`)."""
    cursor = Statements()
    ScratchStore(Dialect()).write_as_arrays(cursor, batches)
    return [
        (" unnest(" in sql or " jsonb_array_elements(" in sql) and rows == 1
        for sql, rows in cursor.sent
    ]


class TestWhichWritesGoAsArrays:
    def test_the_keys_of_a_page_go_as_one_statement(self) -> None:
        """R-R2: 800 idempotency keys of a replay's page are one statement, not 800; a pair
        given twice is harmless there (`DO NOTHING`)."""
        sid = uuid4()
        rows = [(sid, f"turn-{n}") for n in range(800)] + [(sid, "turn-1")]
        assert arrays_sent({writes._KEY: rows}) == [True]

    def test_rows_of_one_key_in_order_go_row_by_row(self) -> None:
        """R-R2: a batch can hold one key's rows in order (a cursor drained twice in one
        save's batch); an `UPDATE … FROM unnest` would set the row from any one of them, so
        they go one at a time. Each key once: one statement."""
        one, other = uuid4().hex, uuid4().hex
        drained = [(1, 2, 2, 10, one), (2, 3, 3, 11, one)]
        assert arrays_sent({writes._CURSOR_ACKNOWLEDGE: drained}) == [False]
        distinct = [drained[0], (2, 3, 3, 11, other)]
        assert arrays_sent({writes._CURSOR_ACKNOWLEDGE: distinct}) == [True]
        moved = [(1, 2, 2, None, 10, uuid4()), (1, 2, 2, None, 10, uuid4())]
        assert arrays_sent({writes._CURSOR_MOVE: moved}) == [True]

    def test_one_row_goes_as_it_is(self) -> None:
        assert arrays_sent({writes._KEY: [(uuid4(), "k")]}) == [False]


def keys_of(svc: SessionAwareness, sid: UUID) -> list[str]:
    with svc.store.recorder.datastore.transaction(commit=False) as c:  # type: ignore[attr-defined]
        prefix = svc.store.recorder.read_models.dialect.schema_prefix  # type: ignore[attr-defined]
        c.execute(
            f"SELECT dedupe_key FROM {prefix}session_dedupe_keys WHERE session_id = %s "  # noqa: S608 -- the store's own prefix
            "ORDER BY dedupe_key",
            (sid,),
        )
        return [row["dedupe_key"] for row in c.fetchall()]


def test_the_array_form_of_the_keys_inserts_each_pair_once(pg_url: str) -> None:
    """R-R2 on a real server: a pair given twice, and a pair already present, are each
    kept once, as `INSERT … ON CONFLICT DO NOTHING` one row at a time keeps them."""
    with open_service(pg_url) as svc:
        read_model: Any = svc.store.recorder.read_models  # type: ignore[attr-defined]
        sid = uuid4()
        with svc.store.recorder.datastore.transaction(commit=True) as c:  # type: ignore[attr-defined]
            read_model.write_as_arrays(c, {writes._KEY: [(sid, "a")]})
            rows = [(sid, "b"), (sid, "a"), (sid, "c"), (sid, "b")]
            read_model.write_as_arrays(c, {writes._KEY: rows})
        assert keys_of(svc, sid) == ["a", "b", "c"]


def test_a_rebuild_keeps_every_idempotency_key_of_a_page(pg_url: str) -> None:
    """R-R2: a replay whose pages hold hundreds of one session's keys rebuilds the index of
    keys exactly (the audit compares it with the live one), and a key is still refused."""
    with open_service(pg_url) as svc:
        svc.open_session(LEAD)
        svc.record_child_spawned(CHILD, parent=LEAD, run_id="run-1")
        for turn in range(300):
            svc.record_human_direct_message(CHILD, channel="telegram", idempotency_key=f"t{turn}")
        sid = svc.store.read_model.sessions_with_key(CHILD)[0].session_id
        assert len(keys_of(svc, sid)) > 300  # the turns' keys, and the session's own
        report = svc.audit(rebuild=True, page_size=500)
        assert report.clean, report.differences
        again = svc.record_human_direct_message(CHILD, channel="telegram", idempotency_key="t7")
        assert again is None


def test_a_rebuild_keeps_one_sessions_run_reports_in_order(pg_url: str) -> None:
    """R-R2: a replay page with one session's runs started and ended one after another
    (rows of one key in order) rebuilds the activity exactly."""
    with open_service(pg_url) as svc:
        svc.open_session(LEAD)
        svc.record_child_spawned(CHILD, parent=LEAD, run_id="run-0")
        for run in range(1, 40):
            svc.record_run_terminal(CHILD, run_id=f"run-{run - 1}", outcome="completed")
            svc.record_run_terminal(CHILD, run_id=f"late-{run}", outcome="failed")
        report = svc.audit(rebuild=True, page_size=500)
        assert report.clean, report.differences


def test_a_drains_cursors_sent_as_one_json_text_move_as_one_row_at_a_time_would(
    pg_url: str,
) -> None:
    """R-N3, R-R2 on a real server: a 30-pair drain's cursor rows go as ONE statement with
    the rows as one JSON text (`_CURSOR_ACKNOWLEDGE.json_rows`); each cursor ends where the
    drain left it, the reopened ones pending again, and the audit's rebuild, which moves
    each cursor row by row, finds every row (its time included) equal."""
    children = [f"agent:main:subagent:w{n}" for n in range(30)]
    with open_service(pg_url) as svc:
        svc.open_session(LEAD)
        for number, child in enumerate(children):
            svc.record_child_spawned(child, parent=LEAD, run_id=f"run-{number}")
            svc.record_human_direct_message(child, channel="telegram")  # 2: opens
            if number % 2:
                svc.record_human_direct_message(child, channel="telegram")  # 3
        assert len(svc.drain_notices(LEAD)) == len(children)
        rows = {
            r.target_key: r for r in svc.read_model.cursors_of_watcher(LEAD, pending_only=False)
        }
        for number, child in enumerate(children):
            row = rows[child]
            expected = (2, 3, 3) if number % 2 else (2, 2, 2)
            assert (row.acknowledged, row.notified, row.material) == expected
            assert row.pending is bool(number % 2)
        report = svc.audit(rebuild=True)
        assert report.clean, report.differences
