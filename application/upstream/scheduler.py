"""The hosts' scheduler: each call runs on a daemon timer thread (tests use a manual one)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from session_awareness.application.upstream.provider_ports import ScheduledCall


class ThreadScheduler:
    """`call_later` on a `threading.Timer`; daemon threads never hold the process open."""

    def call_later(self, delay: float, action: Callable[[], None]) -> ScheduledCall:
        timer = threading.Timer(delay, action)
        timer.name = "session-awareness-upstream"
        timer.daemon = True
        timer.start()
        return timer
