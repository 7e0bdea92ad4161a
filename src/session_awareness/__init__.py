"""session-awareness: keeps multi-agent sessions aware of each other.

This package root holds the version, the library's logging convention and the aggregates'
classes by the names their stored topics give them. The code lives in its layers,
`session_awareness.domain`, `.application` and `.infrastructure`; helpers for a host's own
tests are in `session_awareness.testing`.
"""

from __future__ import annotations

#: The standard-library logger every event of the library goes through when the host has not
#: configured structlog; its only handler is a `NullHandler` (added by `session_awareness.logs`,
#: which every module that logs imports), so nothing is written until the host configures
#: logging (the convention for libraries). The package root imports neither `logging` nor
#: `typing`: every entry point, a hook run among them, imports it first.
LOGGER_NAME = "session_awareness"

#: `typing.TYPE_CHECKING` without importing `typing`; mypy treats the name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    __version__: str


#: The aggregates by the names their topics give them (`session_awareness:Watch.Started`),
#: with the domain module that defines each. A stored event or snapshot names its class by
#: topic, and the library resolves a topic it has not seen by importing the module before the
#: colon, this package, and walking the names after it: so a process that has not imported an
#: aggregate's module (a hook run imports `Watch` and `Drains` only when it builds or meets
#: one, ADR 039) decodes its events all the same.
AGGREGATES = {
    "Session": "session_awareness.domain.session",
    "Watch": "session_awareness.domain.watch",
    "Drains": "session_awareness.domain.drains",
}


def __getattr__(name: str) -> object:
    """`__version__`, read from the installed distribution's metadata when first asked for:
    `importlib.metadata` is slow to import, and a hook run is a process start. An aggregate's
    class (`AGGREGATES`), its module imported when first asked for."""
    if name in AGGREGATES:
        from importlib import import_module  # noqa: PLC0415

        return getattr(import_module(AGGREGATES[name]), name)
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        found = version("session-awareness")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        found = "0+unknown"
    globals()["__version__"] = found
    return found


__all__ = ["AGGREGATES", "LOGGER_NAME", "__version__"]
