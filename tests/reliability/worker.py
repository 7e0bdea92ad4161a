"""A separate OS process for the crash and soak tests; it reports JSON lines on stdout.

`write URL NAME COUNT KEY…`      keyed human messages round-robin over the keys, each reported
                                 as recorded (`seq`) or kept for later (`seq: null`); on EOF of
                                 stdin it stops, flushes what it kept and reports `done`.
`mix URL NAME COUNT SEED KEY…`   a seeded mix of every producer over the keys (the soak).
`drain URL WATCHER`              drains the watcher's notices until EOF of stdin, reconciling
                                 each with `changesSince`.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import random
import re
import signal
import sys
import threading
from typing import Any

import structlog

from session_awareness.application import SessionAwareness, StoreUnavailableError, open_service
from session_awareness.testing import wait_until

SINCE = re.compile(r'sessionKey "(?P<target>[^"]+)" changesSince (?P<since>\d+)\.$')
WATCHERS = ["agent:main:main", "agent:ops:main"]


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def stdin_closed() -> threading.Event:
    closed = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
    return closed


def flushed(svc: SessionAwareness, timeout: float = 60) -> bool:
    """Record the kept signals, asking again until the store takes them or the deadline
    passes (the test reads the backlog this worker reports last)."""
    return wait_until(svc.flush_signals, timeout, interval=0.05)


def write(svc: SessionAwareness, name: str, count: int, keys: list[str]) -> None:
    stop = stdin_closed()
    attempts = 0
    for number in range(count):
        if stop.is_set():
            break
        key = keys[number % len(keys)]
        seq = svc.record_human_direct_message(
            key, channel="burst", idempotency_key=f"{name}-{number}"
        )
        attempts += 1
        say(key=key, seq=seq, n=number)
        stop.wait(0.002)  # a steady burst, not a tight loop; ends at once when told to stop
    flushed(svc)
    say(done=True, attempts=attempts, backlog=svc.health()["signals"])


def mix(svc: SessionAwareness, name: str, count: int, seed: int, keys: list[str]) -> None:
    """Every producer, watchers acting on their own targets included (R-W5)."""
    rng = random.Random(seed)  # noqa: S311 -- a reproducible workload, not crypto
    for number in range(count):
        key, pick = rng.choice(keys), rng.random()
        if pick < 0.4:
            kind, actor = "human_direct_message", None
            seq = svc.record_human_direct_message(
                key, channel="soak", idempotency_key=f"{name}-{number}"
            )
        elif pick < 0.75:
            kind, actor = "goal_changed", rng.choice([None, *WATCHERS])
            seq = svc.record_goal_changed(
                key, summary="goal updated", actor_type="system" if actor is None else "agent",
                actor_id=actor,
            )  # fmt: skip
        elif pick < 0.9:
            kind, actor = "run", None
            seq = svc.record_run_terminal(key, run_id=f"{name}-{number}", outcome="ok")
        else:
            kind, actor = "compacted", None
            seq = svc.record_compacted(key, operation_id=f"{name}-{number}")
        say(key=key, seq=seq, kind=kind, actor=actor)
    flushed(svc)
    say(done=True, backlog=svc.health()["signals"])


def reconcile(svc: SessionAwareness, target: str, since: int) -> list[dict[str, Any]]:
    """`changesSince`, asked again while the store is away (it comes back within the test);
    past the deadline, the store's error."""

    def changes() -> list[dict[str, Any]]:
        return list(svc.session_status(target, changes_since=since)["stateChanges"]["events"])

    answer: list[list[dict[str, Any]]] = []

    def answered() -> bool:
        try:
            answer.append(changes())
        except StoreUnavailableError:
            return False
        return True

    return answer[0] if wait_until(answered, 60, interval=0.05) else changes()


def drain(url: str, watcher: str) -> None:
    """Each notice is reported as soon as it is handed over, then with its reconciliation."""
    woken = threading.Event()
    stop = stdin_closed()
    with open_service(url, waker=lambda key: woken.set()) as svc:
        say(ready=True)
        while True:
            finishing = stop.is_set()
            try:
                texts = svc.drain_notices(watcher)
            except StoreUnavailableError as error:
                say(drain_failed=str(error)[:200])
                texts = [""]
            for text in filter(None, texts):
                found = SINCE.search(text)
                assert found is not None, text
                target, since = found["target"], int(found["since"])
                say(notice=text, target=target, since=since)
                say(target=target, since=since, events=reconcile(svc, target, since))
            if finishing and not texts:
                break
            woken.wait(0.05)
            woken.clear()
        say(done=True)


if __name__ == "__main__":
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 <pid>` prints every thread's stack
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    command, url, *rest = sys.argv[1:]
    if command == "drain":
        drain(url, rest[0])
    else:
        # A backlog that never overflows here: its bound is tested in tests/postgres.
        with open_service(url, signal_backlog=1_000_000) as service:
            say(ready=True)
            if command == "write":
                write(service, rest[0], int(rest[1]), rest[2:])
            else:
                mix(service, rest[0], int(rest[1]), int(rest[2]), rest[3:])
