"""A second OS process for the cursor races: watches and unwatches one pair until told to
stop (its stdin closes), then prints how many calls it made and what they raised, as JSON.

Run as `python -m tests.reliability.race_worker URL WATCHER TARGET PAUSE_SECONDS`.
"""

from __future__ import annotations

import json
import logging
import sys
import threading

import structlog

from session_awareness.application import open_service


def main(url: str, watcher: str, target: str, pause: str) -> None:
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    calls, errors = 0, []
    with open_service(url) as svc:
        print(json.dumps({"ready": True}), flush=True)
        while not stop.is_set():
            try:
                svc.watch(watcher, target)
                svc.unwatch(watcher, target)
            except Exception as error:  # noqa: BLE001 -- reported to the test
                errors.append(repr(error))
            calls += 2
            stop.wait(float(pause))
    print(json.dumps({"calls": calls, "errors": errors}), flush=True)


if __name__ == "__main__":
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    main(*sys.argv[1:5])
