"""A session's audit trail as JSON entries, built from its stored events (R-R2, docs/operations.md).

`history` reads the session's own stream and the streams of the cursors on it. A cursor's
id is derived from its pair (`watch_id(watcher, target)`), and every cursor start on a target
also adds its watcher to the target's watcher index (docs/architecture.md), so the watchers named in
the session's own stream find every cursor that was ever on it — removed ones included — without
scanning the whole log. `audit` checks that index is complete (rule D2 in its report). A
drain stores its acknowledgements on the watcher's `Drains` (ADR 024): `history` reads the
streams of those watchers' drains too, and shows each acknowledgement of a cursor on the
session as the `acknowledged` step a stored `Acknowledged` event shows.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from session_awareness.domain.drains import Drains, acknowledgements, notice_open
from session_awareness.domain.session import Session
from session_awareness.domain.signals import to_ms
from session_awareness.domain.watch import Via, Watch, notice_text

_SESSION_EVENTS: dict[type, str] = {
    Session.Opened: "opened",
    Session.Reopened: "reopened",
    Session.Described: "described",
    Session.SandboxSet: "sandbox_set",
    Session.PinSet: "pin_set",
    Session.ArchiveSet: "archive_set",
    Session.TranscriptNoted: "transcript_noted",
    Session.Reset: "reset",
    Session.Deleted: "deleted",
    Session.HistoryPruned: "history_pruned",
    Session.WatcherAdded: "watcher_added",
    Session.WatcherRemoved: "watcher_removed",
}


def watchers_named(events: list[Any]) -> set[str]:
    """Every watcher and parent a session's own events name: whoever may hold a cursor on it."""
    named: set[str] = set()
    for event in events:
        if isinstance(event, Session.WatcherAdded | Session.WatcherRemoved):
            named.add(event.watcher)
        elif (
            isinstance(event, Session.Opened | Session.Reopened | Session.Described)
            and event.parent_key
        ):
            named.add(event.parent_key)
        elif isinstance(event, Session.ChildSpawned) and event.actor_id:
            named.add(event.actor_id)
    return named


def history_entries(
    recorded: list[tuple[int, Any]], target_key: str, watchers: dict[UUID, str]
) -> list[dict[str, Any]]:
    """The entries of `(notification id, event)` pairs in recording order (`watchers`: each
    cursor's watcher by cursor id); signals the session's final watermark covers are marked
    `pruned` (gone from `changesSince`)."""
    entries: list[dict[str, Any]] = []
    cursors = _Cursors(watchers)
    for position, event in recorded:
        if isinstance(event, Drains.Event):
            entries.extend(cursors.drained(position, event, target_key))
            continue
        if not cursors.shown(event):
            entries.append(_entry(position, event, target_key, watchers))
        entries.extend(cursors.advanced(position, event))
    watermark = 0
    for _, event in recorded:
        if isinstance(event, Session.HistoryPruned | Session.Deleted):
            watermark = max(watermark, event.watermark)
    for entry in entries:
        if entry["event"] == "signal":
            entry["pruned"] = entry["sequence"] <= watermark
    return entries


