"""Audit and history over the event store, the audit trail (R-R2, ADR 002,
docs/architecture.md, docs/operations.md).

`audit()` replays every stored event, in notification order and in pages, through the one
projection into scratch read models, checking the recorded facts' rules on the way; then, in
one transaction on the live store, it replays what was recorded meanwhile, compares the two
copies table by table and key by key, and with `rebuild=True` replaces the live read models
by the rebuilt ones in that same transaction, so readers see either the old or the new.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any
from uuid import UUID

from session_awareness.application.errors import (
    AmbiguousSessionError,
    InvalidArgumentError,
    StoreUnavailableError,
    StoreVersionError,
    UnknownSessionError,
)
from session_awareness.application.ports import AuditView, LookAhead, ReadModel, ReplayTarget
from session_awareness.application.projection import RowChange, project
from session_awareness.application.store import SessionStore, log
from session_awareness.application.unit_of_work import STORE_ERRORS
from session_awareness.domain.keys import (
    InvalidKeyError,
    SessionRef,
    agent_of,
    drains_id,
    watch_id,
)

#: The audit's replay, report and history are imported by the methods that use them: every
#: service start runs `migrate_read_models`, a hook run's among them, and needs none of them
#: unless a rebuild is due (issue 39, ADR 039).
if TYPE_CHECKING:
    from session_awareness.application.audit_report import AuditReport, Difference, TableSummary

#: The store format this version reads and writes (ADR 035), marked in every store it opens.
#: Raise it with any change an older version would misread: a new stored event class, or a
#: read model whose rows older code would take for something else. 1 was never marked (the
#: versions before the mark); 2 adds `Drains.Redelivered` (ADR 034).
STORE_VERSION = 2
#: The read models' format this version keeps (ADR 044): what `read_models_outdated` checks
#: for. A start on a store marked complete for it (`read_models_complete`) skips that scan and
#: leaves it to the background maintenance's first batch (`verify_read_models`). Raise it
#: whenever this version keeps rows beside the registry that an earlier one did not write.
READ_MODELS_FORMAT = 1


def check_store_version(read_model: ReadModel) -> int | None:
    """The store's version mark (None: unmarked); `StoreVersionError` when a newer version
    than this one marked it (ADR 035): run before anything else reads the store. The error
    is the one line said: no log besides it."""
    marked = read_model.store_version()
    if marked is not None and marked > STORE_VERSION:
        raise StoreVersionError(marked, STORE_VERSION)
    return marked


#: Stored events per page (at most; a store may read fewer at a time): read, decoded,
#: checked, projected and written together.
AUDIT_PAGE_SIZE = 2000
#: Events of a page decoded, checked and projected together: a small batch's objects stay
#: in the CPU caches from one stage to the next (bench/PROPOSALS.md, D2).
REPLAY_CHUNK = 100
#: Differences kept in a report; the per-table counts stay exact.
KEEP_DIFFERENCES = 1000
#: `progress(position, last_position)`: how far the replay is, in notification ids.
Progress = Callable[[int, int], None]


class _Replay:
    """Streams stored events through the invariants and the projection into a target."""

    def __init__(self, app: SessionStore, page_size: int, progress: Progress | None) -> None:
        from session_awareness.application.invariants import Invariants  # noqa: PLC0415
        from session_awareness.application.replay import EventDecoder  # noqa: PLC0415

        self.app, self.page_size, self.progress = app, page_size, progress
        self.invariants = Invariants()
        self.decode = EventDecoder(app.mapper)
        self.position = self.events = self.total = 0
        #: Signals replayed without the row a later deletion removes (`RowsAhead`).
        self.unretained = 0

    def into(self, target: ReplayTarget, ahead: LookAhead | None = None) -> None:
        """Replay what `target` reads past `position`; with `ahead`, the same target's
        look-ahead, skipping the rows a deletion within the window deletes (`RowsAhead`:
        a look-ahead per target, so a view never learns of a deletion it will not replay)."""
        from session_awareness.application import replay  # noqa: PLC0415

        decode, check = self.decode, self.invariants.check
        rows = None if ahead is None else replay.RowsAhead(ahead, decode, replay.LOOK_AHEAD)
        while page := target.notifications(self.position, self.page_size):
            if rows is not None:
                rows.reach(self.position, page[-1].id)
            changes: list[RowChange] = []
            for start in range(0, len(page), REPLAY_CHUNK):
                recorded = [(n.id, decode(n)) for n in page[start : start + REPLAY_CHUNK]]
                for position, event in recorded:
                    check(position, event)
                chunk = project(recorded)
                changes.extend(chunk if rows is None else rows.retained(chunk))
            target.apply(changes)
            self.position, self.events = page[-1].id, self.events + len(page)
            if self.progress is not None:
                self.progress(self.position, max(self.total, self.position))
        if rows is not None:
            self.unretained += rows.unretained


class Audit:
    """Replay, rebuild and verify the read models; a session's full history."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    def audit(
        self,
        *,
        rebuild: bool = False,
        progress: Progress | None = None,
        page_size: int = AUDIT_PAGE_SIZE,
        keep: int = KEEP_DIFFERENCES,
    ) -> AuditReport:
        """Replay the event store into scratch read models and compare them with the live
        ones; with `rebuild`, swap the rebuilt ones in atomically when they differ."""
        from session_awareness.application.audit_report import AuditReport  # noqa: PLC0415

        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise InvalidArgumentError("pageSize", "must be a positive integer")
        started = time.monotonic()
        replay = _Replay(self.store, page_size, progress)
        try:
            store = self.store.audit_store()
            with store.scratch() as scratch:
                replay.total = store.last_notification_id() or 0
                log.info("audit_started", rebuild=rebuild, last_position=replay.total)
                replay.into(scratch, scratch)
                with scratch.against_live(lock=rebuild) as view:
                    replay.total = view.last_id
                    replay.into(view, view)
                    tables, differences = self._compare(view, keep)
                    repaired = rebuild and any(t.differences for t in tables.values())
                    if repaired:
                        view.replace_live()
            names: dict[str, str | None] = {}
            differences = [self._named(difference, names) for difference in differences]
        except STORE_ERRORS as error:
            raise StoreUnavailableError(str(error)) from error
        violations = replay.invariants.finish()
        report = AuditReport(
            events=replay.events,
            last_position=replay.position,
            seconds=time.monotonic() - started,
            tables=tables,
            differences=differences,
            violations=violations,
            violation_count=replay.invariants.count,
            rebuilt=repaired,
        )
        log.info(
            "audit_finished",
            events=report.events,
            seconds=round(report.seconds, 3),
            events_per_second=round(report.events_per_second),
            differences=report.difference_count,
            violations=report.violation_count,
            rebuilt=report.rebuilt,
            rows_unretained=replay.unretained,
        )
        return report

    def migrate_read_models(self, *, trust_mark: bool = False) -> bool:
        """Rebuild the read models from the event store when an earlier version wrote them
        (a read model this version keeps is missing rows): True when it did. Checked on
        every start, so a rebuild that did not finish is done again. A store a newer version
        marked is refused (`StoreVersionError`) before anything reads it; an unmarked or
        older one is marked with `STORE_VERSION` once migrated (ADR 035).

        With `trust_mark` (the start), a store marked complete for `READ_MODELS_FORMAT` is not
        scanned (ADR 044): the check is owed (`verify_owed`) and the background maintenance
        runs it first (`verify_read_models`). Any other store, and every store when called
        without it, is checked, rebuilt when rows are missing, then marked complete."""
        read_model = self.store.read_model
        marked = check_store_version(read_model)
        self.verify_owed = trust_mark and read_model.read_models_complete() == READ_MODELS_FORMAT
        migrated = False if self.verify_owed else self._complete(warn=False)
        if marked is None or marked < STORE_VERSION:
            try:
                read_model.mark_store_version(STORE_VERSION)
            except StoreUnavailableError as error:  # a role or a file that may not write
                log.warning("store_version_not_marked", version=STORE_VERSION, error=str(error))
            else:
                log.info("store_version_marked", version=STORE_VERSION, was=marked)
        return migrated

    #: Whether the last start skipped the read models' check on the strength of the mark.
    verify_owed = False

    def verify_read_models(self) -> bool:
        """The full check the start skipped on a store marked complete (ADR 044): run as the
        background maintenance's first batch. Missing rows (the store was damaged, or a
        process that keeps fewer read models wrote it, after it was marked) are never
        repaired silently: `read_models_incomplete` is logged as a warning, then the read
        models are rebuilt from the event store. True when they were."""
        self.verify_owed = False
        return self._complete(warn=True)

    def _complete(self, *, warn: bool) -> bool:
        """Check the read models, rebuild them when rows are missing, and mark the store
        complete for `READ_MODELS_FORMAT`; whether they were rebuilt."""
        read_model = self.store.read_model
        outdated = read_model.read_models_outdated()
        if outdated:
            if warn:
                log.warning(
                    "read_models_incomplete",
                    format=READ_MODELS_FORMAT,
                    action="rebuilding the read models from the event store",
                )
            report = self.audit(rebuild=True)
            log.info("read_models_migrated", events=report.events, rebuilt=report.rebuilt)
        if outdated or read_model.read_models_complete() != READ_MODELS_FORMAT:
            try:
                read_model.mark_read_models_complete(READ_MODELS_FORMAT)
            except StoreUnavailableError as error:  # a role or a file that may not write
                log.warning("read_models_not_marked", format=READ_MODELS_FORMAT, error=str(error))
        return outdated

    def _compare(
        self, view: AuditView, keep: int
    ) -> tuple[dict[str, TableSummary], list[Difference]]:
        from session_awareness.application.audit_report import (  # noqa: PLC0415
            Difference,
            TableSummary,
        )

        tables: dict[str, TableSummary] = {}
        kept: list[Difference] = []
        for table, keys in view.tables().items():
            counts: Counter[str] = Counter()
            for live, rebuilt in view.differences(table):
                difference = Difference.of(table, keys, live, rebuilt)
                counts[difference.problem] += 1
                if len(kept) < keep:
                    kept.append(difference)
            tables[table] = TableSummary(*view.row_counts(table), **counts)
        return tables, kept

    def _named(self, difference: Difference, names: dict[str, str | None]) -> Difference:
        """Name the session of a row that only carries its id, for the operator."""
        from session_awareness.application.audit_report import Difference  # noqa: PLC0415

        session_id = difference.key.get("session_id")
        if difference.subject is not None or not isinstance(session_id, str):
            return difference
        if session_id not in names:
            row = self.store.read_model.session(UUID(session_id))
            names[session_id] = None if row is None else row.key
        return Difference(
            difference.table, difference.problem, difference.key, difference.columns,
            names[session_id],
        )  # fmt: skip

    def history(self, key: str, *, agent_id: str | None = None) -> list[dict[str, Any]]:
        """A session's whole audit trail from the event store, in recording order: its
        signals (pruned ones too), lifecycle events and every cursor transition on it."""
        from session_awareness.application.history import (  # noqa: PLC0415
            history_entries,
            watchers_named,
        )

        ref = self._history_ref(key, agent_id)
        try:
            own = self._stored_events([ref.session_id])
            if not own:
                raise UnknownSessionError(key)
            watchers = {
                watch_id(watcher, ref.session_id): watcher
                for watcher in watchers_named([event for _, event in own])
            }
            # Each watcher's drains too: its acknowledgements of cursors on this session.
            drains = [drains_id(watcher) for watcher in set(watchers.values())]
            cursors = self._stored_events([*watchers, *drains]) if watchers else []
        except STORE_ERRORS as error:
            raise StoreUnavailableError(str(error)) from error
        recorded = sorted(own + cursors, key=lambda pair: pair[0])
        return history_entries(recorded, ref.key, watchers)

    def _stored_events(self, ids: Collection[UUID]) -> list[tuple[int, Any]]:
        notifications = self.store.audit_store().streams(ids)
        return [(n.id, self.store.mapper.to_domain_event(n)) for n in notifications]

    def _history_ref(self, key: str, agent_id: str | None) -> SessionRef:
        """Like `resolve`, but deleted sessions keep their history."""
        try:
            if agent_id is not None or agent_of(key) is not None:
                return SessionRef.of(key, agent_id)
        except InvalidKeyError:
            raise UnknownSessionError(key) from None
        rows = self.store.read_model.sessions_with_key(key, include_deleted=True)
        agents = sorted({row.agent_id for row in rows})
        if not agents:
            raise UnknownSessionError(key)
        if len(agents) > 1:
            raise AmbiguousSessionError(key, agents)
        return SessionRef(agents[0], key)
