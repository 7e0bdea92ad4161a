"""The figures of docs/reliability.md's fault section, measured on a throwaway cluster.

Run as `.venv/bin/python -m tests.reliability.fault_figures [--rounds N]`: a frozen server
(SIGSTOP), fast and immediate restarts, and an outage of a few seconds, each on a fresh
schema with `connect_timeout=1`; prints one JSON object per scenario.
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from session_awareness.application import SessionAwareness, StoreUnavailableError, open_service
from session_awareness.testing.pgcluster import PostgresCluster
from tests.conftest import wait_until
from tests.contract.helpers import CHILD, spawn


def seconds(call: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    try:
        result = call()
    except StoreUnavailableError as error:
        result = error
    return result, round(time.monotonic() - started, 3)


def hung(cluster: PostgresCluster, producers: int) -> dict[str, Any]:
    with open_service(f"{cluster.url}?schema=fig_hung&connect_timeout=1") as svc:
        spawn(svc)
        cluster.freeze()
        try:
            took = [seconds(lambda: svc.record_goal_changed(CHILD, summary="goal updated"))[1]
                    for _ in range(producers)]  # fmt: skip
            query = seconds(lambda: svc.session_status(CHILD))[1]
            health = seconds(svc.health)[1]
        finally:
            cluster.thaw()
        thawed = time.monotonic()
        wait_until(lambda: svc.health()["signals"]["buffered"] == 0)
        return {
            "scenario": "frozen server (SIGSTOP), connect_timeout=1",
            "first_producer_s": took[0],
            "later_producers_max_s": max(took[1:]),
            "query_s": query,
            "health_s": health,
            "recorded_after_thaw_s": round(time.monotonic() - thawed, 3),
            "signals": svc.health()["signals"],
        }


def restart(cluster: PostgresCluster, mode: str) -> dict[str, Any]:
    with open_service(f"{cluster.url}?schema=fig_{mode}&connect_timeout=1&pool_size=3") as svc:
        spawn(svc)
        cluster.stop(mode=mode)  # type: ignore[arg-type]
        cluster.start()
        failed = 0
        for call in (lambda: svc.session_status(CHILD), svc.sessions_list,
                     lambda: svc.drain_notices("agent:main:main")):  # fmt: skip
            failed += isinstance(seconds(call)[0], StoreUnavailableError)
        recorded = svc.record_goal_changed(CHILD, summary="goal updated") is not None
        return {
            "scenario": f"restart ({mode})",
            "calls_failed": failed,
            "producer_recorded": recorded,
        }


def outage(cluster: PostgresCluster, down: float) -> dict[str, Any]:
    with open_service(f"{cluster.url}?schema=fig_outage&connect_timeout=1") as svc:
        spawn(svc)
        results: list[tuple[Any, float]] = []
        stop = threading.Event()

        def traffic(svc: SessionAwareness = svc) -> None:
            while not stop.is_set():
                results.append(
                    seconds(lambda: svc.record_goal_changed(CHILD, summary="goal updated"))
                )
                stop.wait(0.05)

        thread = threading.Thread(target=traffic)
        thread.start()
        wait_until(lambda: len(results) > 2)
        cluster.stop(mode="immediate")
        threading.Event().wait(down)
        cluster.start()
        answering = time.monotonic()
        wait_until(lambda: svc.health()["signals"]["flushed"] > 0, timeout=60)
        resumed = round(time.monotonic() - answering, 3)
        wait_until(lambda: results[-1][0] is not None, timeout=60)
        direct = round(time.monotonic() - answering, 3)
        stop.set()
        thread.join()
        nones = [took for result, took in results if result is None]
        return {
            "scenario": f"outage of {down:g} s under a producer call every 50 ms",
            "producer_calls": len(results),
            "returned_none": len(nones),
            "slowest_none_s": max(nones),
            "none_after_first_max_s": max(nones[1:]) if len(nones) > 1 else None,
            "first_kept_signal_recorded_after_s": resumed,
            "backlog_drained_and_producers_record_after_s": direct,
            "signals": svc.health()["signals"],
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--producers", type=int, default=20)
    parser.add_argument("--outage", type=float, default=12.0)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    with PostgresCluster() as cluster:
        for figures in (hung(cluster, args.producers), restart(cluster, "fast"),
                        restart(cluster, "immediate"), outage(cluster, args.outage)):  # fmt: skip
            print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
