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


def arrays_sent(batches: dict[writes.Write, list[Any]], *, keys_repeat: bool) -> list[bool]:
    """Whether each batch went as ONE array statement."""
    cursor = Statements()
    ScratchStore(Dialect()).write_as_arrays(cursor, batches, keys_repeat=keys_repeat)
    return [sql.startswith("INSERT INTO session_dedupe_keys (session_id, dedupe_key) SELECT")
            or " FROM unnest(" in sql for sql, _ in cursor.sent]  # fmt: skip


class TestWhichWritesGoAsArrays:
    def test_the_keys_of_a_page_go_as_one_statement(self) -> None:
        """R-R2: 800 idempotency keys of a replay's page are one statement, not 800."""
        sid = uuid4()
        rows = [(sid, f"turn-{n}") for n in range(800)]
        assert arrays_sent({writes._KEY: rows}, keys_repeat=True) == [True]

    def test_a_write_that_neither_folds_nor_commutes_goes_row_by_row_where_keys_repeat(
        self,
    ) -> None:
        """R-R2: in a replay's batch a cursor drained twice has two rows of the drain's
        write, in order; an `UPDATE … FROM unnest` would set it from either, so the rows go
        one at a time. A save's batch (a key once) keeps the array form."""
        wid = uuid4().hex
        rows = [(1, 2, 2, 10, wid), (2, 3, 3, 11, wid)]
        write = writes._CURSOR_ACKNOWLEDGE
        assert write.fold is None and not write.commutes and write.unnest is not None
        assert arrays_sent({write: rows}, keys_repeat=True) == [False]
        assert arrays_sent({write: rows}, keys_repeat=False) == [True]

    def test_a_write_that_folds_goes_as_arrays_where_keys_repeat(self) -> None:
        """A folding write holds one row per key in a batch: its array form is exact."""
        write = writes._CURSOR_MOVE
        assert write.fold is not None and write.unnest is not None
        rows = [(1, 2, 2, None, 10, uuid4()), (1, 2, 2, None, 10, uuid4())]
        assert arrays_sent({write: rows}, keys_repeat=True) == [True]

    def test_one_row_goes_as_it_is(self) -> None:
        assert arrays_sent({writes._KEY: [(uuid4(), "k")]}, keys_repeat=True) == [False]


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
            read_model.write_as_arrays(c, {writes._KEY: [(sid, "a")]}, keys_repeat=True)
            rows = [(sid, "b"), (sid, "a"), (sid, "c"), (sid, "b")]
            read_model.write_as_arrays(c, {writes._KEY: rows}, keys_repeat=True)
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
