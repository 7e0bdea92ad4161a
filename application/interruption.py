"""Ending the maintenance's statement under way, from the thread that closes the service
(R-M2, ADR 038).

The maintenance runs each batch inside its `Interruption`'s `scope()`. While it does, the
store's reads and saves in that thread run on connections that are `holding`: each says how
to end the statement running on it (sqlite3's `Connection.interrupt()`, psycopg's
`cancel_safe()`): every connection checked out of the store's pool, on both backends, the
thread's SQLite reader, and a connection the batch opens for itself (the audit's SQLite
scratch file, when the start's check rebuilds the read models). Only the maintenance's own
connections are ever so registered (a caller's thread has no scope, and the maintenance's
saves are never written with a caller's, `alone`). `fire()` ends the
statement of every connection held, and from then on the scope's next checkout fails at
once (`MaintenanceInterrupted`). A connection that was asked to end its statement is never
used again: the store closes it rather than return it to the pool, so a late interrupt
can only ever reach the maintenance's own work, and the database rolls back its
transaction: a batch is a transaction (the check's rebuild writes the live read models in
its last alone, the swap), nothing of it is half written."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from eventsourcing.persistence import OperationalError

from session_awareness.logs import get_logger

log = get_logger()

#: What a checkout in an interrupted scope says.
INTERRUPTED = "the maintenance was interrupted: the service is closing"


class MaintenanceInterrupted(OperationalError):
    """A store call of the maintenance after its close: a store error, as a lost connection
    is, so the batch ends and rolls back like any batch the store fails."""


class Held:
    """One connection in use by the scope; `ended` once `fire()` asked it to end its
    statement: its user must close it rather than reuse it."""

    __slots__ = ("ended",)

    def __init__(self) -> None:
        self.ended = False


#: The interruption whose scope this thread runs in (the maintenance's), if any. The
#: store's hot paths ask it directly (`CURRENT.get()`, no call of Python's): a caller's
#: command pays nothing for it.
CURRENT: ContextVar[Interruption | None] = ContextVar(
    "session_awareness_interruption", default=None
)


@contextmanager
def outside() -> Iterator[None]:
    """The store calls made inside (in this thread) are no scope's: the close does not end
    them. Only for removing what a batch made for itself alone once the batch has ended,
    interrupted or not (the audit's scratch schema on PostgreSQL): a statement that waits
    for no one else's lock, which an interrupted batch would otherwise leave behind."""
    token = CURRENT.set(None)
    try:
        yield
    finally:
        CURRENT.reset(token)


def interrupted() -> bool:
    """Whether this thread runs in a scope that has been interrupted."""
    interruption = CURRENT.get()
    return interruption is not None and interruption.fired


class Interruption:
    """The maintenance's connections in use, and how to end each one's statement."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[int, tuple[Callable[[], None], Held]] = {}
        self._tokens = itertools.count()
        self._fired = False

    @property
    def fired(self) -> bool:
        return self._fired

    @contextmanager
    def scope(self) -> Iterator[None]:
        """The store calls made inside (in this thread) are the maintenance's."""
        token = CURRENT.set(self)
        try:
            yield
        finally:
            CURRENT.reset(token)

    def check(self) -> None:
        """Raise `MaintenanceInterrupted` once fired."""
        if self._fired:
            raise MaintenanceInterrupted(INTERRUPTED)

    @contextmanager
    def holding(self, end: Callable[[], None]) -> Iterator[Held]:
        """While the block runs, `fire()` may call `end` (from another thread) to end the
        statement on the connection in use; the `Held` says whether it did. Raises
        `MaintenanceInterrupted` at once when already fired."""
        held = Held()
        with self._lock:
            self.check()
            token = next(self._tokens)
            self._held[token] = (end, held)
        try:
            yield held
        finally:
            with self._lock:  # not while `fire()` is ending its statement
                del self._held[token]

    def fire(self) -> None:
        """End the statement of each connection held, and fail every later checkout. It may
        be called again: an interrupt that found no statement running (between two of a
        batch) is repeated on the next call."""
        with self._lock:
            self._fired = True
            for end, held in self._held.values():
                held.ended = True
                try:
                    end()
                except Exception as error:  # noqa: BLE001 -- the close goes on regardless
                    log.debug("maintenance_interrupt_failed", error=repr(error))
