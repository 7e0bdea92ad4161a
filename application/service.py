"""The embedding API: the `SessionAwareness` facade over its write application (`SessionStore`,
an eventsourcing `Application`) and the collaborators it composes over it, and
`open_service`, the composition root."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from session_awareness.application.audit import AUDIT_PAGE_SIZE, KEEP_DIFFERENCES, Audit, Progress
from session_awareness.application.backlog import SignalBacklog, Spool, SpoolError
from session_awareness.application.errors import (
    ConfigurationError,
    StoreUnavailableError,
    raised_from,
)
from session_awareness.application.lifecycle import Lifecycle
from session_awareness.application.ports import (
    Canceller,
    Clock,
    Dispatcher,
    ReadModel,
    SessionRow,
    Spawner,
    UpstreamLinkRow,
    WakeFeed,
    WakeListener,
    Waker,
    system_clock,
)
from session_awareness.application.process_metrics import Metrics, watch_gauges
from session_awareness.application.recording import CLOSE_MARGIN, Intake
from session_awareness.application.retention import (
    MAX_RETENTION_DAYS,
    MAX_RETENTION_ROWS,
    Maintenance,
    MaintenanceTask,
    Retention,
)
from session_awareness.application.store import SessionStore, log
from session_awareness.application.transcripts import Transcripts
from session_awareness.application.unit_of_work import STORE_ERRORS
from session_awareness.application.wakes import DEFAULT_WAKE_COALESCE_SECONDS, WakeCoalescer
from session_awareness.application.watching import Handover, Watching
from session_awareness.configuration import environment_for, redact, store_identity, url_in_force
from session_awareness.domain.keys import InvalidKeyError, SessionRef
from session_awareness.domain.notices import DEFAULT_MAIN_KEY, check_main_key
from session_awareness.domain.signals import ActorTypeWord, RunOutcomeWord

if TYPE_CHECKING:
    from eventsourcing.persistence import StoredEvent

    from session_awareness.application.audit_report import AuditReport
    from session_awareness.application.marks import Marks
    from session_awareness.application.queries import Queries
    from session_awareness.application.spool import SignalSpool
    from session_awareness.application.tools import SessionTools
    from session_awareness.application.transcript_port import (
        TranscriptSession,
        TranscriptSource,
    )
    from session_awareness.application.upstream import Upstream
    from session_awareness.application.upstream.monitor import UpstreamMonitor
    from session_awareness.application.upstream.outcomes import LinkOutcome, Written
    from session_awareness.application.upstream.provider_ports import (
        OwnUserTexts,
        RunActivity,
        Scheduler,
        UpstreamActivity,
        UpstreamProvider,
    )

#: What a process that only records (a hook run: a process start per event) never uses, the
#: service imports and builds when first asked (issue 39, ADR 039): upstream monitoring, the
#: spool's file, the audit's replay and report. This is `UpstreamMonitor`'s default timeout,
#: kept here so that importing the service does not import the monitor (a test holds the two
#: equal).
PROVIDER_TIMEOUT = 45.0

_PREFIX = "SESSIONAWARENESS_"


VISIBILITIES = ("self", "tree", "agent", "all")
#: How the sweep and the prune run (ADR 038): on a thread of the service's, or by `maintain()`.
MAINTENANCE_MODES = ("background", "manual")
#: What every producer's docstring ends with: what it returns, and raises (R-L8, R-L9).
PRODUCER_RETURNS = """

        Returns the new sequence, or None when nothing was recorded. Never raises for a
        storage failure: the signal is kept and recorded once the store answers (R-L8). The
        caller's mistakes (a key that names no live session, a value outside the producer's
        vocabulary, malformed input, a call after `close()`) are logged `signal_rejected` at
        WARNING naming the key or the field, and on a strict service
        (`open_service(strict=True)`) raise: `UnknownSessionError` or `AmbiguousSessionError`
        for a key, `InvalidArgumentError` for a value, `ServiceClosedError` after `close()`
        (R-L9). A repeat, or the R-L6 gate, returns None (`signal_skipped`, INFO)."""

F = TypeVar("F", bound=Callable[..., Any])


def _producer(method: F) -> F:
    """A producer: its docstring, then what every producer returns and raises."""
    method.__doc__ = (method.__doc__ or "") + PRODUCER_RETURNS
    return method


#: The modules of the `postgres` extra, which only the PostgreSQL backend imports.
_POSTGRES_EXTRA = frozenset({"psycopg", "psycopg_pool"})
_POSTGRES_EXTRA_HINT = " (install the postgres extra: pip install 'session-awareness[postgres]')"


class SessionAwareness:
    """Signal log, watches, notices and reconciliation for a host's sessions (docs/architecture.md).

    A plain facade over the write application, which it holds as `store` (an eventsourcing
    `Application`; operators and tests reach the library's parts through it, e.g.
    `svc.store.recorder`), and the collaborators it composes over that store: each public
    method is one of theirs. `open_service()` builds it."""

    #: What a tool caller may see (R-T2): self, tree (default), agent or all.
    visibility: str = "tree"
    #: The host's `sessions_send` delivery: (sender, target, message) -> receiving key.
    dispatcher: Dispatcher | None = None
    #: The host's `sessions_spawn`: (caller, request) -> (childSessionKey, runId).
    spawner: Spawner | None = None
    #: The host's `subagents` cancel: (caller, child, runId) -> None.
    canceller: Canceller | None = None

    _listener: WakeListener | None = None

    def __init__(
        self,
        store: SessionStore,
        *,
        retention: Retention | None = None,
        signal_backlog: int = 1000,
        main_key: str = DEFAULT_MAIN_KEY,
        ambient_groups: bool = True,
        transcript_sources: tuple[TranscriptSource, ...] | None = None,
        strict: bool = False,
        spool: Spool | None = None,
        maintenance: str = "background",
    ) -> None:
        #: The write application: the event store, its recorder and the one retry loop.
        self.store = store
        self._lifecycle = Lifecycle(store)
        self._watching = Watching(store)
        self._maintenance = Maintenance(store, retention or Retention())
        #: The sweep and prune, a batch at a time (ADR 038); on a thread unless "manual".
        self._audit = Audit(store)
        self._task = MaintenanceTask(self._maintenance, verify=self._audit.verify_read_models)
        self._threaded = maintenance == "background"
        self._intake = Intake(
            store,
            backlog=SignalBacklog(signal_backlog, spool=spool),
            main_key=main_key,
            ambient_groups=ambient_groups,
            strict=strict,
        )
        watch_gauges(store.metrics, self._intake.backlog, store.read_model)
        self._transcripts = Transcripts(store, transcript_sources)

    @cached_property
    def _queries(self) -> Queries:
        """The read side (status, lists, lineage), built on first use: a process that only
        records (a hook run) never imports it (ADR 039)."""
        from session_awareness.application.queries import Queries  # noqa: PLC0415

        return Queries(self.store.read_model, self.store.clock, self.store.resolve_id)

    @cached_property
    def _marks(self) -> Marks:
        """Labels, pins and archiving, built on first use, as `_queries`."""
        from session_awareness.application.marks import Marks  # noqa: PLC0415

        return Marks(self.store.clock, self.store.resolve, self.store.run)

    @cached_property
    def _upstream(self) -> Upstream:
        """Adoption and upstream monitoring, built on first use: a process that only records
        (a hook run) never imports them (ADR 039)."""
        from session_awareness.application.upstream import Upstream  # noqa: PLC0415

        return Upstream(self.store, self._intake)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @cached_property
    def tools(self) -> SessionTools:
        """The agent-facing session tools over this service (R-T1–R-T3)."""
        from session_awareness.application.tools import SessionTools  # noqa: PLC0415 -- built on first use

        return SessionTools(self)

    @property
    def clock(self) -> Clock:
        """The service clock (aware UTC datetimes)."""
        return self.store.clock

    @property
    def metrics(self) -> Metrics:
        """This process's counters, record latencies and gauges (R-O2): `metrics.figures()`;
        Prometheus's form is `ServiceCollector(svc)` (docs/console.md)."""
        return self.store.metrics

    @property
    def read_model(self) -> ReadModel:
        """The read models' queries, store errors typed as `StoreUnavailableError`."""
        return self.store.read_model

    @property
    def transcript_sources(self) -> tuple[TranscriptSource, ...]:
        """The sources `sessions_history` reads, in order; empty: the tool is not offered."""
        return self._transcripts.transcript_sources

    @property
    def closed(self) -> bool:
        """Whether `close()` was called."""
        return self.store.closed

    @property
    def strict(self) -> bool:
        """Whether the producers raise for the caller's mistakes (`open_service(strict=True)`,
        R-L9); either way they never raise for a storage failure (R-L8)."""
        return self._intake.strict

    def start(self, *, listener_timeout: float = 5.0) -> None:
        """Startup duties: on a store that publishes wakes, listen for other processes'
        notices (R-N7), then start the background maintenance (ADR 038), which re-delivers
        wakes for pending notices (R-N6) and prunes (R-R1, then hourly) while the service
        already answers. Read models an earlier version wrote are rebuilt first
        (`migrate_read_models`); on a store marked complete that check is the maintenance's
        first batch instead (ADR 044)."""
        self._audit.migrate_read_models(trust_mark=True)
        if self._audit.verify_owed:
            self._task.ask_verify()
        if self._intake.adopt():  # what services of this store that closed or died left
            self._intake.flush_signals(wait=False)  # before this one records anything (R-L10)
            self._intake.ensure_flushing()
        feed = getattr(self.store.recorder, "wake_listener", None)
        if feed is not None:
            self._listener = cast(WakeFeed, self.store.recorder).wake_listener(
                on_wake=self._remote_wake, on_reconnect=self._reconnected
            )
            self._listener.start()
            if not self._listener.wait_connected(listener_timeout):
                log.warning("wake_listener_not_connected", waited=listener_timeout)
        if self._threaded:
            self._task.start()

    def _remote_wake(self, watcher: str) -> None:
        """Another process opened a notice for `watcher`: wake it here too (R-N7)."""
        self.store.wake([watcher])

    def _reconnected(self) -> None:
        """The store is back: record what was kept, then re-deliver every pending wake,
        since wakes published meanwhile were lost (R-N6, R-N7)."""
        self.flush_signals()
        self._task.ask_sweep(redeliver=False)  # the process kept its notices (ADR 034)

    def health(self) -> dict[str, Any]:
        """What an operator checks: the backend, the store (`ok`, why it cannot be reached,
        or `closed` after `close()`), the signal backlog (R-L8), the spool of kept signals
        (R-L10: `{"path", "signals", "unspooled"}`, None without one) and the wake feed. It
        answers, never raises."""
        if self.closed:
            store = "closed"
        else:
            try:  # one row: a check of the store must not grow with it (issue 39)
                self.read_model.read_models_complete()
                store = "ok"
            except StoreUnavailableError as error:
                store = str(error)
        return {
            "backend": self._backend(),
            "store": store,
            "signals": self._intake.backlog.stats(),
            "spool": self._spool_health(),
            "wakeListener": self._listener.state if self._listener is not None else "off",
        }

    def _spool_health(self) -> dict[str, Any] | None:
        """Where kept signals outlive the process (R-L10): its file, how many signals it holds
        for this store (every process's), and how many kept here it could not take; None
        without a spool."""
        backlog = self._intake.backlog
        spool = backlog.spool
        if spool is None:
            return None
        health: dict[str, Any] = {"path": str(spool.path), "unspooled": backlog.unspooled_now()}
        try:
            health["signals"] = spool.count()
        except SpoolError as error:
            health["signals"], health["error"] = None, str(error)
        return health

    def _backend(self) -> str:
        """`postgresql` or `sqlite`: the store's, whether or not it is open."""
        return "postgresql" if hasattr(self.store.recorder, "wake_listener") else "sqlite"

    def close(self) -> None:
        """Stop the background maintenance, the upstream monitor and the wake listener, then
        release the connections; the service cannot be used afterwards. A maintenance batch
        under way is not waited for: its statement is interrupted on its own connection and
        rolled back (`maintenance_interrupted`, R-M2), the next start runs it again. Signals
        still kept after a last try (bounded: at most about the store's `connect_timeout`
        and a half second more) stay in the spool for the next service of the store, a
        WARNING `signal_spool_left` says how many (R-L10)."""
        self._task.close()  # ends its batch under way at once (R-M2, ADR 038)
        backlog = self._intake.backlog
        if not self.closed and backlog.items and not backlog.resting():
            self._intake.flush_signals(wait=False)  # the store may be back: a last try
        self.stop_upstream_monitor()
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
        self.store.closing.set()
        self._intake.close(join=self._call_deadline() + CLOSE_MARGIN)
        self.store.close()

    def _call_deadline(self) -> float:
        """How long one call to the store may take during an outage (`connect_timeout`)."""
        datastore = getattr(self.store.recorder, "datastore", None)
        timeout = getattr(datastore, "connect_timeout", None)
        return float(timeout) if isinstance(timeout, int | float) else 1.0

    def resolve_id(self, key: str, agent_id: str | None = None) -> tuple[SessionRef, UUID]:
        """`resolve` and the session id (a uuid5). Memoised where the answer is a pure
        function of the arguments (the key names its agent, or the agent id is given), so it
        holds across delete and reopen: whether the session is live is the read model's to
        say. A bare key without an agent id is looked up every time."""
        return self.store.resolve_id(key, agent_id)

    def resolve(self, key: str, agent_id: str | None = None) -> SessionRef:
        """The ref a key names: qualified keys name their agent; a bare key needs the agent id
        unless exactly one agent has it (R-K1, R-W3). Raises `UnknownSessionError` when
        nothing live matches: one registry read (the record path's `resolve_id` reads none)."""
        return self._queries.resolve(key, agent_id)

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
        return self._audit.audit(rebuild=rebuild, progress=progress, page_size=page_size, keep=keep)

    def migrate_read_models(self) -> bool:
        """Rebuild the read models from the event store when an earlier version wrote them
        (a read model this version keeps is missing rows): True when it did. Checked on
        every start, so a rebuild that did not finish is done again; this call always scans,
        where a start trusts a store marked complete and leaves the scan to the maintenance
        (ADR 044)."""
        return self._audit.migrate_read_models()

    def history(self, key: str, *, agent_id: str | None = None) -> list[dict[str, Any]]:
        """A session's whole audit trail from the event store, in recording order: its
        signals (pruned ones too), lifecycle events and every cursor transition on it."""
        return self._audit.history(key, agent_id=agent_id)

    def prune_preview(self) -> dict[str, Any]:
        """What `prune()` would do now, in its shape, changing nothing (R-R1, R-W6)."""
        return self._maintenance.prune_preview()

    def note_transcript(
        self, key: str, *, source: str, ref: str, agent_id: str | None = None
    ) -> bool:
        """Remember where the session's transcript is (`source` its format, such as
        `claude-code`; `ref` where it is, such as a file path). True when that changed."""
        return self._transcripts.note_transcript(key, source=source, ref=ref, agent_id=agent_id)

    def transcript_session(self, key: str, agent_id: str | None = None) -> TranscriptSession:
        """The live session and where its transcript is known to be (`UnknownSessionError`
        for an unknown or deleted session)."""
        return self._transcripts.transcript_session(key, agent_id)

    def sessions_history(
        self,
        key: str,
        *,
        limit: int | None = None,
        offset: int | None = None,
        include_tools: bool = False,
        agent_id: str | None = None,
        before: str | None = None,
    ) -> dict[str, Any]:
        """The `sessions_history` tool's JSON for a session (no visibility: the host is
        trusted): the newest `limit` messages (20 by default) after `offset`, or after the
        message whose position is `before`, oldest first, safety-filtered and bounded; with
        either, `hasMore`, `nextOffset` and `nextBefore` page backward.
        `TranscriptNotAvailableError` when no source reads a transcript for it."""
        return self._transcripts.sessions_history(key, limit=limit, offset=offset,
            include_tools=include_tools, agent_id=agent_id, before=before)  # fmt: skip

    def session_status(
        self, key: str, *, changes_since: object = None, agent_id: str | None = None
    ) -> dict[str, Any]:
        """`{sessionKey, stateVersion, stateChanges?}`; never advances a cursor (R-S1).

        With `changes_since=v` (a non-negative integer), `stateChanges` is `{events,
        truncated, earliestAvailableSequence, historyGap}`: the events after `v`, oldest
        first, at most 200 a page (R-R3); `truncated` is True when more follow, so ask again
        from the last sequence returned. A `v` at or beyond the head answers `events: []`,
        `truncated: False` (nothing newer; never an error). `historyGap` is True when events
        after `v` were pruned (R-S3). Raises `UnknownSessionError` for an unknown or deleted
        session, `InvalidChangesSinceError` for a `v` that is not a non-negative integer
        (R-S4), `StoreUnavailableError` when the store cannot answer."""
        return self._queries.session_status(key, changes_since=changes_since, agent_id=agent_id)

    def sessions_list(
        self,
        *,
        agent_id: str | None = None,
        kinds: Sequence[str] | None = None,
        label: str | None = None,
        search: str | None = None,
        active_minutes: int | float | None = None,
        limit: int | None = None,
        archived: bool = False,
    ) -> list[dict[str, Any]]:
        """Live sessions, most recently updated first, as the `sessions_list` tool's rows
        (`list_row`): the active ones, or with `archived=True` the archived ones."""
        return self._queries.sessions_list(
            agent_id=agent_id,
            kinds=kinds,
            label=label,
            search=search,
            active_minutes=active_minutes,
            limit=limit,
            archived=archived,
        )

    def session_rows(
        self,
        *,
        agent_id: str | None = None,
        kinds: Sequence[str] | None = None,
        label: str | None = None,
        search: str | None = None,
        active_minutes: int | float | None = None,
        limit: int | None = None,
        keys: Collection[str] | None = None,
        archived: bool | None = None,
        offset: int = 0,
    ) -> list[SessionRow]:
        """The registry rows behind `sessions_list`, for hosts and the session tools; `keys`
        restricts them (e.g. to what a caller may see), `archived` to the archived (True) or
        the active (False) ones; by default both. `offset` skips that many matching rows
        first (a page further down)."""
        return self._queries.session_rows(
            agent_id=agent_id,
            kinds=kinds,
            label=label,
            search=search,
            active_minutes=active_minutes,
            limit=limit,
            keys=keys,
            archived=archived,
            offset=offset,
        )

    def children(
        self, parent_keys: Collection[str], *, agent_id: str | None = None
    ) -> dict[str, list[str]]:
        """The live child session keys of each parent key (spawn edges or `parent=`), sorted.
        A bare parent key names the session of `agent_id`, whose children are of that agent;
        without `agent_id`, the children of every agent's session of that key."""
        return self._queries.children(parent_keys, agent_id=agent_id)

    def descendants(self, key: str, *, agent_id: str | None = None) -> set[str]:
        """Every live session spawned by `key`, transitively (visibility `tree`, R-T2); a bare
        key names the session of `agent_id`, else of every agent that has one."""
        return self._queries.descendants(key, agent_id=agent_id)

    def set_session_label(
        self, key: str, label: str | None, *, agent_id: str | None = None
    ) -> bool:
        """Label the session (`None` or blank clears the label)."""
        return self._marks.set_session_label(key, label, agent_id=agent_id)

    def pin_session(self, key: str, *, agent_id: str | None = None) -> bool:
        """Pin the session (a host's mark, a `pin_set` event): True when it changed.
        `UnknownSessionError` for an unknown or deleted session."""
        return self._marks.pin_session(key, agent_id=agent_id)

    def unpin_session(self, key: str, *, agent_id: str | None = None) -> bool:
        """Unpin the session: True when it changed. `UnknownSessionError` for an unknown or
        deleted session."""
        return self._marks.unpin_session(key, agent_id=agent_id)

    def archive_session(self, key: str, *, agent_id: str | None = None) -> bool:
        """Archive: the session keeps its log and cursors; `sessions_list` shows it only
        when archived sessions are asked for."""
        return self._marks.archive_session(key, agent_id=agent_id)

    def unarchive_session(self, key: str, *, agent_id: str | None = None) -> bool:
        """Bring an archived session back to `sessions_list`: True when it changed.
        `UnknownSessionError` for an unknown or deleted session."""
        return self._marks.unarchive_session(key, agent_id=agent_id)

    def watch(self, watcher: str, target: str, *, target_agent_id: str | None = None) -> bool:
        """Register `watcher` on `target` at its current head: True when the pair has a
        cursor (a pending notice survives, R-W2). Refused → False, logged `watch_refused` at
        WARNING naming the field: the watcher is the target or not agent-qualified, the
        target is unknown, ambiguous or another agent's bare key (R-W3). A watcher the
        service has never seen (no session, no cursor) raises `UnknownSessionError`
        (R-L9)."""
        return self._watching.watch(watcher, target, target_agent_id=target_agent_id)

    def unwatch(self, watcher: str, target: str, *, target_agent_id: str | None = None) -> bool:
        """Remove the pair's cursor: True when there was one, else False. A watcher the
        service has never seen raises `UnknownSessionError` (R-L9)."""
        return self._watching.unwatch(watcher, target, target_agent_id=target_agent_id)

    def pending_notices(self, watcher: str) -> list[str]:
        """The watcher's pending notices, oldest first; reading acknowledges nothing. A key
        the service has never seen (no session, no cursor) raises `UnknownSessionError`
        (R-L9); a known one with nothing pending answers `[]`."""
        return self._watching.pending_notices(watcher)

    def drain_notices(self, watcher: str) -> list[str]:
        """Hand over and acknowledge the pending notices; reopen one per pair with newer
        material (R-N3). Returns the texts drained, oldest first (`[]`: nothing pending). A
        key the service has never seen raises `UnknownSessionError` (R-L9)."""
        return self._watching.drain_notices(watcher)

    def hand_over_notices(self, watcher: str) -> Handover:
        """The pending notices, oldest first (`Handover.notices`), read without acknowledging
        them: hand them on (print them, send them), then `acknowledge_handed(watcher,
        handover)`. Until then they stay pending, so a hand-over that fails midway loses
        nothing and shows them again (R-N8). A key the service has never seen raises
        `UnknownSessionError` (R-L9)."""
        return self._watching.hand_over_notices(watcher)

    def acknowledge_handed(self, watcher: str, handover: Handover) -> list[str]:
        """Acknowledge the notices `hand_over_notices` read, each only if it is still pending
        as it was read (R-N8): a notice drained or moved on since stays as it is now (shown
        again if pending), one opened since is left pending; otherwise as `drain_notices`
        (R-N3: a fresh notice for newer material). Returns the texts acknowledged, oldest
        first. A key the service has never seen raises `UnknownSessionError` (R-L9)."""
        return self._watching.acknowledge_handed(watcher, handover)

    def open_session(
        self,
        key: str,
        *,
        agent_id: str | None = None,
        kind: str | None = None,
        label: str | None = None,
        parent: str | None = None,
        sandboxed: bool | None = None,
    ) -> None:
        """Open a session, or a deleted one's key again. Without a `kind`, a new session whose
        key has a `:subagent:` segment opens as a `subagent`, any other as `main` (R-K2).
        Opening an open session applies what the host gives that differs (kind, label, a first
        parent, the sandbox mark) as events; what it leaves out stays. A parent that would make
        a cycle or replace the session's parent is refused (R-T3)."""
        self._lifecycle.open_session(
            key, agent_id=agent_id, kind=kind, label=label, parent=parent, sandboxed=sandboxed
        )

    def is_sandboxed(self, key: str, *, agent_id: str | None = None) -> bool:
        """Whether the host marked the session sandboxed (`open_session(..., sandboxed=True)`);
        its tool calls then see at most its tree (R-T2). False for a session never opened."""
        return self._lifecycle.is_sandboxed(key, agent_id=agent_id)

    def reset_session(self, key: str, *, agent_id: str | None = None) -> None:
        """Reset: the session's history stays; every cursor it holds as watcher goes (R-W6)."""
        self._lifecycle.reset_session(key, agent_id=agent_id)

    def delete_session(self, key: str, *, agent_id: str | None = None) -> None:
        """Delete: its retained rows and every cursor where it is watcher or target go (R-W6);
        its head stays, so a re-opened key never reuses a sequence (R-L4)."""
        self._lifecycle.delete_session(key, agent_id=agent_id)

    def prune(self) -> dict[str, Any]:
        """Retention (R-R1): drop rows older than the age limit, then all but the newest rows
        across sessions, raising each session's watermark first; expire idle cursors (R-W6).

        A clock reading far ahead of everything the store has recorded (more than the age
        limit plus `CLOCK_LEAP` past its newest row) is taken for a wrong reading: nothing is
        removed or expired, the refusal is logged (`history_prune_refused`), and the next
        prune decides again."""
        return self._maintenance.prune()

    def maintain(self) -> None:
        """Run the maintenance work under way or due (the start-up sweep, a prune once an
        hour by the service clock) now, in the caller's thread, to its end (ADR 038): what
        the background thread does, for a host that opened with `maintenance="manual"`."""
        self._task.run_due()

    @property
    def maintenance_idle(self) -> bool:
        """Whether the maintenance has nothing under way or due now (ADR 038)."""
        return self._task.idle

    def sweep(self) -> int:
        """Startup sweep (R-N6): re-deliver every pending notice, its N raised to its M so its
        drain acknowledges up to M (ADR 034), and wake every non-sub-agent watcher with a
        pending notice, once, skipping watchers whose session is gone. Returns the number of
        wakes issued. It re-delivers wakes that may have been lost, so it is not coalesced
        (R-N5)."""
        return self._maintenance.sweep()

    def record_upstream_activity(self, row: UpstreamLinkRow, activity: UpstreamActivity) -> Written:
        """One `human_direct_message` for the new turns, and the marker advanced, in one save;
        zero turns only advance the marker. Nothing is written over a changed link."""
        return self._upstream.record_upstream_activity(row, activity)

    def record_upstream_missing(self, row: UpstreamLinkRow) -> Written:
        """One `upstream_missing` for the watchers, and the link removed, in one save."""
        return self._upstream.record_upstream_missing(row)

    def configure_upstream(
        self,
        *,
        providers: Mapping[str, UpstreamProvider] | None = None,
        is_run_active: RunActivity | None = None,
        own_user_texts: OwnUserTexts | None = None,
        scheduler: Scheduler | None = None,
        timeout: float = PROVIDER_TIMEOUT,
    ) -> UpstreamMonitor:
        """Set up the monitor: providers by catalog id, the host's ports, the scheduler (a
        thread timer by default) and the per-provider timeout in seconds (R-U2)."""
        return self._upstream.configure_upstream(
            providers=providers,
            is_run_active=is_run_active,
            own_user_texts=own_user_texts,
            scheduler=scheduler,
            timeout=timeout,
        )

    @property
    def upstream_monitor(self) -> UpstreamMonitor:
        """The monitor `configure_upstream` set up (a default one, built on first use)."""
        return self._upstream.upstream_monitor

    def start_upstream_monitor(self) -> None:
        """For hosts: scan after 15 s, then every 60 s, until stopped or closed (R-U2)."""
        self._upstream.start_upstream_monitor()

    def stop_upstream_monitor(self) -> None:
        """Stop the monitor's scans (a scan in flight finishes); `close()` does it too."""
        if "_upstream" in self.__dict__:  # never built: no monitor to stop
            self._upstream.stop_upstream_monitor()

    def scan_upstream_once(self) -> list[LinkOutcome] | None:
        """One scan now (tests, the CLI); None when a scan is already in flight."""
        return self._upstream.scan_upstream_once()

    def record_adopted(
        self,
        key: str,
        *,
        catalog_id: str,
        host_id: str,
        thread_id: str,
        upstream_kind: str,
        upstream_ref: str,
        agent_id: str | None = None,
        marker: str | None = None,
    ) -> int | None:
        """Write the upstream link and record `adopted` (once per session) in one save.
        Adopting the same source again keeps its marker; a changed source starts from
        `marker` (None: the provider's first scan sets the baseline). Never raises (R-L8):
        returns the `adopted` sequence, or None when nothing new was recorded."""
        return self._upstream.record_adopted(
            key,
            catalog_id=catalog_id,
            host_id=host_id,
            thread_id=thread_id,
            upstream_kind=upstream_kind,
            upstream_ref=upstream_ref,
            agent_id=agent_id,
            marker=marker,
        )

    def upstream_link(self, key: str, *, agent_id: str | None = None) -> dict[str, Any] | None:
        """The session's upstream link as JSON, or None when it has none."""
        return self._upstream.upstream_link(key, agent_id=agent_id)

    @_producer
    def record_human_direct_message(
        self,
        key: str,
        *,
        channel: str,
        actor_id: str | None = None,
        run_id: str | None = None,
        occurred_at: int | float | datetime | None = None,
        idempotency_key: str | None = None,
        turns: int | None = None,
        agent_id: str | None = None,
    ) -> int | None:
        """Record that a human sent the session a turn directly (`channel`, e.g. `telegram`;
        `turns` how many, when more than one): notify-eligible, and only when the session
        has a parent or a watcher (R-L6). `occurred_at` (epoch ms or an aware datetime) is
        clamped into the last 24 hours (R-L7); a repeated `idempotency_key` records nothing
        (R-L5)."""
        return self._intake.record_human_direct_message(
            key,
            channel=channel,
            actor_id=actor_id,
            run_id=run_id,
            occurred_at=occurred_at,
            idempotency_key=idempotency_key,
            turns=turns,
            agent_id=agent_id,
        )

    @_producer
    def record_goal_changed(
        self,
        key: str,
        *,
        summary: str,
        actor_type: ActorTypeWord = "system",
        actor_id: str | None = None,
        agent_id: str | None = None,
    ) -> int | None:
        """Record a goal change: notify-eligible. `summary` is one of `goal created`, `goal
        updated`, `goal objective changed`, `goal cleared` or `goal status changed to
        <status>` (R-L3); `actor_type` is `human`, `agent` or `system`."""
        return self._intake.record_goal_changed(
            key, summary=summary, actor_type=actor_type, actor_id=actor_id, agent_id=agent_id
        )

    @_producer
    def record_run_terminal(
        self, key: str, *, run_id: str, outcome: RunOutcomeWord, agent_id: str | None = None
    ) -> int | None:
        """Record how the session's run `run_id` ended (log only, once per run, R-L5):
        `outcome` in the words the rows' `runStatus` shows, `completed`, `failed`, `timeout`
        or `cancelled` (the older `ok` and `error` stay accepted and record the same
        events)."""
        return self._intake.record_run_terminal(
            key, run_id=run_id, outcome=outcome, agent_id=agent_id
        )

    @_producer
    def record_compacted(
        self, key: str, *, operation_id: str, agent_id: str | None = None
    ) -> int | None:
        """Record that the session's context was compacted (log only, once per
        `operation_id`, R-L5)."""
        return self._intake.record_compacted(key, operation_id=operation_id, agent_id=agent_id)

    @_producer
    def record_child_spawned(
        self, child_key: str, *, parent: str, run_id: str, agent_id: str | None = None
    ) -> int | None:
        """Record the spawn edge on the child (opening it if needed) and seed the parent's
        cursor at the spawn's sequence (R-L5, R-W1); a repeated `run_id` records nothing.
        Open the parent first: a parent that is not an open session is logged
        `spawn_parent_unknown` (WARNING) and the spawn recorded all the same, or on a strict
        service refused with `UnknownSessionError` naming the parent (R-L9). A parent that
        would make a cycle, or replace the child's parent, is refused (R-T3)."""
        return self._intake.record_child_spawned(
            child_key, parent=parent, run_id=run_id, agent_id=agent_id
        )

    @property
    def kept_signals(self) -> int:
        """How many signals the backlog keeps for the store, which refused them (R-L8)."""
        return len(self._intake.backlog)

    def flush_signals(self, *, wait: bool = True) -> bool:
        """Record the signals kept while the store was unreachable, oldest first, and those
        services of this store that closed or died left in the spool (R-L10); False while it
        still is unreachable (R-L8, Beyond). A kept signal the rules now skip (a repeat) is
        counted as skipped; one whose session was deleted meanwhile, or that fails for any
        other reason, is dropped (counted and logged). Without `wait`, gives up at once
        (False) when another thread is flushing."""
        adopted = self._intake.adopt() if wait else 0
        flushed = self._intake.flush_signals(wait=wait)
        if adopted:
            self._intake.ensure_flushing()
        return flushed


