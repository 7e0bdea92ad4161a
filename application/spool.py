"""The durable spool of kept signals (R-L10): every signal the backlog keeps is written to a
local file, synced, before its producer returns, so it outlives the process — `close()`
during an outage, a crash, SIGKILL — and the next service of this host that reaches the
same store records it, once (ADR 031).

One SQLite file per store (stdlib `sqlite3`, WAL, `synchronous=FULL`: a commit is on disk
when it returns; several processes may share it, each transaction atomic), named by a digest
of the store's identity, never by its URL (which may hold a password). Each row belongs to
the service that wrote it (its `owner`), which holds an exclusive `flock` on a lock file of
its own for as long as it is open: a row whose owner's lock can be taken belongs to a
service that closed or died, and the next service of the store claims it in one
transaction, so only one process ever flushes a row.

Exactly once: before each attempt to record a spooled signal is saved, its first event
(the stored form: stream, version, state) is added to the row; a new owner asks the store
whether one of them landed before recording the signal again (`Delivery.unconfirmed`,
`event_landed`), so a crash between the store's commit and the row's removal never records
it twice. A row is removed, or its attempt added, only by its current owner."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from session_awareness.application.backlog import (
    Adopted,
    Delivery,
    SpoolError,
    SpoolReleasedError,
)
from session_awareness.domain.intake import SignalRequest
from session_awareness.domain.keys import SessionRef
from session_awareness.domain.signals import ActorType, Payload, RunOutcome, SignalKind

try:
    import fcntl
except ImportError:  # pragma: no cover -- not POSIX: no spool unless a later version adds one
    fcntl = None  # type: ignore[assignment]

#: The spool's folder under the per-user state directory.
SPOOL_FOLDER = Path("session-awareness") / "spool"
#: How long a spool transaction waits for another process's (they take milliseconds).
BUSY_TIMEOUT_MS = 5000
#: The version of a row's JSON form.
ROW_VERSION = 1


def spool_supported() -> bool:
    """Whether this platform can lock a spool (POSIX `flock`)."""
    return fcntl is not None


def default_spool_dir(environ: dict[str, str] | None = None) -> Path:
    """`$XDG_STATE_HOME/session-awareness/spool`, else `~/.local/state/session-awareness/spool`
    (the XDG base directory rule: a relative `XDG_STATE_HOME` is ignored)."""
    env = os.environ if environ is None else environ
    state = env.get("XDG_STATE_HOME", "")
    base = Path(state) if state and Path(state).is_absolute() else Path.home() / ".local" / "state"
    return base / SPOOL_FOLDER


def spool_name(identity: str) -> str:
    """The spool file's name for a store: a digest of its identity, which names no secret."""
    return "signals-" + hashlib.sha256(identity.encode()).hexdigest()[:32] + ".sqlite3"


# -- a kept signal's stored form ------------------------------------------------------------


def _request_json(request: SignalRequest) -> dict[str, Any]:
    payload = request.payload
    return {
        "kind": request.kind.value,
        "actorType": request.actor_type.value,
        "summary": request.summary,
        "occurredAt": request.occurred_at,
        "actorId": request.actor_id,
        "runId": request.run_id,
        "payload": None
        if payload is None
        else {
            "outcome": None if payload.outcome is None else payload.outcome.value,
            "channel": payload.channel,
            "turns": payload.turns,
        },
        "dedupeKey": request.dedupe_key,
        "needsAudience": request.needs_audience,
    }


def _request_of(data: dict[str, Any]) -> SignalRequest:
    payload = data["payload"]
    return SignalRequest(
        SignalKind(data["kind"]),
        ActorType(data["actorType"]),
        data["summary"],
        int(data["occurredAt"]),
        actor_id=data["actorId"],
        run_id=data["runId"],
        payload=None
        if payload is None
        else Payload(
            outcome=None if payload["outcome"] is None else RunOutcome(payload["outcome"]),
            channel=payload["channel"],
            turns=payload["turns"],
        ),
        dedupe_key=data["dedupeKey"],
        needs_audience=bool(data["needsAudience"]),
    )


def _attempt_json(stored: StoredEvent) -> dict[str, Any]:
    return {
        "originatorId": str(stored.originator_id),
        "version": stored.originator_version,
        "topic": stored.topic,
        "state": base64.b64encode(stored.state).decode(),
    }


def _attempt_of(data: dict[str, Any]) -> StoredEvent:
    return StoredEvent(
        UUID(data["originatorId"]),
        int(data["version"]),
        data["topic"],
        base64.b64decode(data["state"]),
    )


