"""Upstream monitoring of adopted sessions (SPEC §8): placeholder, filled in by its issue."""

from __future__ import annotations

from session_awareness.application.lifecycle import Lifecycle


class Upstream(Lifecycle):
    """Adoption, upstream links and the monitor that scans them."""
