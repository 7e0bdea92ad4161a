"""Wake coalescing: at most one wake per watcher per window of the service clock (R-N5).

The notices are unchanged: a wake held back only spares the host a heartbeat while the
watcher was woken a moment ago; its pending notices wait for its turn as every notice does.
"""

from __future__ import annotations

from datetime import datetime, timedelta

#: The reference coalesces wakes for 20 seconds.
DEFAULT_WAKE_COALESCE_SECONDS = 20.0
#: Watchers remembered before the ones outside the window are forgotten.
REMEMBERED = 10_000


class WakeCoalescer:
    """Remembers when each watcher was last woken; `seconds` 0 lets every wake through."""

    def __init__(self, seconds: float = DEFAULT_WAKE_COALESCE_SECONDS) -> None:
        self.window = timedelta(seconds=seconds)
        self._last: dict[str, datetime] = {}

    def admit(self, watcher: str, now: datetime) -> bool:
        """Whether `watcher` may be woken at `now`; an admitted wake opens a new window."""
        if not self.window:
            return True
        last = self._last.get(watcher)
        if last is not None and last <= now < last + self.window:
            return False
        if len(self._last) >= REMEMBERED:
            self._last = {w: t for w, t in self._last.items() if t + self.window > now}
        self._last[watcher] = now
        return True
