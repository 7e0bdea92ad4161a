"""Shared by the reliability tests: fresh databases per backend, the audit, and deadlines."""

from __future__ import annotations

import tempfile
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from session_awareness.application import SessionAwareness
from session_awareness.testing.pgcluster import PostgresCluster
from tests.conftest import assert_rebuild_matches
from tests.conftest import wait_until as shared_wait_until

#: Generous on purpose: a deadline bounds a hang, it does not measure speed.
DEADLINE = 60.0


class Database:
    """A fresh database on one backend: a SQLite file in a temp dir, or a PostgreSQL schema
    of its own (dropped by `discard`)."""

    def __init__(self, backend: str, cluster: PostgresCluster | None = None) -> None:
        self.backend, self.cluster = backend, cluster
        if backend == "sqlite":
            self._dir = tempfile.TemporaryDirectory(prefix="reliability-")
            self.url = "sqlite:///" + str(Path(self._dir.name) / "sessions.db")
        else:
            assert cluster is not None
            self.schema = f"r_{uuid.uuid4().hex[:12]}"
            self.url = f"{cluster.url}?schema={self.schema}"

    def discard(self) -> None:
        if self.backend == "sqlite":
            self._dir.cleanup()
            return
        assert self.cluster is not None
        with psycopg.connect(self.cluster.url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
            )


def assert_audit_clean(svc: SessionAwareness) -> None:
    """R-R2: the read models equal a rebuild from the event store, by the service's own
    `audit()` (issue 6) when it has one, and by the suite's row-by-row rebuild check."""
    audit = getattr(svc, "audit", None)
    if callable(audit):
        report: Any = audit()
        assert report.clean, f"audit reports differences: {report.as_dict()!r}"
    assert_rebuild_matches(svc)


wait_until = partial(shared_wait_until, timeout=DEADLINE)


def all_events(svc: SessionAwareness, key: str) -> list[dict[str, Any]]:
    """Every retained event of `key`, page by page (R-S1: at most 200 per page)."""
    out: list[dict[str, Any]] = []
    since = 0
    while True:
        page = svc.session_status(key, changes_since=since)["stateChanges"]
        out += page["events"]
        if not page["truncated"]:
            return out
        since = out[-1]["sequence"]
