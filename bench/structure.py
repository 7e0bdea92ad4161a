"""`python -m bench.structure [--json]`: the shape of the house, in figures that can be compared
before and after a change to it.

- the facade: how many classes `SessionAwareness` is built from, and its public attributes,
  its own against those it inherits from eventsourcing;
- the application layer: its modules, and its import floors (the longest chain of imports
  between its modules, import circles counted as one floor);
- import circles anywhere in the package (module-level and deferred imports alike);
- the record, drain and `changesSince` paths: the project files one
  `record_human_direct_message` on a watched session, one `drain_notices` of its watcher's
  notice and one `session_status(changes_since=…)` pass through (SQLite, warm), their hops
  (a call that crosses from one file to another), and their climbs back up: how many times
  the command's own module (`recording.py`, `watching.py`, `queries.py`) hands loaded
  aggregates to the domain and takes control back to load, save or carry on
  (application → domain → application). A command that loads, asks the domain once and
  saves climbs back up once; the domain's pure answers about values (which keys to load, a
  key's ref) are not a climb, nor is what the unit of work, the projection and the store do
  with aggregates on the command's behalf.

Nothing here is timed: these figures do not depend on the machine.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("domain", "application", "infrastructure")
PACKAGE = "session_awareness"


def _modules() -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    found: dict[str, Path] = {}
    roots = [(ROOT / layer, f"{PACKAGE}.{layer}") for layer in LAYERS]
    roots.append((ROOT / "src" / PACKAGE, PACKAGE))
    for base, prefix in roots:
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if prefix == PACKAGE and parts and parts[0] in LAYERS:
                continue
            found[".".join([prefix, *parts])] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """The package's modules that `name` imports, wherever the import statement is."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names]
            # `from package import module` imports the module; the package only for a name.
            targets = [*names, base] if any(n not in modules for n in names) else names
        else:
            continue
        for dotted in targets:
            target = dotted
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


def import_graph() -> dict[str, set[str]]:
    """Each module of the package, with the package's modules it imports."""
    modules = _modules()
    return {name: set(_imports(name, path, modules)) for name, path in modules.items()}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _floors(graph: dict[str, set[str]], prefix: str) -> int:
    """The longest import chain among the modules under `prefix`, a circle counting once."""
    inside = {
        n: {m for m in e if m.startswith(prefix)} for n, e in graph.items() if n.startswith(prefix)
    }
    component = {n: n for n in inside}
    for circle in import_circles(inside):
        for member in circle:
            component[member] = circle[0]
    edges: dict[str, set[str]] = {}
    for node, targets in inside.items():
        edges.setdefault(component[node], set()).update(
            component[t] for t in targets if component[t] != component[node]
        )
    depth: dict[str, int] = {}

    def floor(node: str) -> int:
        if node not in depth:
            depth[node] = 1 + max((floor(t) for t in edges.get(node, ())), default=0)
        return depth[node]

    return max((floor(n) for n in edges), default=0)


def _facade() -> dict[str, Any]:
    from session_awareness.application import SessionAwareness  # noqa: PLC0415

    classes = [c for c in SessionAwareness.__mro__ if c is not object]
    public = {n for n in dir(SessionAwareness) if not n.startswith("_")}
    library = {
        n
        for n in public
        for c in SessionAwareness.__mro__
        if c.__module__.startswith("eventsourcing") and n in vars(c)
    }
    return {
        "classes": len(classes),
        "project_classes": sum(c.__module__.startswith(PACKAGE) for c in classes),
        "public_own": len(public - library),
        "public_from_eventsourcing": len(library),
    }


#: Comprehensions, which Python 3.12 and later run inline in their function (PEP 709): not
#: counted as calls, so the figures are the same on every Python the package supports.
INLINED = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>"})


def _traced(call: Any, project: str, command: str | None = None) -> dict[str, Any]:
    """The project files `call()` passes through, in call order, its file-to-file hops, and
    its climbs back up from the domain to the `command` module (a file of the project)."""
    from eventsourcing.domain import Aggregate  # noqa: PLC0415

    files: list[str] = []
    steps: list[str] = []  # the command module's own calls: "d" to the domain, "a" otherwise
    own = None if command is None else project + command

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code.co_name not in INLINED:
            filename = frame.f_code.co_filename
            if filename.startswith(project):
                name = filename.removeprefix(project)
                files.append(name)
                caller = frame.f_back
                if own is None or caller is None or caller.f_code.co_filename != own:
                    return
                if not name.startswith("domain/"):
                    steps.append("a")
                elif _hands_aggregate(frame.f_locals.values(), Aggregate):
                    steps.append("d")

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    hops = sum(1 for a, b in itertools.pairwise(files) if a != b)
    climbs = sum(1 for a, b in itertools.pairwise(steps) if (a, b) == ("d", "a"))
    return {
        "files": sorted(set(files)),
        "file_count": len(set(files)),
        "hops": hops,
        "climbs": climbs,
    }


