"""An adopted session's upstream link (R-U1–R-U5): where else the session lives, and how
far the monitor has read it.

The source names the external thread; the marker is the provider's scan position, opaque to
everything but that provider. Each linking of a session is a new generation, so a refreshed
link is told apart from the one a scan started with (R-U4).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Bounds of the identifying fields; a reference may be a long file path.
MAX_ID_LENGTH = 120
MAX_REF_LENGTH = 4096
MAX_MARKER_LENGTH = 200


@dataclass(frozen=True, slots=True)
class UpstreamSource:
    """The external thread a session was adopted from: equal sources keep the marker (R-U1)."""

    catalog_id: str
    host_id: str
    thread_id: str
    upstream_kind: str
    upstream_ref: str

    def __post_init__(self) -> None:
        for name in ("catalog_id", "host_id", "thread_id", "upstream_kind"):
            check_text(getattr(self, name), name, MAX_ID_LENGTH)
        check_text(self.upstream_ref, "upstream_ref", MAX_REF_LENGTH)


@dataclass(frozen=True, slots=True)
class UpstreamLink:
    """A session's current link: its source, its generation, and the scan position."""

    source: UpstreamSource
    generation: int
    marker: str | None = None
    position: str | None = None  # the last upstream position recorded, for the record


def check_text(value: object, name: str, limit: int) -> str:
    """A non-blank, unpadded, single-line string of at most `limit` characters."""
    if (
        not isinstance(value, str)
        or not value
        or value != value.strip()
        or len(value) > limit
        or any(ord(ch) < 32 or ord(ch) == 127 for ch in value)
    ):
        raise InvalidUpstreamError(f"{name} must be one non-blank line of at most {limit} chars")
    return value


def check_marker(value: object, name: str = "marker") -> str | None:
    """A marker (or a position) is None or a short single-line string; a None marker means
    the link is not based yet, and its provider picks the starting point."""
    return None if value is None else check_text(value, name, MAX_MARKER_LENGTH)


class InvalidUpstreamError(ValueError):
    """An upstream source or marker that cannot be stored."""


class UpstreamChangedError(Exception):
    """The link is not the one a scan read: refreshed, advanced or removed meanwhile."""


__all__ = [
    "InvalidUpstreamError",
    "UpstreamChangedError",
    "UpstreamLink",
    "UpstreamSource",
    "check_marker",
]
