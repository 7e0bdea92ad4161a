"""A separate OS process for the multi-process tests: `append` records a burst on one session;
`listen` opens the service with a waker and reports wakes and pending notices as JSON lines.

`keep` opens the service, waits for a line on stdin (the test stops the server meanwhile),
records three goal changes the store cannot take, reports what it kept, and waits to be
killed (R-L10).

Run as `python worker.py append URL KEY COUNT GO_FILE`, `python worker.py listen URL WATCHER`
or `python worker.py keep URL KEY`.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from pathlib import Path

import structlog

from session_awareness.application import open_service


def say(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def append(url: str, key: str, count: int, go_file: Path) -> None:
    with open_service(url) as svc:
        say(ready=True)
        while not go_file.exists():  # all workers start their burst together
            threading.Event().wait(0.005)
        sequences = [svc.record_human_direct_message(key, channel="burst") for _ in range(count)]
        say(sequences=sequences)


def listen(url: str, watcher: str) -> None:
    done = threading.Event()
    holder: dict[str, object] = {}

    def waker(key: str) -> None:
        svc = holder["svc"]
        say(woken=key, pending=svc.pending_notices(watcher))  # type: ignore[attr-defined]

    with open_service(url, waker=waker) as svc:
        holder["svc"] = svc
        say(
            ready=True,
            listener=svc.health()["wakeListener"],
            backend_pid=svc._listener.connection.info.backend_pid,
        )  # type: ignore[union-attr]
        threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
        done.wait(120)


def keep(url: str, key: str) -> None:
    svc = open_service(url)
    say(ready=True)
    sys.stdin.readline()
    results = [
        svc.record_goal_changed(key, summary=summary)
        for summary in ("goal created", "goal updated", "goal cleared")
    ]
    say(results=results, kept=svc.kept_signals, spool=svc.health()["spool"])
    sys.stdin.readline()  # killed meanwhile: never closed


if __name__ == "__main__":
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    command, url, *rest = sys.argv[1:]
    if command == "append":
        append(url, rest[0], int(rest[1]), Path(rest[2]))
    elif command == "keep":
        keep(url, rest[0])
    else:
        listen(url, rest[0])
