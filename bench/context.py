"""The databases a run measures: a SQLite directory and a throwaway PostgreSQL cluster.

Every scenario gets fresh databases of its own (a SQLite file, a PostgreSQL database), so one
scenario's tables and caches never flatter or burden another.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from session_awareness.testing.pgcluster import PostgresCluster

BENCH_DIR = Path(__file__).resolve().parent
CACHE_DIR = BENCH_DIR / ".cache"
RESULTS_DIR = BENCH_DIR / "results"
BACKENDS = ("sqlite", "postgresql")


@dataclass
class Context:
    """What a scenario is given: its size knobs and where its databases live."""

    quick: bool
    work_dir: Path
    pg: PostgresCluster | None
    backends: tuple[str, ...] = BACKENDS
    profile: bool = False
    _databases: set[str] = field(default_factory=set)

    def scale(self, full: int, quick: int) -> int:
        return quick if self.quick else full

    def sqlite_path(self, name: str) -> Path:
        path = self.work_dir / f"{name}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return path

    def pg_url(self, name: str) -> str:
        """A fresh, empty database on the cluster; its URL (no query string)."""
        if self.pg is None:
            raise RuntimeError("PostgreSQL is not running in this run")
        if name in self._databases:
            raise ValueError(f"database {name!r} was already handed out")
        self._databases.add(name)
        return self.pg.create_database(name)

    def database(self, backend: str, name: str) -> tuple[str, str]:
        """(service URL, raw driver target) of a fresh database for `backend`: a SQLite file
        path, or a PostgreSQL connection URL."""
        if backend == "sqlite":
            path = self.sqlite_path(name)
            return f"sqlite:///{path}", str(path)
        url = self.pg_url(name)
        return f"{url}?pool_size=2&max_overflow=8&connect_timeout=10", url


@contextmanager
def run_context(
    *, quick: bool, backends: tuple[str, ...] = BACKENDS, profile: bool = False
) -> Iterator[Context]:
    """A work directory for SQLite files, and a PostgreSQL cluster when it is wanted
    (`synchronous_commit` left at its durable default)."""
    work_dir = Path(tempfile.mkdtemp(prefix="sa-bench-"))
    try:
        if "postgresql" in backends:
            from session_awareness.testing.pgcluster import PostgresCluster  # noqa: PLC0415 -- only when wanted

            with PostgresCluster(
                dbname="bench", settings={"max_connections": "100", "shared_buffers": "256MB"}
            ) as pg:
                yield Context(quick, work_dir, pg, backends, profile)
        else:
            yield Context(quick, work_dir, None, backends, profile)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
