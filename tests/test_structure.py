"""The package's modules import each other without a circle (module-level, deferred and
`TYPE_CHECKING` imports alike), so each layer and module can be read from the bottom up."""

import re
from pathlib import Path

from bench.structure import PACKAGE, import_circles, import_graph
from session_awareness.application import SessionAwareness


def test_the_package_has_no_import_circle() -> None:
    assert import_circles(import_graph()) == []


def test_the_graph_sees_the_service_building_its_tools() -> None:
    """The check above is only as good as the graph: it must see a deferred import."""
    graph = import_graph()
    assert f"{PACKAGE}.application.tools" in graph[f"{PACKAGE}.application.service"]


def test_a_circle_is_found_when_there_is_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_circles(graph) == [["a", "b", "c"]]


def test_the_facade_shows_only_the_documented_api() -> None:
    """Every public name of `SessionAwareness` is one the README's API documents (as
    `` `name` `` or `` `name(…)` ``), and none comes from the eventsourcing library: the
    write application stays behind `store`."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    public = {name for name in dir(SessionAwareness) if not name.startswith("_")}
    undocumented = {n for n in public if not re.search(rf"`{re.escape(n)}[`(]", readme)}
    assert undocumented == set()
    library = {
        name
        for cls in SessionAwareness.__mro__
        if cls.__module__.startswith("eventsourcing")
        for name in vars(cls)
    }
    assert public & library == set()