def open_service(
    database_url: str | None = None,
    *,
    clock: Clock | None = None,
    waker: Waker | None = None,
    retention_days: int = 30,
    retention_rows: int = 50_000,
    visibility: str = "tree",
    dispatcher: Dispatcher | None = None,
    spawner: Spawner | None = None,
    canceller: Canceller | None = None,
    signal_backlog: int = 1000,
    upstream_providers: Mapping[str, UpstreamProvider] | None = None,
    is_run_active: RunActivity | None = None,
    own_user_texts: OwnUserTexts | None = None,
    upstream_scheduler: Scheduler | None = None,
    upstream_timeout: float = PROVIDER_TIMEOUT,
    wake_coalesce_seconds: float = DEFAULT_WAKE_COALESCE_SECONDS,
    transcripts: Sequence[TranscriptSource] | None = None,
    main_key: str = DEFAULT_MAIN_KEY,
    ambient_groups: bool = True,
    strict: bool = False,
    spool: str | os.PathLike[str] | bool = True,
    maintenance: str = "background",
) -> SessionAwareness:
    """Open the service on a database URL (default: `$SESSION_AWARENESS_DATABASE_URL`, else
    `sqlite:///session-awareness.db`), run the startup prune and sweep, and return it.
    `dispatcher`, `spawner` and `canceller` are the host's delivery for `sessions_send`, its
    child start for `sessions_spawn` and its run cancel for `subagents` (the tools answer
    `not_configured` without them).
    Upstream monitoring (R-U1–R-U5) is set up with providers by catalog id and the host's
    ports; the host starts it with `start_upstream_monitor()`. Wakes coalesce per watcher:
    at most one per `wake_coalesce_seconds` of the service clock (0: every wake, R-N5).
    `transcripts` are the sources `sessions_history` reads, in order (default: local Claude
    Code transcripts; `[]`: none). With `ambient_groups`, a human turn on an agent's `group`
    session first gives its main session `agent:<agentId>:<main_key>` an ambient cursor on
    it, whose notices queue up and never wake (R-W7). With `strict`, the producers raise for
    the caller's mistakes as well as logging them (R-L9): for tests and for hosts that would
    rather fail than lose a signal to a typo.

    `spool` is the folder where signals kept during an outage outlive the process (R-L10):
    `True` (the default) is `$XDG_STATE_HOME/session-awareness/spool`, else
    `~/.local/state/session-awareness/spool`; a path is that folder; `False` keeps them in
    memory only. Each store has its own file there, named by a digest of the store (never
    its password); an in-memory SQLite store has none.

    `maintenance="background"` (the default) runs the start-up sweep (R-N6) and the prune
    (R-R1: at start-up, then hourly by `clock`) on a thread of the service's, in bounded
    batches, never inside a call (ADR 038); `"manual"` starts no thread: the host runs that
    same due work with `maintain()` when it chooses (tests, to be deterministic), or calls
    `sweep()` and `prune()` itself.

    Raises `ConfigurationError` for a malformed URL or option (or credentials, a database
    the server refuses), `StoreUnavailableError` when the server cannot be reached at open
    (connection refused, unknown host, a server starting up or shutting down: worth trying
    again), both with the server's words and the password redacted."""
    if not isinstance(strict, bool):
        raise ConfigurationError(f"strict must be a boolean, got {strict!r}")
    if maintenance not in MAINTENANCE_MODES:
        raise ConfigurationError(
            f"maintenance must be one of {', '.join(MAINTENANCE_MODES)}, got {maintenance!r}"
        )
    _check_arguments(
        database_url=database_url,
        visibility=visibility,
        retention={"retention_days": retention_days, "retention_rows": retention_rows},
        ports={"clock": clock, "waker": waker, "dispatcher": dispatcher, "spawner": spawner,
               "canceller": canceller},
        signal_backlog=signal_backlog,
        wake_coalesce_seconds=wake_coalesce_seconds,
        ambient={"main_key": main_key, "ambient_groups": ambient_groups},
        spool=spool,
    )  # fmt: skip
    sources = _transcript_sources(transcripts) if transcripts is not None else None
    url = url_in_force(database_url)
    # No library cache: the service keeps its own (application/aggregate_cache.py).
    settings = environment_for(url)
    env = {_PREFIX + k: v for k, v in settings.items()}
    try:
        store = SessionStore(
            env,
            clock=clock or system_clock,
            waker=waker,
            wakes=WakeCoalescer(wake_coalesce_seconds),
        )
    except ConfigurationError as error:
        raise ConfigurationError(f"cannot open {redact(url)}: {error}") from None
    except StoreUnavailableError as error:
        raise StoreUnavailableError(f"cannot open {redact(url)}: {error.reason}") from None
    except Exception as error:
        if raised_from(error, lambda e: isinstance(e, STORE_ERRORS)):  # lost after connecting
            raise StoreUnavailableError(f"cannot open {redact(url)}: {error}") from error
        hint = _POSTGRES_EXTRA_HINT if _lacks_postgres(error) else ""
        raise ConfigurationError(f"cannot open {redact(url)}: {error}{hint}") from error
    service = SessionAwareness(
        store,
        retention=Retention(retention_days, retention_rows),
        signal_backlog=signal_backlog,
        main_key=main_key,  # R-W7
        ambient_groups=ambient_groups,
        transcript_sources=sources,
        strict=strict,  # R-L9
        spool=spool_for(spool, url, to_stored=store.mapper.to_stored_event),
        maintenance=maintenance,
    )
    service.visibility, service.dispatcher, service.spawner = visibility, dispatcher, spawner
    service.canceller = canceller
    try:
        # Without any of these, the monitor is the default one, built when first asked for.
        if upstream_timeout != PROVIDER_TIMEOUT or any(
            port is not None
            for port in (upstream_providers, is_run_active, own_user_texts, upstream_scheduler)
        ):
            service.configure_upstream(
                providers=upstream_providers,
                is_run_active=is_run_active,
                own_user_texts=own_user_texts,
                scheduler=upstream_scheduler,
                timeout=upstream_timeout,
            )
        service.start()
    except Exception:
        service.close()
        raise
    return service


