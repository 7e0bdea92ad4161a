"""How the store's own errors reach a caller: a connection error (the store cannot be
reached, as opposed to a lost race or a bug) becomes `StoreUnavailableError`, after one more
try when it failed fast (a stale pooled connection); a closed store answers at once."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from eventsourcing.persistence import InterfaceError, OperationalError

from session_awareness.application.errors import StoreUnavailableError
from session_awareness.logs import get_logger

log = get_logger()
R = TypeVar("R")
#: Errors that mean the store cannot be reached, as opposed to a lost race or a bug.
STORE_ERRORS = (OperationalError, InterfaceError)
#: A connection error faster than this is a stale pooled connection, worth one more try.
FAST_FAILURE = 0.5
#: Why every read and command of a closed service fails.
CLOSED = "the service is closed"


def closed_error() -> StoreUnavailableError:
    return StoreUnavailableError(CLOSED)


def read_guarded(name: str, read: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """Run a read of the store (it changes nothing, so asking again is always safe): a
    connection error is asked once more when it failed fast, else `StoreUnavailableError`."""
    started = time.monotonic()
    try:
        return read(*args, **kwargs)
    except STORE_ERRORS as error:
        if time.monotonic() - started > FAST_FAILURE:
            raise StoreUnavailableError(str(error)) from error
        log.info("query_retried", query=name, error=str(error))
    try:
        return read(*args, **kwargs)
    except STORE_ERRORS as error:
        raise StoreUnavailableError(str(error)) from error
