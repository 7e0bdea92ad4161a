"""Calling the providers: each batch on a thread of its own, all bounded by one timeout, so a
provider that fails, hangs or times out never stops the others (R-U2)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from session_awareness.application.upstream.provider_ports import (
    UpstreamProbe,
    UpstreamProvider,
    UpstreamResult,
)
from session_awareness.logs import get_logger

log = get_logger()
Results = Mapping[UUID, UpstreamResult | None]


@dataclass(frozen=True, slots=True)
class Answer:
    """A provider's results for its batch, or why there are none (`failed`, `timed_out`,
    `busy`: its call from an earlier scan is still running, `stopped`: the monitor stopped)."""

    results: Results = field(default_factory=dict)
    failure: str | None = None


class ProviderCalls:
    """Runs provider batches on daemon threads (a hung provider never holds the process)."""

    def __init__(self) -> None:
        self._running: dict[str, Future[Results]] = {}

    def run(
        self,
        batches: Mapping[str, tuple[UpstreamProvider, Sequence[UpstreamProbe]]],
        *,
        timeout: float,
        abort: Future[None],
    ) -> dict[str, Answer]:
        """Each catalog's answer; waits at most `timeout` seconds, less when `abort` is set."""
        answers: dict[str, Answer] = {}
        futures: dict[str, Future[Results]] = {}
        for catalog_id, (provider, probes) in batches.items():
            earlier = self._running.get(catalog_id)
            if earlier is not None and not earlier.done():
                log.warning("upstream_provider_busy", catalog_id=catalog_id, links=len(probes))
                answers[catalog_id] = Answer(failure="busy")
                continue
            futures[catalog_id] = self._running[catalog_id] = _start(catalog_id, provider, probes)
        deadline = time.monotonic() + timeout
        pending: set[Future[Any]] = set(futures.values())
        while pending and not abort.done() and (left := deadline - time.monotonic()) > 0:
            done, _ = wait({*pending, abort}, timeout=left, return_when=FIRST_COMPLETED)
            pending -= done
        for catalog_id, future in futures.items():
            answers[catalog_id] = _answer(catalog_id, future, timeout, stopped=abort.done())
        return answers


def _start(
    catalog_id: str, provider: UpstreamProvider, probes: Sequence[UpstreamProbe]
) -> Future[Results]:
    future: Future[Results] = Future()

    def call() -> None:
        future.set_running_or_notify_cancel()
        try:
            future.set_result(provider.scan(list(probes)))
        except Exception as error:  # noqa: BLE001 -- a provider's failure is its own (R-U2)
            future.set_exception(error)

    threading.Thread(target=call, name=f"upstream-{catalog_id}", daemon=True).start()
    return future


def _answer(catalog_id: str, future: Future[Results], timeout: float, *, stopped: bool) -> Answer:
    if not future.done():
        if stopped:
            return Answer(failure="stopped")
        log.warning("upstream_provider_timed_out", catalog_id=catalog_id, timeout=timeout)
        return Answer(failure="timed_out")
    error = future.exception()
    results: object = None if error is not None else future.result()
    if error is None and not isinstance(results, Mapping):
        error = TypeError(f"a provider returns a mapping, not {type(results).__name__}")
    if error is not None or not isinstance(results, Mapping):
        log.error("upstream_provider_failed", catalog_id=catalog_id, error=repr(error))
        return Answer(failure="failed")
    return Answer(results=results)
