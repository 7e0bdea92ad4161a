"""A host that closes the service while its other threads' calls are under way must not crash
(R-M2, R-L8): the call under way ends as it would have, every later call fails as a call of
a closed service does, and each connection is closed once no statement runs on it.

On SQLite, closing a sqlite3 connection while another thread runs a statement on it crashes
the process (a segmentation fault), and the library's pool closes its connections in use
when it closes. Each scenario here runs in a process of its own, so that the crash it guards
against fails the test instead of ending the run: a read held in its statement (SQLite's
progress handler says it is running), on the thread's own reading connection and on a
connection of the pool, while the main thread closes the service. PostgreSQL is not
concerned: psycopg's pool closes a connection in use only when it is returned."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

#: The scenario, run as `python -c SCENARIO URL PATH`; it prints what the held read returned
#: and what a call after the close raised.
SCENARIO = r"""
import sqlite3, sys, threading
from session_awareness.application import StoreUnavailableError, open_service

url, path = sys.argv[1], sys.argv[2]
running = threading.Event()
connect = sqlite3.connect

def traced(*args, **kwargs):
    conn = connect(*args, **kwargs)

    def progress():
        if threading.current_thread().name == "caller":
            running.set()  # the caller's statement is running
        return 0

    conn.set_progress_handler(progress, 10_000)
    return conn

sqlite3.connect = traced
svc = open_service(url, maintenance="manual")
svc.open_session("agent:main:main")
SLOW = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) "
    "SELECT count(*) FROM c"
)
out = []

def read():
    try:
        if path == "reader":
            out.append(svc.store.recorder.read_models.fetch_tuples(SLOW)[0][0])
        else:
            with svc.store.recorder.datastore.transaction(commit=False) as c:
                c.execute(SLOW)
                out.append(c.fetchone()[0])
    except Exception as error:
        out.append(repr(error))

caller = threading.Thread(target=read, name="caller")
caller.start()
assert running.wait(60), "the read never ran"
svc.close()
caller.join(120)
try:
    svc.sessions_list()
except StoreUnavailableError as error:
    out.append(type(error).__name__)
print(out)
"""


@pytest.mark.parametrize("path", ["reader", "pool"])
def test_a_close_while_a_read_runs_does_not_crash_the_process(tmp_path: Path, path: str) -> None:
    """R-M2, R-L8: the service closed while another thread's read runs on the thread's own
    reading connection (`reader`) or on one of the pool's (`pool`): the process lives on
    (it crashed with a segmentation fault), the read returns its rows, and a call after the
    close raises `StoreUnavailableError`."""
    url = "sqlite:///" + str(tmp_path / "sessions.db")
    done = subprocess.run(
        [sys.executable, "-c", SCENARIO, url, path],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "[3000000, 'StoreUnavailableError']", done.stderr[-2000:]
