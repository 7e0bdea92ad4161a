"""Fixtures for the PostgreSQL-only tests: worker processes and a service per schema."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from session_awareness.testing.pgcluster import PostgresCluster

WORKER = Path(__file__).with_name("worker.py")


@pytest.fixture
def pg_url(postgres: PostgresCluster) -> str:
    """A schema of its own on the session's cluster."""
    return f"{postgres.url}?schema=p_{uuid.uuid4().hex[:12]}"


class Worker:
    """A worker process whose JSON lines the test reads with a deadline."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def read(self, until: Callable[[dict[str, Any]], bool], timeout: float = 60) -> dict[str, Any]:
        """The first line for which `until` holds, read within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                break
            if line is None:
                break
            message = json.loads(line)
            if until(message):
                return message
        if self.process.poll() is None:
            self.process.kill()
        stderr = self.process.stderr.read() if self.process.stderr else ""
        raise AssertionError(f"no matching worker line within {timeout}s; stderr: {stderr[-2000:]}")

    def finish(self, timeout: float = 60) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        self.process.wait(timeout)


@pytest.fixture
def workers() -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def start(*args: str) -> Worker:
        worker = Worker(*args)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        if worker.process.poll() is None:
            worker.process.kill()
        worker.process.wait(10)
