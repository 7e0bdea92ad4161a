"""Model-based testing: the service against a reference model of R-L1–R-L8, R-W1–R-W7,
R-N1–R-N7, R-S1–R-S5 and R-R1–R-R3, on both backends."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, seed, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.conftest import BACKENDS
from tests.reliability.machine import STATS, ServiceMachine

FAST = settings(
    max_examples=40,  # on SQLite; PostgreSQL runs a third of them (see `run`)
    stateful_step_count=40,
    deadline=None,
    database=None,  # the same programs on every run: the fixed seed below decides them
    suppress_health_check=[HealthCheck.too_slow],
)
THOROUGH = settings(
    max_examples=150,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


#: The fixed seed of `make test`; the slow run explores new programs every time.
SEED = 20261130


def run(
    backend: str, request: pytest.FixtureRequest, budget: settings, fixed: int | None = None
) -> None:
    cluster = request.getfixturevalue("postgres") if backend == "postgresql" else None
    machine = type("Machine", (ServiceMachine,), {"backend": backend, "cluster": cluster})
    if fixed is not None:
        machine = seed(fixed)(machine)
    if backend == "postgresql" and budget is FAST:
        budget = settings(budget, max_examples=budget.max_examples // 3)
    before = STATS.copy()
    run_state_machine_as_test(machine, settings=budget)
    explored = {key: STATS[key] - before[key] for key in STATS if key.startswith(backend)}
    print(f"\nmodel-based on {backend}: {explored}")


@pytest.mark.parametrize("backend", BACKENDS)
class TestModelBased:
    def test_the_service_behaves_like_the_reference_model(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """R-L1–R-L8, R-W1–R-W7, R-N1–R-N7, R-S1–R-S5, R-R1–R-R3: after every step, notices,
        cursors and `changesSince` equal the model's."""
        run(backend, request, FAST, fixed=SEED)

    @pytest.mark.slow
    def test_the_service_behaves_like_the_reference_model_over_a_long_run(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """R-L1–R-L8, R-W1–R-W7, R-N1–R-N7, R-S1–R-S5, R-R1–R-R3, with a larger budget of
        random programs."""
        run(backend, request, THOROUGH)
