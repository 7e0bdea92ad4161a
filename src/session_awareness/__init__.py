"""session-awareness: keeps multi-agent sessions aware of each other.

This package root holds the version and the library's logging convention. The code lives in
its layers, `session_awareness.domain`, `.application` and `.infrastructure`; helpers for a
host's own tests are in `session_awareness.testing`.
"""

from __future__ import annotations

import logging
from importlib.metadata import PackageNotFoundError, version

#: The standard-library logger every event of the library goes through when the host has not
#: configured structlog; its only handler is a `NullHandler`, so nothing is written until the
#: host configures logging (the convention for libraries).
LOGGER_NAME = "session_awareness"

try:
    __version__: str = version("session-awareness")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

logging.getLogger(LOGGER_NAME).addHandler(logging.NullHandler())

__all__ = ["LOGGER_NAME", "__version__"]
