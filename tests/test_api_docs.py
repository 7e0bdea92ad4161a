"""The embedding API explains itself: every public method of the facade and of the async API
has a docstring `help()` shows, and every producer's closed vocabulary is a `Literal` in its
signature (R-L5, R-L9)."""

from __future__ import annotations

import inspect
import typing
from functools import cached_property

import pytest

from session_awareness.application import AsyncSessionAwareness, SessionAwareness
from session_awareness.domain.signals import OUTCOME_WORDS, RUN_STATUSES, ActorType


def public_members(cls: type) -> dict[str, object]:
    """The public attributes `cls` (and its session_awareness bases) define."""
    found: dict[str, object] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith("session_awareness"):
            found.update({n: v for n, v in vars(klass).items() if not n.startswith("_")})
    return found


@pytest.mark.parametrize("cls", [SessionAwareness, AsyncSessionAwareness])
def test_every_public_method_has_a_docstring(cls: type) -> None:
    """R-L9: `help(svc.<method>)` says what it does; none is left without a docstring (an
    async twin's is its sync method's, never the generic fallback)."""
    bare = []
    for name, member in public_members(cls).items():
        if not (inspect.isfunction(member) or isinstance(member, property | cached_property)):
            continue
        doc = inspect.getdoc(member)
        if not doc or doc.startswith("The sync `"):
            bare.append(name)
    assert bare == []


def test_every_producer_says_what_it_returns_and_raises() -> None:
    """R-L9, R-L8: a producer's docstring gives its return, and what strict mode raises."""
    for name in public_members(SessionAwareness):
        if name in {"record_upstream_activity", "record_upstream_missing", "record_adopted"}:
            continue  # the monitor's own writes, and adoption: not the producers of R-L5
        if name.startswith("record_"):
            doc = inspect.getdoc(getattr(SessionAwareness, name)) or ""
            assert "Returns the new sequence" in doc, name
            assert "UnknownSessionError" in doc and "InvalidArgumentError" in doc, name


def test_the_closed_vocabularies_are_literals_in_the_signatures() -> None:
    """R-L5: `outcome` takes the rows' words and the older ones, `actor_type` the actor
    types; an IDE or mypy can check a call."""
    for cls in (SessionAwareness, AsyncSessionAwareness):
        outcome = typing.get_type_hints(cls.record_run_terminal)["outcome"]
        assert typing.get_origin(outcome) is typing.Literal
        assert set(typing.get_args(outcome)) == set(OUTCOME_WORDS)
        actor = typing.get_type_hints(cls.record_goal_changed)["actor_type"]
        assert set(typing.get_args(actor)) == {a.value for a in ActorType}
    assert set(RUN_STATUSES.values()) <= set(OUTCOME_WORDS)


def test_session_status_documents_its_page_and_a_version_beyond_the_head() -> None:
    """R-R3, R-S1: the page size (200) and what a `changesSince` beyond the head answers are
    written where the call is."""
    doc = inspect.getdoc(SessionAwareness.session_status) or ""
    assert "200" in doc
    assert "beyond the head" in doc and "events: []" in doc
