"""Group commit: concurrent saves of one process share one transaction and one commit
(ADR 025).

A save joins the queue; if no batch is being written, its caller leads: it takes everything
queued (its own save and whatever others queued meanwhile, never waiting for more), writes
the batch in one transaction, each save inside a savepoint of its own, and commits. Callers
that queued while a batch was being written wait for it to end, then the next of them leads.
Every caller gets its own answer: its notification ids, or its own error.

- A save the store refuses (a conflict on its aggregate's version, a row the read model
  refuses, a bug in its projection) is rolled back to its savepoint; the batch goes on and
  its caller gets the error (a conflict is retried by the service, as when it writes alone).
- A failure of the store itself (unreachable, locked, a connection lost; the commit's
  answer lost) ends the batch: every caller whose save had not been refused gets the error
  and decides as if it had written alone (read back its first event, keep it in the backlog).

Each backend writes a batch its own way (`run_batch`); this is the queue, the election and the
rules for whose error is whose.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from eventsourcing import persistence
from eventsourcing.persistence import InterfaceError, OperationalError, PersistenceError

#: The DB-API error classes, the library's namesakes of which replace a driver's, most
#: specific first (`DatabaseError` is the base of the others but `InterfaceError`).
_DBAPI_ERRORS = (
    "InterfaceError",
    "OperationalError",
    "DataError",
    "IntegrityError",
    "InternalError",
    "ProgrammingError",
    "NotSupportedError",
    "DatabaseError",
)


class Save:
    """One caller's save: its stored events and the recorder's keyword arguments (the
    projected events, the quiet notices); then its answer."""

    __slots__ = ("done", "error", "events", "ids", "kwargs")

    def __init__(self, events: Sequence[Any], kwargs: dict[str, Any]) -> None:
        self.events = events
        self.kwargs = kwargs
        self.ids: Sequence[int] | None = None
        self.error: BaseException | None = None
        self.done = False

    def refused(self, error: BaseException) -> None:
        """The store refused this save alone (rolled back to its savepoint)."""
        self.ids = None
        self.error = error


def ends_the_batch(error: BaseException, driver: ModuleType) -> bool:
    """Whether a save's error is the store's own (unreachable, locked, a connection lost), so
    the batch cannot go on, rather than a refusal of that save alone."""
    if not isinstance(error, Exception):
        return True  # an interrupt
    stores = (driver.OperationalError, driver.InterfaceError, OperationalError, InterfaceError)
    return isinstance(error, stores)


def as_library_error(error: Exception, driver: ModuleType) -> Exception:
    """The library's error for a driver's (as its own recorders raise them: a conflict is an
    `IntegrityError`, a `RecordConflictError`); any other error as it is."""
    for name in _DBAPI_ERRORS:
        if isinstance(error, getattr(driver, name)):
            mapped: Exception = getattr(persistence, name)(str(error))
            mapped.__cause__ = error
            return mapped
    if isinstance(error, driver.Error):
        mapped = PersistenceError(str(error))
        mapped.__cause__ = error
        return mapped
    return error


class GroupCommit:
    """The queue of one recorder's saves and the election of the caller that writes them."""

    def __init__(self, run_batch: Callable[[list[Save]], None]) -> None:
        #: Writes the saves in one transaction and commits; calls `Save.refused` for each
        #: save rolled back alone; raises when the batch as a whole failed.
        self._run_batch = run_batch
        self._changed = threading.Condition(threading.Lock())
        self._queue: list[Save] = []
        self._leading = False
        #: Batches written, saves in them and the most in one, since the recorder opened.
        self.batches = 0
        self.saves = 0
        self.largest = 0

    def queued(self) -> int:
        """Saves waiting for the batch being written to end."""
        with self._changed:
            return len(self._queue)

    def writing(self) -> bool:
        """Whether a batch is being written."""
        with self._changed:
            return self._leading

    def insert(
        self, events: Sequence[Any], kwargs: dict[str, Any], *, alone: bool = False
    ) -> Sequence[int] | None:
        """Save `events` in the next batch (this caller's, when none is being written) and
        return their notification ids, or raise this save's error. With `alone` (the
        maintenance's save, which its close may interrupt), in a batch of its own, written
        by this caller: no other caller's save is ever in its transaction."""
        save = Save(events, kwargs)
        with self._changed:
            if not alone:
                self._queue.append(save)
            while self._leading and not save.done:
                self._changed.wait()
            batch: list[Save] | None = None
            if alone:
                self._leading = True
                batch = [save]
            elif not save.done:
                self._leading = True
                batch, self._queue = self._queue, []
        if batch is not None:
            self._lead(batch, save)
        error = save.error
        if error is not None:
            raise error
        return save.ids

    def _lead(self, batch: list[Save], own: Save) -> None:
        try:
            self._run_batch(batch)
        except BaseException as error:  # noqa: BLE001 -- each caller raises its share
            for save in batch:
                if save.error is None:
                    save.error = error if save is own else _for_another_caller(error)
        finally:
            with self._changed:
                self.batches += 1
                self.saves += len(batch)
                self.largest = max(self.largest, len(batch))
                for save in batch:
                    save.done = True
                self._leading = False
                self._changed.notify_all()


def _for_another_caller(error: BaseException) -> BaseException:
    """The batch's error, as raised in another caller's thread: a copy (one exception object
    raised in several threads would share one traceback); an interrupt of the leader is,
    for the others, a store error (their saves' fate is unknown: they read it back)."""
    if not isinstance(error, Exception):
        return OperationalError(f"the batch was interrupted: {error!r}")
    try:
        other = copy.copy(error)
    except Exception:  # noqa: BLE001 -- an exception that cannot be copied is shared
        return error
    other.__cause__ = error
    return other