def _hands_aggregate(values: Any, aggregate: type, depth: int = 3) -> bool:
    """Whether a call's arguments hold an aggregate: one of them, or inside a tuple, a list,
    a set or a mapping's values among them (a cursor and its M, every cursor a record reads)."""
    for value in values:
        if isinstance(value, aggregate):
            return True
        if depth > 1 and isinstance(value, tuple | list | set | frozenset | dict):
            inner = value.values() if isinstance(value, dict) else value
            if _hands_aggregate(inner, aggregate, depth - 1):
                return True
    return False


#: The module whose own calls are each path's command (its climbs are counted there).
COMMANDS = {
    "record": "application/recording.py",
    "drain": "application/watching.py",
    "changes_since": "application/queries.py",
}


def paths() -> dict[str, dict[str, Any]]:
    """The record, drain and `changesSince` paths, each measured warm on SQLite."""
    import structlog.testing  # noqa: PLC0415

    import session_awareness  # noqa: PLC0415
    from session_awareness.application import open_service  # noqa: PLC0415

    # The strict editable install links each file from a build folder: match the package's.
    project = str(Path(session_awareness.__file__).parent) + "/"
    child, parent = "agent:main:subagent:child", "agent:main:parent"
    # The library's logger takes a path of its own per configuration (structlog's, the stdlib
    # logger's level): capture the events, so the figures do not depend on what the host, or
    # an earlier test, configured.
    # No background maintenance: its start-up batches would race the traced command for the
    # store (a save it leads, or one the command waits behind), and the figures with them.
    with tempfile.TemporaryDirectory() as folder, structlog.testing.capture_logs():
        svc = open_service(f"sqlite:///{folder}/structure.db", maintenance="manual")
        try:
            svc.open_session(parent)
            svc.record_child_spawned(child, parent=parent, run_id="r1")
            for _ in range(3):  # warm: lazy imports and caches are not the path
                svc.record_human_direct_message(child, channel="bench")
            # The parent's notice is pending: the record moves the cursor's material.
            record = _traced(
                lambda: svc.record_human_direct_message(child, channel="bench"),
                project,
                COMMANDS["record"],
            )
            for _ in range(3):
                svc.drain_notices(parent)
                svc.record_human_direct_message(child, channel="bench")
            drain = _traced(lambda: svc.drain_notices(parent), project, COMMANDS["drain"])
            for _ in range(3):
                svc.session_status(child, changes_since=1)
            changes = _traced(
                lambda: svc.session_status(child, changes_since=1),
                project,
                COMMANDS["changes_since"],
            )
        finally:
            svc.close()
    return {"record": record, "drain": drain, "changes_since": changes}


def measure() -> dict[str, Any]:
    graph = import_graph()
    application = [n for n in graph if n.startswith(f"{PACKAGE}.application")]
    return {
        "facade": _facade(),
        "application_modules": len(application),
        "application_floors": _floors(graph, f"{PACKAGE}.application"),
        "circles": import_circles(graph),
        "paths": paths(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.structure", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    figures = measure()
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    facade, paths = figures["facade"], figures["paths"]
    print(f"SessionAwareness: {facade['classes']} classes ({facade['project_classes']} of ours); "
          f"public attributes {facade['public_own']} own + {facade['public_from_eventsourcing']} "
          "from eventsourcing")  # fmt: skip
    print(f"application/: {figures['application_modules']} modules on "
          f"{figures['application_floors']} import floors")  # fmt: skip
    print(f"import circles: {len(figures['circles'])}")
    for circle in figures["circles"]:
        print("  " + " <-> ".join(m.removeprefix(f"{PACKAGE}.") for m in circle))
    for label, path in paths.items():
        print(f"{label} path: {path['file_count']} project files, {path['hops']} file-to-file "
              f"hops, {path['climbs']} climbs back up")  # fmt: skip
        for name in path["files"]:
            print(f"  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
