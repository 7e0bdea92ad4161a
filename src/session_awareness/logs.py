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
"""

from __future__ import annotations

import logging
from typing import Any

import structlog
from structlog.typing import EventDict, WrappedLogger

from session_awareness import LOGGER_NAME

_logfmt = structlog.processors.LogfmtRenderer(sort_keys=True)


def _to_record(
    _: WrappedLogger, __: str, event_dict: EventDict
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The stdlib record's message, `<event> key=value …`, and its exception, if any."""
    kwargs = {key: event_dict.pop(key) for key in ("exc_info", "stack_info") if key in event_dict}
    event = str(event_dict.pop("event", ""))
    fields = _logfmt(None, "", event_dict) if event_dict else ""
    return ((f"{event} {fields}" if fields else event),), kwargs


class LibraryLogger:
    """A structlog logger that follows the host's structlog configuration when there is one,
    and the standard library's `session_awareness` logger otherwise."""

    def __init__(self) -> None:
        self._configured: Any = structlog.get_logger(LOGGER_NAME)
        self._stdlib: Any = structlog.wrap_logger(
            logging.getLogger(LOGGER_NAME),
            processors=[structlog.stdlib.filter_by_level, _to_record],
            wrapper_class=structlog.stdlib.BoundLogger,
        )

    def __getattr__(self, name: str) -> Any:
        route = self._configured if structlog.is_configured() else self._stdlib
        return getattr(route, name)


_LOGGER = LibraryLogger()


def get_logger() -> Any:
    """The library's logger (one for every module: events are told apart by their names)."""
    return _LOGGER
