"""The guided demo: a manager, two children, a human stepping in, one notice, an exact delta.

`run_demo` tells the story on a database that holds no sessions yet and hands every line of
the timeline to `emit` (the CLI passes `print`); this module never prints by itself.
"""

from __future__ import annotations

import json
import shlex
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from session_awareness.application import SessionAwareness, open_service
from session_awareness.application.ports import CursorRow
from session_awareness.configuration import redact, sqlite_file
from session_awareness.testing import FakeClock, RecordingWaker

MANAGER = "agent:main:main"
RESEARCHER = "agent:main:subagent:researcher"
WRITER = "agent:main:subagent:writer"
NAMES = {MANAGER: "manager", RESEARCHER: "researcher", WRITER: "writer"}
START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
INDENT = " " * 10  # lines that belong to the step above line up under its text


class DemoError(Exception):
    """A step of the story did not record what it should have."""


class DatabaseNotEmptyError(DemoError):
    """The database given already holds sessions, so the story would not add up."""


class DemoClock(FakeClock):
    """The service clock of the demo: it moves only when the story moves it."""

    def tick(self, seconds: int) -> str:
        """Move forward and return the new time as HH:MM:SS, for the timeline."""
        return self.advance(seconds=seconds).strftime("%H:%M:%S")


@contextmanager
def temporary_database_url() -> Iterator[str]:
    """A `sqlite:///` URL naming a new file in a new temporary directory, which is removed
    with the file when the block ends."""
    with tempfile.TemporaryDirectory(prefix="session-awareness-demo-") as folder:
        yield "sqlite:///" + quote(str(Path(folder) / "demo.db"))


def run_demo(
    database_url: str,
    emit: Callable[[str], None],
    *,
    program: str = "session-awareness",
    kept: bool = True,
) -> None:
    """Tell the story on `database_url` (it must hold no sessions) and emit the timeline.

    The last line is a command to try next, for `program` (the CLI as it was invoked): a
    query on this database when it is `kept`, else how to run the demo on one that is."""
    clock, waker = DemoClock(START), RecordingWaker()
    new_file = _new_sqlite_file(database_url)
    svc = open_service(database_url, clock=clock, waker=waker)
    try:
        if svc.sessions_list(limit=1):
            raise DatabaseNotEmptyError(
                f"the demo needs a database without sessions; {redact(database_url)} already "
                "has some (name a new file, or omit --database-url to use a fresh temporary "
                "file)"
            )
        _Story(svc, clock, waker, emit).tell(database_url, program=program, kept=kept)
    except BaseException:
        svc.close()
        if new_file is not None:  # a half-told story would refuse the next demo there
            for path in (new_file, *(Path(f"{new_file}{end}") for end in SQLITE_SIDE_FILES)):
                path.unlink(missing_ok=True)
        raise
    svc.close()


#: The files SQLite keeps beside a database (write-ahead log, shared memory, journal).
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def _new_sqlite_file(database_url: str) -> Path | None:
    """The SQLite file the demo is about to create, or None (another database, an
    in-memory one, or a file that is already there): an interrupted demo removes it."""
    name = sqlite_file(database_url)
    path = None if name is None else Path(name)
    return None if path is None or path.exists() else path.absolute()