class _Cursors:
    """The positions of the session's cursors as its history goes, to show where M moved:
    a pending cursor stores nothing when it does (ADR 023), so each notify-eligible signal
    shows a `material_advanced` step for every pending cursor it reached (R-N2), as stores
    written before the change recorded one."""

    def __init__(self, watchers: dict[UUID, str]) -> None:
        self._watchers = watchers
        self._positions: dict[UUID, tuple[int, int, int]] = {}

    def shown(self, event: Any) -> bool:
        """Track a cursor event; True for a stored `MaterialAdvanced` already shown (a store
        written before the change: its signal showed the step)."""
        if isinstance(event, Watch.Started | Watch.Restarted):
            at = event.at_sequence
            self._positions[event.originator_id] = (at, at, at)
        elif isinstance(event, Watch.Removed):
            self._positions.pop(event.originator_id, None)
        elif isinstance(event, Watch.Moved):
            moved = (event.acknowledged, event.notified, event.material)
            before = self._positions.get(event.originator_id)
            self._positions[event.originator_id] = moved
            return isinstance(event, Watch.MaterialAdvanced) and before == moved
        return False

    def drained(self, position: int, event: Any, target_key: str) -> list[dict[str, Any]]:
        """The `acknowledged` steps of a drain (`redelivered` of a sweep's re-delivery, ADR
        031), for the cursors on this session it names."""
        steps = []
        redelivered = isinstance(event, Drains.Redelivered)
        for drained in acknowledgements(event):
            watcher = self._watchers.get(drained.watch_id)
            if watcher is None:  # a cursor on another session
                continue
            moved = (drained.acknowledged, drained.notified, drained.material)
            self._positions[drained.watch_id] = moved
            step: dict[str, Any] = {
                "position": position,
                "recordedAt": to_ms(event.timestamp),
                "event": "redelivered" if redelivered else "acknowledged",
                "watcher": watcher,
                "cursor": _positions(*moved),
            }
            if not redelivered:
                step["reopened"] = drained.reopened
            if drained.reopened:
                step["notice"] = notice_text(target_key, drained.acknowledged)
            steps.append(step)
        return steps

    def advanced(self, position: int, event: Any) -> list[dict[str, Any]]:
        """The `material_advanced` steps a notify-eligible signal makes: every pending cursor
        whose watcher is not the signal's actor (R-W5) moves its M to the signal."""
        if not isinstance(event, Session.Signal) or not event.KIND.notifies:
            return []
        steps = []
        for cursor, (acknowledged, notified, material) in self._positions.items():
            watcher = self._watchers.get(cursor)
            if notified <= acknowledged or material >= event.sequence or watcher == event.actor_id:
                continue
            self._positions[cursor] = (acknowledged, notified, event.sequence)
            steps.append({
                "position": position,
                "recordedAt": to_ms(event.timestamp),
                "event": "material_advanced",
                "watcher": watcher,
                "cursor": _positions(acknowledged, notified, event.sequence),
            })  # fmt: skip
        return steps


def _entry(position: int, event: Any, target_key: str, watchers: dict[UUID, str]) -> dict[str, Any]:
    entry: dict[str, Any] = {"position": position, "recordedAt": to_ms(event.timestamp)}
    if isinstance(event, Session.Signal):
        entry.update(
            event="signal",
            sequence=event.sequence,
            kind=event.KIND.value,
            actorType=event.actor_type,
            actorId=event.actor_id,
            runId=event.run_id,
            occurredAt=event.occurred_at,
            summary=event.summary,
            payload=event.payload,
        )
    elif isinstance(event, Session.Event):
        entry["event"] = _SESSION_EVENTS.get(type(event), type(event).__name__)
        for field in ("kind", "label", "watcher", "watermark", "sandboxed", "pinned", "archived",
                      "source"):  # fmt: skip
            if hasattr(event, field):
                entry[field] = getattr(event, field)
        if isinstance(event, Session.Opened | Session.Reopened | Session.Described):
            entry["parentSessionKey"] = event.parent_key
    else:
        cursor = _cursor_entry(event, target_key)
        entry.update(event=cursor.pop("event"), watcher=watchers.get(event.originator_id), **cursor)
    return entry


def _cursor_entry(event: Any, target_key: str) -> dict[str, Any]:
    """A cursor transition on the session: seeded or registered (by spawn, watch, parent or
    ambient grant), promoted, notice opened, material advanced, acknowledged (and reopened),
    removed and why."""
    if isinstance(event, Watch.Started | Watch.Restarted):
        at = event.at_sequence
        name = "cursor_seeded" if event.via == Via.SPAWN else "cursor_registered"
        return {
            "event": name,
            "via": event.via,
            "restarted": isinstance(event, Watch.Restarted),
            "cursor": _positions(at, at, at),
        }
    if isinstance(event, Watch.Moved):
        entry: dict[str, Any] = {
            "event": {
                Watch.NoticeOpened: "notice_opened",
                Watch.MaterialAdvanced: "material_advanced",
                Watch.Acknowledged: "acknowledged",
            }.get(type(event), type(event).__name__),
            "cursor": _positions(event.acknowledged, event.notified, event.material),
        }
        if isinstance(event, Watch.Acknowledged):
            entry["reopened"] = notice_open(event.acknowledged, event.notified)
        if isinstance(event, Watch.NoticeOpened) or entry.get("reopened"):
            entry["notice"] = notice_text(target_key, event.acknowledged)
        return entry
    if isinstance(event, Watch.Promoted):  # an ambient cursor made explicit (R-W7)
        return {"event": "cursor_promoted", "via": event.via}
    if isinstance(event, Watch.Removed):
        return {"event": "cursor_removed", "reason": event.reason}
    return {"event": type(event).__name__}


def _positions(acknowledged: int, notified: int, material: int) -> dict[str, int]:
    return {"acknowledged": acknowledged, "notified": notified, "material": material}
