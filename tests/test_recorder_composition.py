"""Each backend's application recorder holds its read models (ADR 042): one object with the
queries, the writes and the bulk writes, and a recorder that adds to the library's class
only what eventsourcing asks of it (no mixin of ours in its ancestry)."""

from __future__ import annotations

import pytest

from session_awareness.application import open_service
from session_awareness.application.store import READ_MODEL_QUERIES
from session_awareness.infrastructure.readmodel.pg_recorder import (
    PostgresReadModelRecorder,
    PostgresReadModels,
)
from session_awareness.infrastructure.readmodel.pg_round_trips import PostgresRoundTripsRecorder
from session_awareness.infrastructure.readmodel.sqlite_recorder import (
    SQLiteReadModelRecorder,
    SQLiteReadModels,
)


def ours(cls: type) -> list[str]:
    """The classes of `cls`'s ancestry that are the package's, not the library's."""
    return [k.__name__ for k in cls.__mro__ if k.__module__.startswith("session_awareness")]


@pytest.mark.parametrize(
    ("recorder", "expected"),
    [
        (SQLiteReadModelRecorder, ["SQLiteReadModelRecorder"]),
        (PostgresReadModelRecorder, ["PostgresReadModelRecorder"]),
        (PostgresRoundTripsRecorder, ["PostgresRoundTripsRecorder", "PostgresReadModelRecorder"]),
    ],
)
def test_a_recorder_is_the_librarys_class_and_its_own_overrides(
    recorder: type, expected: list[str]
) -> None:
    """R-R2: no part of the read models is mixed into the recorder's ancestry."""
    assert ours(recorder) == expected


@pytest.mark.parametrize("models", [SQLiteReadModels, PostgresReadModels])
def test_the_read_models_answer_every_query_of_the_port(models: type) -> None:
    """R-R2: the read-model object is the `ReadModel` port; the recorder is not."""
    assert READ_MODEL_QUERIES and all(callable(getattr(models, n)) for n in READ_MODEL_QUERIES)
    assert not any(hasattr(SQLiteReadModelRecorder, name) for name in READ_MODEL_QUERIES)


def test_the_service_queries_the_read_models_its_recorder_holds(database_url: str) -> None:
    """R-R2: on both backends, a session opened through the service is found by the
    recorder's read models."""
    with open_service(database_url) as svc:
        svc.open_session("agent:main:main")
        models = svc.store.recorder.read_models  # type: ignore[attr-defined]
        assert [row.key for row in models.sessions_with_key("agent:main:main")] == [
            "agent:main:main"
        ]
