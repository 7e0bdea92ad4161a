"""One line per history entry, for people: who, what, and the details that matter."""

from __future__ import annotations

from typing import Any


def describe(entry: dict[str, Any]) -> tuple[str, str, str]:
    """(by, event, details) of one `history` entry."""
    event = entry["event"]
    if event == "signal":
        actor = " ".join(filter(None, (entry["actorType"], entry.get("actorId"))))
        payload = " ".join(f"{k}={v}" for k, v in (entry.get("payload") or {}).items())
        details = f"#{entry['sequence']} {entry['kind']}: {entry['summary']}"
        details += f" ({payload})" if payload else ""
        details += " [pruned from changesSince]" if entry.get("pruned") else ""
        return actor, "signal", details
    if "cursor" in entry or event in ("cursor_removed", "cursor_promoted"):
        return entry.get("watcher") or "?", event, _cursor(entry)
    named = [
        f"{'parent' if field == 'parentSessionKey' else field} {entry[field]}"
        for field in ("kind", "label", "parentSessionKey", "watcher", "watermark")
        if entry.get(field) is not None
    ]
    return "session", event, ", ".join(named)


def _cursor(entry: dict[str, Any]) -> str:
    event = entry["event"]
    if event == "cursor_removed":
        return f"removed: {entry['reason']}"
    if event == "cursor_promoted":
        return f"ambient made explicit (via {entry['via']}), positions kept"
    c = entry["cursor"]
    positions = f"L {c['acknowledged']} N {c['notified']} M {c['material']}"
    if event in ("cursor_seeded", "cursor_registered"):
        again = ", again" if entry.get("restarted") else ""
        return f"{positions} (via {entry['via']}{again})"
    if event == "acknowledged":
        after = f"reopened, notice changesSince {c['acknowledged']}"
        return f"{positions}: drained; {after if entry.get('reopened') else 'synced'}"
    tail = {
        "notice_opened": f": notice changesSince {c['acknowledged']}",
        "material_advanced": ": N frozen, no second notice",
    }
    return positions + tail.get(event, "")
