"""How the library logs: structlog events with stable snake_case names and key-value fields,
written nowhere until the host asks.

Each module takes its logger from `get_logger()`. An event then goes one of two ways, decided
when it is logged:

- the host configured structlog (`structlog.configure`, or `structlog.testing.capture_logs`
  in a test): the event goes through that configuration, like the host's own events;
- otherwise it becomes a record of the standard-library logger `session_awareness`
  (`signal_recorded kind=goal_changed session_key=…`, at the event's level). That logger's only
  handler is a `NullHandler`, so nothing reaches stdout or stderr, warnings included, until the
  host configures logging (`logging.basicConfig(level=logging.INFO)`, a handler of its own, or
  structlog's `ProcessorFormatter`).

`logging` itself is imported when an event first goes to it: in a process where nothing has
imported `logging`, nothing can have configured it, so every event would end at the
`NullHandler` and is dropped at once. A hook run is such a process, and importing `logging`
is about 5 ms of its start-up (issue 39, ADR 039). The `NullHandler` is added when `logging`
is first used here, before any record is made.
"""

from __future__ import annotations

import sys
from collections.abc import MutableMapping
from functools import cache, partial
from typing import Any

from session_awareness import LOGGER_NAME

#: The level of each logging method the library calls (`logging.DEBUG` … `CRITICAL`).
_LEVELS = {
    "debug": 10,
    "info": 20,
    "warning": 30,
    "error": 40,
    "exception": 40,
    "critical": 50,
}


@cache
def _stdlib_logger() -> Any:
    """The standard library's `session_awareness` logger, given its `NullHandler` the first
    time: the library writes nothing until the host configures logging (the convention for
    libraries)."""
    import logging  # noqa: PLC0415 -- see the module's docstring

    logger = logging.getLogger(LOGGER_NAME)
    if not any(type(handler) is logging.NullHandler for handler in logger.handlers):
        logger.addHandler(logging.NullHandler())
    return logger


def _discard(*_args: Any, **_kwargs: Any) -> None:
    return None


def _to_record(
    render: Any, _: Any, __: str, event_dict: MutableMapping[str, Any]
) -> tuple[Any, ...]:
    """The stdlib record's message, `<event> key=value …` (`render`: structlog's logfmt
    renderer), and its exception, if any."""
    kwargs: dict[str, Any] = {
        key: event_dict.pop(key) for key in ("exc_info", "stack_info") if key in event_dict
    }
    event = str(event_dict.pop("event", ""))
    fields = render(None, "", event_dict)
    return ((f"{event} {fields}" if event_dict else event),), kwargs


class LibraryLogger:
    """A structlog logger that follows the host's structlog configuration when there is one,
    and the standard library's `session_awareness` logger otherwise.

    structlog is imported only when an event is going somewhere: a host that configured
    structlog has imported it, and an event below the stdlib logger's level is dropped before
    anything is built (importing structlog costs a process start a tenth of a second)."""

    def __init__(self) -> None:
        self._stdlib: Any = None

    def __getattr__(self, name: str) -> Any:
        # Another thread may be importing structlog right now: its module is in `sys.modules`
        # before its names are. A host that configured structlog has imported it whole.
        is_configured = getattr(sys.modules.get("structlog"), "is_configured", None)
        if is_configured is not None and is_configured():
            structlog: Any = sys.modules["structlog"]
            return getattr(structlog.get_logger(LOGGER_NAME), name)
        level = _LEVELS.get(name)
        if level is not None and "logging" not in sys.modules:
            return _discard  # nothing imported `logging`, so nothing configured it to show this
        if level is not None and not _stdlib_logger().isEnabledFor(level):
            return _discard
        return getattr(self._stdlib_route(), name)

    def _stdlib_route(self) -> Any:
        if self._stdlib is None:
            import structlog  # noqa: PLC0415

            render = structlog.processors.LogfmtRenderer(sort_keys=True)
            self._stdlib = structlog.wrap_logger(
                _stdlib_logger(),
                processors=[structlog.stdlib.filter_by_level, partial(_to_record, render)],
                wrapper_class=structlog.stdlib.BoundLogger,
            )
        return self._stdlib


_LOGGER = LibraryLogger()


def get_logger() -> Any:
    """The library's logger (one for every module: events are told apart by their names)."""
    return _LOGGER
