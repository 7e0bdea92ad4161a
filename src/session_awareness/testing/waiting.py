"""Waiting on a condition with a deadline: how a test waits for what another thread or
process does, instead of sleeping for a guessed time."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], timeout: float = 30, interval: float = 0.01) -> bool:
    """Ask `condition` until it holds, `interval` seconds apart, or until `timeout` seconds
    have passed; True as soon as it holds, else what one last asking says.

    >>> answers = iter([False, False, True])
    >>> wait_until(lambda: next(answers), timeout=5, interval=0)
    True
    >>> wait_until(lambda: False, timeout=0)
    False
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)  # the deadline bounds the wait; this only spaces the asking
    return condition()