def _check_arguments(
    *,
    database_url: object,
    visibility: object,
    retention: dict[str, object],
    ports: dict[str, object],
    signal_backlog: object,
    wake_coalesce_seconds: object,
    ambient: dict[str, object],
    spool: object = True,
) -> None:
    """`ConfigurationError` for an argument of `open_service` the service cannot use."""
    if not isinstance(spool, bool | str | os.PathLike) or spool == "":
        raise ConfigurationError(f"spool must be True, False or a folder, got {spool!r}")
    if not isinstance(ambient["ambient_groups"], bool):
        raise ConfigurationError(
            f"ambient_groups must be a boolean, got {ambient['ambient_groups']!r}"
        )
    try:
        check_main_key(ambient["main_key"])
    except InvalidKeyError as error:
        raise ConfigurationError(str(error)) from None
    if visibility not in VISIBILITIES:
        raise ConfigurationError(f"visibility must be one of {', '.join(VISIBILITIES)}")
    bounds = {"retention_days": MAX_RETENTION_DAYS, "retention_rows": MAX_RETENTION_ROWS}
    for name, value in retention.items():
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= bounds[name]:
            raise ConfigurationError(
                f"{name} must be a positive integer, at most {bounds[name]}, got {value!r}"
            )
    for name, port in ports.items():
        if port is not None and not callable(port):
            raise ConfigurationError(f"{name} must be callable, got {type(port).__name__}")
    if (
        isinstance(signal_backlog, bool)
        or not isinstance(signal_backlog, int)
        or signal_backlog < 0
    ):
        raise ConfigurationError(
            f"signal_backlog must be a non-negative integer, got {signal_backlog!r}"
        )
    if database_url is not None and not isinstance(database_url, str):
        raise ConfigurationError(
            f"database_url must be a string, got {type(database_url).__name__}"
        )
    if (
        isinstance(wake_coalesce_seconds, bool)
        or not isinstance(wake_coalesce_seconds, int | float)
        or not 0 <= wake_coalesce_seconds < float("inf")
    ):
        raise ConfigurationError(
            f"wake_coalesce_seconds must be a non-negative number, got {wake_coalesce_seconds!r}"
        )


