"""SQLite reads run on a connection per thread (infrastructure/sqlite_store.py); a host that
serves each request on a thread of its own must not collect one open connection per
request."""

from __future__ import annotations

import threading
from pathlib import Path

from session_awareness.application import open_service
from tests.conftest import FakeClock


def test_the_reading_connections_of_ended_threads_are_closed(tmp_path: Path) -> None:
    with open_service(f"sqlite:///{tmp_path / 'sessions.db'}", clock=FakeClock()) as svc:
        svc.open_session("agent:main:main")
        for _ in range(30):  # a thread per request
            thread = threading.Thread(target=lambda: svc.session_status("agent:main:main"))
            thread.start()
            thread.join()
        assert svc.session_status("agent:main:main")["stateVersion"] == 0
        readers = svc.store.recorder.read_models._readers  # type: ignore[attr-defined]
        # Live threads keep theirs (this one, the maintenance thread); of the 30 ended
        # threads at most the last one's connection is still open.
        ended = [conn for ref, conn in readers if (t := ref()) is None or not t.is_alive()]
        assert len(ended) <= 1
        assert len(readers) - len(ended) <= 2


def test_a_thread_gets_back_the_connection_it_returned_last(tmp_path: Path) -> None:
    """The store's SQLite pool hands out the connection returned last, so one thread's commands keep
    one warm connection even after another thread (the maintenance, a host's worker) has
    made the pool hold two; first in, first out alternated them."""
    with open_service(f"sqlite:///{tmp_path / 'sessions.db'}", clock=FakeClock()) as svc:
        pool = svc.store.recorder.datastore.pool  # type: ignore[attr-defined]
        first = pool.get_connection()
        second = pool.get_connection()  # a second thread's, at the same time
        pool.put_connection(second)
        pool.put_connection(first)
        for _ in range(3):  # this thread's commands, one after another
            again = pool.get_connection()
            assert again is first
            pool.put_connection(again)
