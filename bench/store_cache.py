"""Generated databases kept between runs under `bench/.cache` (git-ignored).

Building a large store through the service takes longer than measuring it, so each one is
built once and kept, keyed by a fingerprint of the code that shapes it (the domain, the
producers, the projection, the bench's generators), its parameters and the bench-only patches
applied. SQLite keeps the database file; PostgreSQL keeps a binary `COPY` of every table of
the database. A changed fingerprint, or a fresh clone, builds again.
"""

from __future__ import annotations

import hashlib
import inspect
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from importlib.metadata import version
from pathlib import Path
from typing import Any

import psycopg

from bench.context import BENCH_DIR, CACHE_DIR

REPO = BENCH_DIR.parent
SHAPERS = ["bench/seed.py", "bench/store_cache.py", "application/recording.py",
           "domain/intake.py", "application/projection.py", "domain/session.py",
           "domain/watch.py", "domain/notices.py", "domain/signals.py",
           "domain/keys.py", "domain/snapshots.py", "application/snapshotting.py",
           "domain/drains.py"]  # fmt: skip


def fingerprint(name: str, generator: Callable[..., object], *params: object) -> str:
    """`name` and a digest of what shapes the store: the product files in `SHAPERS`, the
    read-model table definitions (a cached PostgreSQL `COPY` only loads into the same
    columns), the generating function's source, its parameters, the library version, the
    patches on."""
    from bench import proposals  # noqa: PLC0415
    from session_awareness.infrastructure.readmodel.tables import READ_MODEL_DDL  # noqa: PLC0415

    text = f"{name}:{params}:{version('eventsourcing')}:{sorted(proposals.APPLIED)}"
    digest = hashlib.sha256(text.encode())
    digest.update("\n".join(READ_MODEL_DDL).encode())
    for path in (REPO / s for s in SHAPERS):
        digest.update(path.read_bytes() if path.exists() else b"-")
    digest.update(inspect.getsource(generator).encode())
    return f"{name}-{digest.hexdigest()[:16]}"


def sqlite_copy(key: str, work_dir: Path, generate: Callable[[str], None]) -> Path:
    """A fresh copy of the cached SQLite store `key`, generated (`generate(url)`) if missing."""
    CACHE_DIR.mkdir(exist_ok=True)
    cached = CACHE_DIR / f"{key}.db"
    if not cached.exists():
        for stale in CACHE_DIR.glob(f"{key.rsplit('-', 1)[0]}-*.db"):
            stale.unlink()
        building = CACHE_DIR / f"{key}.building"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{building}{suffix}").unlink(missing_ok=True)
        generate(f"sqlite:///{building}")
        with closing(sqlite3.connect(building)) as conn:  # fold the WAL into the file
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        building.rename(cached)
    copy = work_dir / f"{key}.db"
    shutil.copyfile(cached, copy)
    return copy


def _tables(conn: psycopg.Connection[Any]) -> list[str]:
    rows = conn.execute(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name"
    ).fetchall()
    return [str(row[0]) for row in rows]


def postgres_fill(
    key: str, service_url: str, raw_url: str, generate: Callable[[str], None],
    create: Callable[[str], None],
) -> None:  # fmt: skip
    """Fill an empty database with the cached store `key`: generate it (`generate(url)`) and
    keep a binary COPY of every table when missing; else `create(url)` the tables and load."""
    CACHE_DIR.mkdir(exist_ok=True)
    cached = CACHE_DIR / f"{key}.pg"
    if not (cached / "complete").exists():
        for stale in CACHE_DIR.glob(f"{key.rsplit('-', 1)[0]}-*.pg"):
            shutil.rmtree(stale)
        generate(service_url)
        cached.mkdir(parents=True)
        with psycopg.connect(raw_url) as conn:
            for table in _tables(conn):
                with (
                    (cached / f"{table}.copy").open("wb") as out,
                    conn.cursor().copy(f"COPY {table} TO STDOUT (FORMAT binary)") as copy,
                ):
                    for chunk in copy:
                        out.write(chunk)
        (cached / "complete").touch()
        return
    create(service_url)
    with psycopg.connect(raw_url) as conn:
        for table in _tables(conn):
            source = cached / f"{table}.copy"
            if not source.exists():
                continue
            # What `create` wrote (the store's marks) is in the copy too.
            conn.execute(f"DELETE FROM {table}")  # noqa: S608 -- a table name of this database
            with (
                source.open("rb") as data,
                conn.cursor().copy(f"COPY {table} FROM STDIN (FORMAT binary)") as copy,
            ):
                while chunk := data.read(1 << 20):
                    copy.write(chunk)
        conn.execute(
            "SELECT setval(pg_get_serial_sequence('sessionawareness_events', 'notification_id'),"
            " (SELECT max(notification_id) FROM sessionawareness_events))"
        )
    with psycopg.connect(raw_url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