def spool_for(
    given: str | os.PathLike[str] | bool,
    url: str,
    *,
    to_stored: Callable[[Any], StoredEvent] | None = None,
) -> SignalSpool | None:
    """The store's spool in the folder `given` names (`True`: the default folder, R-L10);
    None when disabled, for an in-memory SQLite store, or where files cannot be locked.
    Without `to_stored` (the store's event mapper) it can only be read."""
    if given is False:  # not even the store's name: a hook run reads its URL once
        return None
    identity = store_identity(url)
    if identity is None:
        return None
    from session_awareness.application.spool import (  # noqa: PLC0415 -- a file, when kept
        SignalSpool,
        default_spool_dir,
        spool_supported,
    )

    if not spool_supported():  # pragma: no cover -- not POSIX
        log.warning("signal_spool_unsupported", reason="no file locking on this platform")
        return None
    try:
        folder = default_spool_dir() if given is True else os.fspath(given)
    except (RuntimeError, KeyError) as error:  # no home directory to put it under
        log.warning("signal_spool_unsupported", reason=f"no home directory: {error}")
        return None
    return SignalSpool(folder, identity, to_stored=to_stored)


def _transcript_sources(given: object) -> tuple[TranscriptSource, ...]:
    from session_awareness.application.transcript_port import TranscriptSource  # noqa: PLC0415

    if isinstance(given, str | bytes) or not isinstance(given, Sequence):
        raise ConfigurationError("transcripts must be a sequence of transcript sources")
    for source in given:
        if not isinstance(source, TranscriptSource):
            raise ConfigurationError(
                f"transcripts: {type(source).__name__} has no newest_first(session) method"
            )
    return tuple(given)


def _lacks_postgres(error: BaseException | None) -> bool:
    """Whether the error comes from a module of the `postgres` extra not being installed."""
    return raised_from(
        error, lambda e: isinstance(e, ModuleNotFoundError) and e.name in _POSTGRES_EXTRA
    )
