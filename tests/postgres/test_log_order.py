"""The notification log is read in id order and never skips an event (ADR 002).

Audits page the event store by notification id, and every service's aggregate cache reads
the log after its last position to learn what other writers changed: both rely on ids
becoming visible in commit order, which the events table lock on the write path provides.
"""

from __future__ import annotations

import threading

from session_awareness.application import open_service
from tests.conftest import wait_until

WRITERS = 3
RECORDS = 120


def test_a_reader_tailing_the_log_during_concurrent_writes_misses_no_event(pg_url: str) -> None:
    """R-R2 (an audit replays every stored event), R-L4 (appends from several writers)."""
    with open_service(pg_url) as setup:
        for number in range(WRITERS):
            setup.open_session(f"agent:main:w{number}")
            setup.record_child_spawned(
                f"agent:main:subagent:c{number}", parent=f"agent:main:w{number}", run_id="r"
            )
    writers = [open_service(pg_url) for _ in range(WRITERS)]
    reader = open_service(pg_url)
    seen: list[int] = []
    done = threading.Event()
    failures: list[BaseException] = []

    def write(number: int) -> None:
        try:
            for _ in range(RECORDS):
                key = f"agent:main:subagent:c{number}"
                if writers[number].record_human_direct_message(key, channel="c") is None:
                    raise AssertionError("a record was not recorded")
        except BaseException as error:  # noqa: BLE001 -- reported by the test thread
            failures.append(error)

    def tail() -> None:
        position = 0
        while True:
            finished = done.is_set()  # read before the page: a last page follows the writers
            page = reader.store.recorder.originators_after(position, 7)  # type: ignore[attr-defined]
            seen.extend(row[0] for row in page)
            if page:
                position = page[-1][0]
            elif finished:
                return

    try:
        tailer = threading.Thread(target=tail)
        tailer.start()
        threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        done.set()
        assert wait_until(lambda: not tailer.is_alive(), timeout=60)
        assert not failures, failures
        stored = [n.id for n in reader.store.recorder.select_notifications(1, 100_000)]
        assert len(stored) >= WRITERS * RECORDS  # a pending watcher stores nothing (ADR 023)
        assert seen == sorted(seen)
        assert seen == stored, "the tailing reader skipped events committed behind it"
    finally:
        for service in [*writers, reader]:
            service.close()
