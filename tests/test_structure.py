"""The package's modules import each other without a circle (module-level, deferred and
`TYPE_CHECKING` imports alike), so each layer and module can be read from the bottom up."""

import re
from pathlib import Path
from typing import Any

import structlog
from eventsourcing.domain import Aggregate

from bench import structure
from bench.structure import PACKAGE, import_circles, import_graph, paths
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
    """Every public name of `SessionAwareness` is one docs/api.md documents (as
    `` `name` `` or `` `name(…)` ``), and none comes from the eventsourcing library: the
    write application stays behind `store`."""
    readme = (Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text()
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


def test_the_architecture_page_shows_the_paths_as_measured() -> None:
    """`docs/architecture.md`'s table of the record, drain and `changesSince` paths gives the
    files, hops and climbs back up `python -m bench.structure` measures, so the page cannot
    go stale."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "architecture.md").read_text()
    shown = {
        name: (int(files), int(hops), int(climbs))
        for name, files, hops, climbs in re.findall(
            r"^\| one `(record_human_direct_message|drain_notices|session_status)\b[^|]*\|"
            r" (\d+) \| (\d+) \| (\d+) \|",
            page,
            flags=re.MULTILINE,
        )
    }
    measured = paths()
    assert shown == {
        "record_human_direct_message": _counted(measured["record"]),
        "drain_notices": _counted(measured["drain"]),
        "session_status": _counted(measured["changes_since"]),
    }


def _counted(path: dict[str, Any]) -> tuple[int, int, int]:
    return path["file_count"], path["hops"], path["climbs"]


def test_the_paths_do_not_depend_on_how_logging_is_configured() -> None:
    """The library's logger takes a path of its own when structlog is configured and when
    it is not: the figures are the same either way (a suite's earlier test may have
    configured it, and left it so)."""
    saved, was = structlog.get_config(), structlog.is_configured()
    measured = []
    try:
        for configured in (False, True):
            structlog.reset_defaults()
            if configured:
                structlog.configure(processors=[structlog.processors.KeyValueRenderer()])
            measured.append([_counted(path) for path in paths().values()])
    finally:
        structlog.reset_defaults()
        if was:
            structlog.configure(**saved)
    assert measured[0] == measured[1]


def test_a_record_and_a_drain_each_ask_the_domain_once() -> None:
    """Issue 35: a command loads what it needs, asks the domain once and saves; the record
    and the drain paths climb back up from the domain to their command at most once each
    (R-W5, R-W7 and the rest of who is told are decided in that one call)."""
    measured = paths()
    assert measured["record"]["climbs"] <= 1
    assert measured["drain"]["climbs"] <= 1


def test_a_climb_is_counted_when_a_command_asks_the_domain_again() -> None:
    """A command module that hands an aggregate to the domain, loads, and hands it again
    climbs back up twice; pure answers about values are not climbs."""

    class Thing(Aggregate):
        pass

    def command() -> None:
        thing = Thing()
        structure._hands_aggregate([thing], Aggregate)  # a stand-in for the load
        domain_call(thing)
        structure._hands_aggregate([thing], Aggregate)
        domain_call([(thing, 1)])
        domain_call("a value")
        structure._hands_aggregate([], Aggregate)  # a stand-in for the save

    project = str(Path(structure.__file__).resolve().parent.parent) + "/"
    domain_call = _compiled_in(project + "domain/stand_in.py")
    traced = structure._traced(command, project, "tests/test_structure.py")
    assert traced["climbs"] == 2


def _compiled_in(filename: str) -> Any:
    """A function whose code says it lives in `filename` (a domain module stand-in)."""
    namespace: dict[str, Any] = {}
    exec(compile("def domain_call(value):\n    return value\n", filename, "exec"), namespace)  # noqa: S102 -- a fixed stand-in
    return namespace["domain_call"]


def test_no_module_repeats_another_modules_name() -> None:
    """A module's name says what it holds, once in the package: no two `audit.py`, so a name
    in a traceback, a log or a review points at one file (`__init__` and `__main__` aside)."""
    root = Path(__file__).resolve().parent.parent
    names: dict[str, list[str]] = {}
    for folder in ("domain", "application", "infrastructure", "src"):
        for path in sorted((root / folder).rglob("*.py")):
            if path.stem not in ("__init__", "__main__"):
                names.setdefault(path.name, []).append(str(path.relative_to(root)))
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}