class _Story:
    def __init__(
        self,
        svc: SessionAwareness,
        clock: DemoClock,
        waker: RecordingWaker,
        emit: Callable[[str], None],
    ) -> None:
        self.svc, self.clock, self.waker, self.emit = svc, clock, waker, emit
        self.shown_wakes = 0

    def tell(self, database_url: str, *, program: str, kept: bool) -> None:
        svc, emit = self.svc, self.emit
        hidden = redact(database_url) != database_url
        database_url = redact(database_url)  # a password is never printed
        emit("session-awareness demo: a manager, two children, and a human who steps in")
        emit(f"database  {database_url}" + ("" if kept else " (temporary, removed afterwards)"))
        emit(f"clock     a fake clock from {START:%Y-%m-%d %H:%M:%S} UTC, moved by the story")
        emit("cursor    L = last acknowledged, N = notified, M = newest material change")
        emit("")

        self.step(0, f"manager {MANAGER} opens")
        svc.open_session(MANAGER, kind="main", label="manager")
        for child in (RESEARCHER, WRITER):
            self.step(2, f"manager spawns {child}")
            self.recorded(
                svc.record_child_spawned(child, parent=MANAGER, run_id=f"run-{NAMES[child]}"),
                child,
                "child_spawned: log only; seeds the manager's cursor",
            )
        self.cursors()

        self.step(6, "a human steps into the researcher over telegram")
        self.recorded(
            svc.record_human_direct_message(RESEARCHER, channel="telegram"),
            RESEARCHER,
            "human_direct_message: notifies; "
            f"{len(svc.pending_notices(MANAGER))} notice queued for the manager",
        )
        self.wakes()
        self.cursors()

        self.step(4, "the human changes the researcher's goal")
        self.recorded(
            svc.record_goal_changed(RESEARCHER, summary="goal updated", actor_type="human"),
            RESEARCHER,
            "goal_changed: notifies; still "
            f"{len(svc.pending_notices(MANAGER))} notice, no wake (N frozen, M moves)",
        )
        self.wakes()
        self.cursors()

        self.step(6, "the writer's run times out")
        self.recorded(
            svc.record_run_terminal(WRITER, run_id="run-writer", outcome="timeout"),
            WRITER,
            "run_failed (outcome timeout): log only, no notice",
        )
        self.wakes()

        since = self.cursor_on(RESEARCHER).acknowledged
        self.clock.tick(10)
        drained = svc.drain_notices(MANAGER)
        self.step(0, f"the manager's turn: drain_notices hands over {len(drained)} notice")
        if len(drained) != 1:
            raise DemoError(f"the manager drained {len(drained)} notices, expected 1")
        for text in drained:
            self.note(f"│ {text}")
        self.cursors()
        self.note(
            f"L moves to {self.cursor_on(RESEARCHER).acknowledged}; #3 came after the notice "
            "was queued, so one follow-up opens"
        )
        self.wakes()

        self.step(
            1, f'the manager reconciles: session_status("{RESEARCHER}", changesSince={since})'
        )
        emit(json.dumps(svc.session_status(RESEARCHER, changes_since=since), indent=2))
        emit("")
        self.recap(since)
        if kept:
            emit(
                f"try it    {program} status {RESEARCHER} --changes-since {since} "
                f"--database-url {shlex.quote(database_url)}"
                + ("   # with the password in place of ***" if hidden else "")
            )
        else:
            emit(
                f"try it    {program} demo --database-url sqlite:///demo.db"
                "   # keeps the database, to query it afterwards"
            )

    # -- the timeline's parts ------------------------------------------------------------------

    def step(self, seconds: int, text: str) -> None:
        self.emit(f"{self.clock.tick(seconds)}  {text}")

    def note(self, text: str) -> None:
        self.emit(INDENT + text)

    def recorded(self, sequence: int | None, key: str, what: str) -> None:
        if sequence is None:
            raise DemoError(f"nothing was recorded on {key} (run with --verbose to see why)")
        self.note(f"→ {NAMES[key]} #{sequence} {what}")

    def wakes(self) -> None:
        for watcher in self.waker.woken[self.shown_wakes :]:
            self.note(f"wake → {watcher}")
        self.shown_wakes = len(self.waker.woken)

    def cursor_on(self, target: str) -> CursorRow:
        for row in self.svc.read_model.cursors_of_watcher(MANAGER, pending_only=False):
            if row.target_key == target:
                return row
        raise DemoError(f"the manager holds no cursor on {target}")

    def cursors(self) -> None:
        parts = []
        for target in (RESEARCHER, WRITER):
            row = self.cursor_on(target)
            state = "pending" if row.pending else "synced"
            parts.append(
                f"{NAMES[target]} {row.acknowledged} {row.notified} {row.material} {state}"
            )
        self.note(f"manager's cursors (L N M): {' · '.join(parts)}")

    def recap(self, since: int) -> None:
        follow_up = self.cursor_on(RESEARCHER).acknowledged
        for line in (
            "what just happened",
            "  • several changes, one notice: #2 queued it; #3 only moved M, the text stayed put.",
            "  • log-only events don't notify: the writer's timeout (writer #2) woke no one.",
            f"  • exact delta: changesSince {since} returned exactly #2 and #3, moved no cursor.",
            f"  • acknowledge on drain: L = {follow_up}, what the notice covered; #3 was newer, so "
            f"one follow-up",
            f"    (changesSince {follow_up}) waits for the manager's next turn "
            f"({len(self.waker.woken)} wakes in all).",
        ):
            self.emit(line)
