"""The package's modules import each other without a circle (module-level, deferred and
`TYPE_CHECKING` imports alike), so each layer and module can be read from the bottom up."""

from bench.structure import PACKAGE, import_circles, import_graph


def test_the_package_has_no_import_circle() -> None:
    assert import_circles(import_graph()) == []


def test_the_graph_sees_the_service_building_its_tools() -> None:
    """The check above is only as good as the graph: it must see a deferred import."""
    graph = import_graph()
    assert f"{PACKAGE}.application.tools" in graph[f"{PACKAGE}.application.service"]


def test_a_circle_is_found_when_there_is_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_circles(graph) == [["a", "b", "c"]]