def delivery_json(item: Delivery) -> str:
    """A kept signal as the spool stores it (without its attempts, which have a column)."""
    spawn = item.spawn
    return json.dumps(
        {
            "v": ROW_VERSION,
            "key": item.key,
            "agentId": item.agent_id,
            "request": _request_json(item.request),
            "spawn": None if spawn is None else {"agentId": spawn.agent_id, "key": spawn.key},
        },
        separators=(",", ":"),
    )


def delivery_of(text: str, attempts: str, row: int) -> Delivery:
    """A spooled signal as the backlog keeps it, its attempts its unconfirmed events."""
    data = json.loads(text)
    spawn = data["spawn"]
    return Delivery(
        data["key"],
        data["agentId"],
        _request_of(data["request"]),
        spawn=None if spawn is None else SessionRef(spawn["agentId"], spawn["key"]),
        unconfirmed=tuple(_attempt_of(a) for a in json.loads(attempts)),
        spooled=row,
    )


# -- the file --------------------------------------------------------------------------------


class SignalSpool:
    """The spool of one store in `directory`. Nothing is created until a signal is kept or
    a spool left by another service is found; every method raises `SpoolError` for a spool
    it cannot use, and is safe from any thread."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        identity: str,
        *,
        to_stored: Callable[[Any], StoredEvent] | None = None,
    ) -> None:
        self.directory = Path(directory).expanduser()
        self.identity = identity
        self.path = self.directory / spool_name(identity)
        self.owner = uuid.uuid4().hex
        self._to_stored = to_stored
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None = None
        self._owned: IO[bytes] | None = None
        self.closed = False

    # -- connection and ownership -------------------------------------------------------------

    def _lock_path(self, owner: str) -> Path:
        return self.path.with_name(f"{self.path.name}.{owner}.lock")

    def _connect(self, *, create: bool) -> sqlite3.Connection | None:
        """The open connection; made on first use (None when `create` is false and there is
        no spool file yet). Takes this service's own lock before it writes anything."""
        if self.closed:
            raise SpoolReleasedError("the spool is closed")
        if self._db is not None:
            return self._db
        if not create and not self.path.exists():
            return None
        if fcntl is None:  # pragma: no cover
            raise SpoolError("no file locking on this platform")
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not self.path.exists():  # private: kept signals hold summaries and keys
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
            owned = self._lock_path(self.owner).open("wb")
            try:
                fcntl.flock(owned.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                db = sqlite3.connect(
                    self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                    check_same_thread=False,
                )  # fmt: skip
                try:
                    db.execute("PRAGMA journal_mode=WAL")
                    db.execute("PRAGMA synchronous=FULL")
                    db.execute(
                        "CREATE TABLE IF NOT EXISTS kept_signals (id INTEGER PRIMARY KEY "
                        "AUTOINCREMENT, owner TEXT NOT NULL, signal TEXT NOT NULL, "
                        "attempts TEXT NOT NULL DEFAULT '[]')"
                    )
                    db.execute("CREATE TABLE IF NOT EXISTS store (identity TEXT NOT NULL)")
                    if db.execute("SELECT count(*) FROM store").fetchone()[0] == 0:
                        db.execute("INSERT INTO store VALUES (?)", (self.identity,))
                except BaseException:
                    db.close()
                    raise
            except BaseException:
                owned.close()
                raise
        except (OSError, sqlite3.Error) as error:
            raise SpoolError(f"cannot open the spool {self.path}: {error}") from error
        self._db, self._owned = db, owned
        return db

    @contextlib.contextmanager
    def _write(self, *, create: bool = True) -> Iterator[sqlite3.Connection | None]:
        """One write transaction (`BEGIN IMMEDIATE`: other processes wait for it)."""
        with self._lock:
            try:
                db = self._connect(create=create)
                if db is None:
                    yield None
                    return
                db.execute("BEGIN IMMEDIATE")
                try:
                    yield db
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
            except (OSError, sqlite3.Error) as error:
                raise SpoolError(f"cannot write the spool {self.path}: {error}") from error

    def _stored(self, event: Any) -> StoredEvent:
        if isinstance(event, StoredEvent):
            return event
        if self._to_stored is None:
            raise SpoolError("this spool only reads (it has no event mapper)")
        return self._to_stored(event)

    # -- what the backlog asks ------------------------------------------------------------------

    def add(self, item: Delivery) -> Delivery:
        """Write a kept signal (synced before this returns); the item with its row."""
        attempts = json.dumps([_attempt_json(self._stored(e)) for e in item.unconfirmed])
        with self._write() as db:
            assert db is not None  # noqa: S101 -- created on demand
            cursor = db.execute(
                "INSERT INTO kept_signals (owner, signal, attempts) VALUES (?, ?, ?)",
                (self.owner, delivery_json(item), attempts),
            )
        return replace(item, spooled=cursor.lastrowid)

    def attempting(self, row: int, event: Any) -> None:
        """Before an attempt to record a spooled signal is saved: remember its first event.
        `SpoolError` when the row is no longer this service's (the attempt must not save)."""
        stored = _attempt_json(self._stored(event))
        with self._write() as db:
            assert db is not None  # noqa: S101
            found = db.execute(
                "SELECT attempts FROM kept_signals WHERE id = ? AND owner = ?", (row, self.owner)
            ).fetchone()
            if found is None:
                raise SpoolReleasedError(f"kept signal {row} is no longer this service's")
            attempts = [*json.loads(found[0]), stored]
            db.execute("UPDATE kept_signals SET attempts = ? WHERE id = ?",
                       (json.dumps(attempts), row))  # fmt: skip

    def remove(self, row: int) -> None:
        """The spooled signal is recorded, skipped or dropped: forget it (if still ours)."""
        with self._write() as db:
            assert db is not None  # noqa: S101
            db.execute("DELETE FROM kept_signals WHERE id = ? AND owner = ?", (row, self.owner))

    def adopt(self) -> Adopted:
        """Claim, in one transaction, the rows of every service of this store that closed or
        died (its lock can be taken), oldest first. Nothing when there is no spool file."""
        with self._lock:
            if self._db is None and not self.path.exists():
                return Adopted(())
            with self._write(create=True) as db:
                assert db is not None  # noqa: S101
                owners = [o for (o,) in db.execute(
                    "SELECT DISTINCT owner FROM kept_signals WHERE owner != ?", (self.owner,)
                )]  # fmt: skip
                gone = [owner for owner in owners if self._gone(owner)]
                rows: list[tuple[int, str, str]] = []
                for owner in gone:
                    rows += db.execute(
                        "SELECT id, signal, attempts FROM kept_signals WHERE owner = ?", (owner,)
                    ).fetchall()
                    db.execute(
                        "UPDATE kept_signals SET owner = ? WHERE owner = ?", (self.owner, owner)
                    )
                rows.sort()
            for owner in gone:
                with contextlib.suppress(OSError):
                    self._lock_path(owner).unlink()
            items: list[Delivery] = []
            broken: list[int] = []
            for row, signal, attempts in rows:
                try:
                    items.append(delivery_of(signal, attempts, row))
                except (ValueError, KeyError, TypeError):
                    broken.append(row)
            for row in broken:
                self.remove(row)
            return Adopted(tuple(items), len(broken))

    def _gone(self, owner: str) -> bool:
        """Whether the service that owns these rows is gone: its lock file is missing or its
        lock can be taken (the kernel releases it when the process ends, however it ends)."""
        try:
            probe = self._lock_path(owner).open("rb")
        except FileNotFoundError:
            return True
        with probe:
            try:
                fcntl.flock(probe.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            fcntl.flock(probe.fileno(), fcntl.LOCK_UN)
            return True

    def count(self) -> int:
        """How many signals the spool holds for this store (every service's)."""
        with self._lock:
            if self._db is None and not self.path.exists():
                return 0
            try:
                with contextlib.closing(
                    sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=1)
                ) as db:
                    return int(db.execute("SELECT count(*) FROM kept_signals").fetchone()[0])
            except sqlite3.Error as error:
                if "no such table" in str(error):
                    return 0
                raise SpoolError(f"cannot read the spool {self.path}: {error}") from error

    def owned(self) -> int:
        """How many of the spool's signals are this service's."""
        with self._lock:
            if self._db is None:
                return 0
            try:
                found = self._db.execute(
                    "SELECT count(*) FROM kept_signals WHERE owner = ?", (self.owner,)
                ).fetchone()
            except sqlite3.Error as error:
                raise SpoolError(f"cannot read the spool {self.path}: {error}") from error
            return int(found[0])

    def close(self) -> None:
        """Let the rows go: the next service of this store claims what is left. The lock
        file goes too once nothing is left to claim."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            db, owned, self._db, self._owned = self._db, self._owned, None, None
            if db is not None:
                with contextlib.suppress(sqlite3.Error):
                    db.close()
            if owned is not None:
                with contextlib.suppress(OSError):
                    self._lock_path(self.owner).unlink()
                owned.close()
