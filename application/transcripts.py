"""`sessions_history` in the embedding API: where a session's transcript is, and its view.

A session's transcript is known from `note_transcript` (the Claude Code and Gemini CLI
hooks note the `transcript_path` they are given) or from its upstream link, when it was
adopted from a local transcript. The service's transcript sources are asked in order; the
first that answers reads it (ADR 018). Nothing of the content is stored or logged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eventsourcing.utils import resolve_topic

from session_awareness.application.errors import (
    InvalidArgumentError,
    SessionAwarenessError,
    UnknownSessionError,
)
from session_awareness.application.store import SessionStore, log
from session_awareness.application.unit_of_work import UnitOfWork
from session_awareness.domain.signals import MAX_SAFE_INTEGER
from session_awareness.domain.upstream import MAX_ID_LENGTH, MAX_REF_LENGTH, check_text

if TYPE_CHECKING:
    from session_awareness.application.transcript_port import TranscriptSession, TranscriptSource

#: The upstream kind whose reference is a transcript a source can read.
LOCAL_TRANSCRIPT = "local-transcript"
#: The transcript sources on by default, named by topic (the application never imports
#: infrastructure): local Claude Code JSONL transcripts, and Gemini CLI's chat files.
CLAUDE_CODE_TRANSCRIPTS_TOPIC = (
    "session_awareness.infrastructure.claude_transcripts:ClaudeCodeTranscriptSource"
)
GEMINI_CLI_TRANSCRIPTS_TOPIC = (
    "session_awareness.infrastructure.gemini_transcripts:GeminiCliTranscriptSource"
)


class TranscriptNotAvailableError(SessionAwarenessError):
    """The session exists, but no transcript source can read a transcript for it."""

    def __init__(self, key: str) -> None:
        super().__init__(f"No transcript is available for sessionKey: {key}")
        self.key = key


class Transcripts:
    """Noting where a session's transcript is, and reading its bounded, filtered view."""

    def __init__(
        self, store: SessionStore, sources: tuple[TranscriptSource, ...] | None = None
    ) -> None:
        self.store = store
        self._transcript_sources = sources

    @property
    def transcript_sources(self) -> tuple[TranscriptSource, ...]:
        """The sources `sessions_history` reads, in order; empty: the tool is not offered.
        Unless the host chose them, the built-in local Claude Code and Gemini CLI sources
        (ADR 018); each reads only the sessions whose transcript names its format."""
        if self._transcript_sources is None:
            self._transcript_sources = tuple(
                resolve_topic(topic)()
                for topic in (CLAUDE_CODE_TRANSCRIPTS_TOPIC, GEMINI_CLI_TRANSCRIPTS_TOPIC)
            )
        return self._transcript_sources

    @transcript_sources.setter
    def transcript_sources(self, sources: tuple[TranscriptSource, ...]) -> None:
        self._transcript_sources = sources

    def note_transcript(
        self, key: str, *, source: str, ref: str, agent_id: str | None = None
    ) -> bool:
        """Remember where the session's transcript is (`source` its format, such as
        `claude-code`; `ref` where it is, such as a file path). True when that changed."""
        try:
            check_text(source, "source", MAX_ID_LENGTH)
            check_text(ref, "ref", MAX_REF_LENGTH)
        except ValueError as error:
            raise InvalidArgumentError("transcript", str(error)) from None
        ref_ = self.store.resolve(key, agent_id)

        def attempt(uow: UnitOfWork) -> bool:
            session = uow.live(ref_)
            if session is None:
                raise UnknownSessionError(key)
            return session.note_transcript(source, ref, at=self.store.clock())

        changed = self.store.run(attempt)
        if changed:
            log.info("transcript_noted", session_key=ref_.key, agent_id=ref_.agent_id,
                     source=source)  # fmt: skip
        return changed

    def transcript_session(self, key: str, agent_id: str | None = None) -> TranscriptSession:
        """The live session and where its transcript is known to be (`UnknownSessionError`
        for an unknown or deleted session)."""
        # Reading a transcript's view is the service's only use of its port and view: noting
        # where a transcript is (a hook run's part) never imports them (ADR 039).
        from session_awareness.application.transcript_port import (  # noqa: PLC0415
            TranscriptRef,
            TranscriptSession,
        )

        ref = self.store.resolve(key, agent_id)
        session = UnitOfWork(self.store).live(ref)
        if session is None:
            raise UnknownSessionError(key)
        known = None
        if session.transcript is not None:
            known = TranscriptRef(*session.transcript)
        elif session.upstream is not None and session.upstream.source.upstream_kind == (
            LOCAL_TRANSCRIPT
        ):
            link = session.upstream.source
            known = TranscriptRef(link.catalog_id, link.upstream_ref)
        return TranscriptSession(ref.key, ref.agent_id, known)

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
        trusted): the newest `limit` messages (20 by default) after `offset`, oldest first,
        safety-filtered and bounded; with `offset` or `before`, `hasMore`, `nextOffset` and
        `nextBefore` page backward. `before` (a message's position, such as a page's
        `nextBefore`) starts the page at the message older than it, so pages neither repeat
        nor skip a message while the transcript grows. `TranscriptNotAvailableError` when no
        source reads a transcript for it."""
        from session_awareness.application.transcript_view import (  # noqa: PLC0415
            MAX_POSITION_CHARS,
            history_json,
        )

        limit = _count("limit", limit, least=1)
        offset = _count("offset", offset, least=0)
        if not isinstance(include_tools, bool):
            raise InvalidArgumentError("includeTools", "must be a boolean")
        if before is not None and (
            not isinstance(before, str) or not before or len(before) > MAX_POSITION_CHARS
        ):
            raise InvalidArgumentError(
                "before", f"must be a message's position, 1 to {MAX_POSITION_CHARS} chars"
            )
        session = self.transcript_session(key, agent_id)
        for source in self.transcript_sources:
            try:
                rows = source.newest_first(session)
                if rows is not None:
                    return history_json(session.key, rows, limit=limit, offset=offset,
                                        include_tools=include_tools, before=before)  # fmt: skip
            except InvalidArgumentError:
                raise
            except Exception as error:  # noqa: BLE001 -- a failing source reads as none
                # Only the type: an exception's text may quote the transcript.
                log.warning(
                    "transcript_source_failed",
                    session_key=session.key,
                    source=type(source).__name__,
                    error_type=type(error).__name__,
                )
        raise TranscriptNotAvailableError(session.key)


def _count(field: str, value: object, *, least: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value:
        kind = "a positive" if least else "a non-negative"
        raise InvalidArgumentError(field, f"must be {kind} integer")
    if value > MAX_SAFE_INTEGER:
        raise InvalidArgumentError(field, f"must be at most {MAX_SAFE_INTEGER}")
    return value
