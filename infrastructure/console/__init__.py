"""The read-only operator console and its Prometheus metrics (R-O1, R-O2).

`session-awareness console` serves it; a host embeds it with `create_app(svc, token=…)`,
an ASGI application over a service opened for looking. Needs the `console` extra; the
metrics modules (`host_metrics`, `metrics`) need only its `prometheus-client`, so the web
application is imported when `create_app` is first asked for.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from session_awareness.infrastructure.console.app import create_app


def __getattr__(name: str) -> Any:
    if name != "create_app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from session_awareness.infrastructure.console.app import create_app  # noqa: PLC0415

    return create_app


__all__ = ["create_app"]
