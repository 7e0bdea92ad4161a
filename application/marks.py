"""The host's marks on a session: its label, pin and archive, as Session events."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from session_awareness.application.errors import InvalidArgumentError, UnknownSessionError
from session_awareness.application.ports import Clock
from session_awareness.application.unit_of_work import UnitOfWork
from session_awareness.domain.keys import SessionRef
from session_awareness.domain.session import Session
from session_awareness.domain.signals import InvalidSignalError, check_label
from session_awareness.logs import get_logger

log = get_logger()

#: Runs a load-decide-save attempt until it lands (the write application's retry loop).
Retrying = Callable[[Callable[[UnitOfWork], bool]], bool]


class Marks:
    """`set_session_label`, `pin_session` / `unpin_session`, `archive_session` /
    `unarchive_session`: each True when the session changed, visible in its `history`."""

    def __init__(
        self,
        clock: Clock,
        resolve: Callable[[str, str | None], SessionRef],
        retrying: Retrying,
    ) -> None:
        self.clock, self.resolve, self._run = clock, resolve, retrying

    def set_session_label(
        self, key: str, label: str | None, *, agent_id: str | None = None
    ) -> bool:
        """Label the session (`None` or blank clears the label)."""
        if label is not None:
            try:
                label = check_label(label)
            except InvalidSignalError as error:
                raise InvalidArgumentError("label", str(error)) from None
        return self._mark(
            key,
            agent_id,
            "session_labelled",
            lambda s, now: s.describe(kind=s.kind, label=label, parent_key=None, at=now),
        )

    def pin_session(self, key: str, *, agent_id: str | None = None) -> bool:
        return self._mark(key, agent_id, "session_pinned", lambda s, now: s.pin(True, at=now))

    def unpin_session(self, key: str, *, agent_id: str | None = None) -> bool:
        return self._mark(key, agent_id, "session_unpinned", lambda s, now: s.pin(False, at=now))

    def archive_session(self, key: str, *, agent_id: str | None = None) -> bool:
        """Archive: the session keeps its log and cursors; `sessions_list` shows it only
        when archived sessions are asked for."""
        return self._mark(key, agent_id, "session_archived", lambda s, now: s.archive(True, at=now))

    def unarchive_session(self, key: str, *, agent_id: str | None = None) -> bool:
        return self._mark(
            key, agent_id, "session_unarchived", lambda s, now: s.archive(False, at=now)
        )

    def _mark(
        self,
        key: str,
        agent_id: str | None,
        event: str,
        change: Callable[[Session, datetime], bool],
    ) -> bool:
        ref = self.resolve(key, agent_id)

        def attempt(uow: UnitOfWork) -> bool:
            session = uow.live(ref)
            if session is None:
                raise UnknownSessionError(key)
            return change(session, self.clock())

        changed = self._run(attempt)
        if changed:
            log.info(event, session_key=ref.key, agent_id=ref.agent_id)
        return changed
