"""LISTEN for wakes published by any process, on a dedicated connection (R-N7).

A lost connection is re-opened with a short back-off (at most half a second apart, so the
listener is back within a second of the server); after each reconnect `on_reconnect` runs
(the service records the signals it kept and wakes every watcher with a pending notice), so
a lost NOTIFY costs only a late wake, never a notice: notices are durable cursor state.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.sql import SQL, Identifier

from session_awareness.logs import get_logger

log = get_logger()
MAX_BACKOFF = 0.5


class WakeListener:
    def __init__(
        self,
        *,
        conninfo: str,
        channel: str,
        on_wake: Callable[[str], None],
        on_reconnect: Callable[[], None],
        skip: Callable[[int], bool],
        poll_interval: float = 0.5,
    ) -> None:
        self._conninfo = conninfo  # holds the password: never logged
        self._channel = channel
        self._on_wake = on_wake
        self._on_reconnect = on_reconnect
        self._skip = skip
        self._poll = poll_interval
        self._stop = threading.Event()
        self._stopping = threading.RLock()
        self._pipe_closed = False
        self._stop_pipe = os.pipe()  # written on stop, so the listener never waits a poll out
        self._thread: threading.Thread | None = None
        self.connected = threading.Event()
        self.connection: psycopg.Connection[Any] | None = None

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name="session-awareness-wakes", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        with self._stopping:
            if self._stop.is_set():
                return
            # Wake the listener first, then tell it to stop: it closes the pipe only after
            # seeing the stop, so this write never meets a closed descriptor.
            if not self._pipe_closed:
                os.write(self._stop_pipe[1], b"x")
            self._stop.set()
        if self._thread is None:
            self._close_pipe()
        # A service collected by the garbage collector may be closed from this very thread;
        # the thread closes the pipe itself when it ends.
        elif self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _close_pipe(self) -> None:
        with self._stopping:
            if not self._pipe_closed:
                self._pipe_closed = True
                for fd in self._stop_pipe:
                    os.close(fd)

    def wait_connected(self, timeout: float) -> bool:
        return self.connected.wait(timeout)

    @property
    def state(self) -> str:
        return "connected" if self.connected.is_set() else "reconnecting"

    def _run(self) -> None:
        try:
            self._serve()
        finally:
            self._close_pipe()

    def _serve(self) -> None:
        backoff, first = 0.05, True
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    conn.execute(SQL("LISTEN {}").format(Identifier(self._channel)))
                    self.connection = conn
                    self.connected.set()
                    log.info("wake_listener_connected", channel=self._channel)
                    if not first:
                        self._recovered()
                    first, backoff = False, 0.05
                    self._listen(conn)
            except psycopg.Error as error:
                if self._stop.is_set():
                    break
                log.warning("wake_listener_disconnected", error=str(error), retry_in=backoff)
            finally:
                self.connected.clear()
                self.connection = None
            self._stop.wait(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    def _listen(self, conn: psycopg.Connection[Any]) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([conn.fileno(), self._stop_pipe[0]], [], [], self._poll)
            if self._stop_pipe[0] in ready:
                return
            for notify in conn.notifies(timeout=0, stop_after=256):
                if self._skip(notify.pid):
                    continue
                try:
                    self._on_wake(notify.payload)
                except Exception as error:  # noqa: BLE001 -- one bad wake must not stop the feed
                    log.error("wake_listener_callback_failed", error=repr(error))

    def _recovered(self) -> None:
        try:
            self._on_reconnect()
        except Exception as error:  # noqa: BLE001 -- recovery is best effort; the feed goes on
            log.error("wake_listener_recovery_failed", error=repr(error))
