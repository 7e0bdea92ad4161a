"""The read-only operator console and its Prometheus metrics (R-O1).

`session-awareness console` serves it; a host embeds it with `create_app(svc, token=…)`,
an ASGI application over a service opened for looking. Needs the `console` extra.
"""

from session_awareness.infrastructure.console.app import create_app

__all__ = ["create_app"]
