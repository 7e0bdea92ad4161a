"""Helpers for a host's own tests of its session-awareness integration.

- `FakeClock`: the service clock, moved only by the test (`clock.advance(seconds=20)`).
- `RecordingWaker`: the host's waker port; `woken` lists the watchers it woke, in order.
- `wait_until(condition, timeout=30)`: ask `condition` until it holds or the deadline passes,
  for what another thread or process does (a wake, a second gateway's record).
- The pytest plugin `session_awareness.testing.plugin`, loaded automatically when the package
  is installed: fixtures `awareness_clock`, `awareness_waker`, `awareness_service` (a service on
  a temporary SQLite file) and `awareness_postgres_service` (a service in a schema of its own
  on a throwaway PostgreSQL server, skipped when no server binaries are found). Both open
  strict (`open_service(strict=True)`, R-L9): a misspelt key or value raises; a host's
  `awareness_strict` fixture returning False opens them lenient.
- `session_awareness.testing.pgcluster.PostgresCluster`: that throwaway server, for tests that
  stop, crash or restart it (needs the `postgres` extra).
"""

from __future__ import annotations

from session_awareness.testing.doubles import START, FakeClock, RecordingWaker
from session_awareness.testing.waiting import wait_until

__all__ = ["START", "FakeClock", "RecordingWaker", "wait_until"]
