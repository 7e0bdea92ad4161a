"""`sessions_history` as a trust boundary, on both backends (R-T4): every string it returns
is redacted, every bound holds whatever a transcript holds, a bad line is skipped and counted,
and paging by position neither repeats nor skips a message while the transcript grows."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from session_awareness.application import SessionAwareness, open_service
from session_awareness.application.transcript_port import (
    TranscriptBlock,
    TranscriptRef,
    TranscriptRow,
    TranscriptSession,
)
from session_awareness.application.transcript_view import (
    MAX_PAGE_BYTES,
    MAX_POSITION_CHARS,
    history_json,
)
from session_awareness.infrastructure.claude_transcripts import (
    MAX_READ_BYTES,
    ClaudeCodeTranscriptSource,
    lines_newest_first,
)
from session_awareness.infrastructure.cli import main
from tests.conftest import FakeClock, ServiceFactory
from tests.tools.helpers import MAIN, WORKER, build_world
from tests.transcripts.test_sessions_history import HostTranscripts, texts

SECRETS = ["hunter2", "Sup3rS3cret", "rootpw123", "correct horse", "wJalrXUtnFEMI", "AbCdEfGhIj"]


def row(uid: object, content: Any, kind: str = "user") -> dict[str, Any]:
    return {"type": kind, "uuid": uid, "timestamp": "2026-11-30T09:00:00.000Z",
            "message": {"role": kind, "content": content}}  # fmt: skip


def write(path: Path, *rows: dict[str, Any] | bytes, mode: str = "ab") -> None:
    with path.open(mode) as file:
        for item in rows:
            file.write(item if isinstance(item, bytes) else json.dumps(item).encode() + b"\n")


@pytest.fixture
def svc(open_svc: ServiceFactory, clock: FakeClock) -> SessionAwareness:
    service = open_svc()
    build_world(service, clock)
    return service


def noted(svc: SessionAwareness, path: Path) -> Path:
    svc.note_transcript(WORKER, source="claude-code", ref=str(path))
    return path


def call(svc: SessionAwareness, **arguments: Any) -> dict[str, Any]:
    answer: dict[str, Any] = svc.tools.call(
        "sessions_history", {"sessionKey": WORKER, **arguments}, caller=MAIN
    )
    return answer


class TestRedactionOfEveryString:
    def test_text_tool_calls_results_and_positions_are_redacted(
        self, svc: SessionAwareness, tmp_path: Path
    ) -> None:
        """R-T4: no family of the issue reaches the reader; `contentRedacted` says so."""
        path = noted(svc, tmp_path / "t.jsonl")
        tool_use = {"type": "tool_use", "id": "t1", "name": "Bash",
                    "input": {"command": "psql", "password": "correct horse"}}  # fmt: skip
        result = {"type": "tool_result", "tool_use_id": "t1",
                  "content": "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG\nok"}  # fmt: skip
        write(
            path,
            row("u-1", "DB_PASSWORD=hunter2 and POSTGRES_PASSWORD=Sup3rS3cret"),
            row("a-2", [{"type": "text", "text": "MYSQL_ROOT_PASSWORD: rootpw123"}, tool_use],
                "assistant"),
            row("u-3", [result]),
            row("sk-ant-api03-AbCdEfGhIjKlMnOpQrSt", "HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrSt1234"),
        )  # fmt: skip
        page = call(svc, includeTools=True)
        shown = json.dumps(page)
        assert [s for s in SECRETS if s in shown] == []
        assert len(page["messages"]) == 4 and page["contentRedacted"] is True
        assert page["messages"][-1]["position"].startswith("offset:")

    def test_a_hosts_position_and_tool_name_are_redacted_too(
        self, open_svc: ServiceFactory, clock: FakeClock
    ) -> None:
        """R-T4: whatever a source hands on, every string goes through the filter."""
        host = HostTranscripts()
        call_block = TranscriptBlock("toolCall", "{}", name="ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123")
        host.rows[WORKER] = [TranscriptRow("SECRET_KEY=AbCdEfGhIj", "assistant", (call_block,))]
        svc = open_svc(transcripts=[host])
        build_world(svc, clock)
        page = call(svc, includeTools=True)
        assert "AbCdEfGhIj" not in json.dumps(page) and page["contentRedacted"] is True


class TestBounds:
    def test_a_page_stays_within_64_kib_whatever_a_row_holds(
        self, open_svc: ServiceFactory, clock: FakeClock
    ) -> None:
        """R-T4: megabyte positions are cut; the page, the whole answer, stay bounded."""
        host = HostTranscripts()
        host.rows[WORKER] = [
            TranscriptRow(f"{n}" + "p" * 1_000_000, "user", (TranscriptBlock("text", "hi"),))
            for n in range(30)
        ]
        svc = open_svc(transcripts=[host])
        build_world(svc, clock)
        page = call(svc, limit=30, offset=0)
        assert len(json.dumps(page, ensure_ascii=False).encode()) <= MAX_PAGE_BYTES
        assert all(len(m["position"]) <= MAX_POSITION_CHARS for m in page["messages"])
        assert page["contentTruncated"] is True

    def test_a_huge_uuid_in_a_transcript_is_replaced_by_the_rows_offset(
        self, svc: SessionAwareness, tmp_path: Path
    ) -> None:
        """R-T4: the issue's 1 MB `uuid` no longer makes a megabyte page."""
        path = noted(svc, tmp_path / "t.jsonl")
        write(path, row("u-1", "first"), row("x" * 1_000_000, "second"))
        page = call(svc)
        assert texts(page) == ["first", "second"]
        assert len(json.dumps(page).encode()) < 1_000

    def test_a_sparse_gigabyte_transcript_is_read_only_at_its_end(self, tmp_path: Path) -> None:
        """R-T4: at most 8 MiB is read, from the end: the newest rows, older ones unread."""
        path = tmp_path / "sparse.jsonl"
        write(path, row("u-old", "long ago"))
        with path.open("r+b") as file:
            file.truncate(1 << 30)
        write(path, b"\n", row("u-new", "just now"))
        ref = TranscriptRef("claude-code", str(path))
        rows = ClaudeCodeTranscriptSource().newest_first(TranscriptSession(WORKER, "main", ref))
        assert rows is not None
        before = _bytes_read()
        page = history_json(WORKER, rows, limit=5, offset=0, include_tools=False)
        assert _bytes_read() - before <= MAX_READ_BYTES + (1 << 20)
        assert texts(page) == ["just now"] and page["truncated"] is True

    def test_a_gigabyte_line_still_being_written_is_not_read_whole(self, tmp_path: Path) -> None:
        """R-T4: no line end in the last 8 MiB: nothing shown, older rows reported unread,
        and the search for a line end stops at the budget."""
        path = tmp_path / "sparse.jsonl"
        write(path, row("u-old", "long ago"))
        with path.open("r+b") as file:
            file.truncate(1 << 30)
        ref = TranscriptRef("claude-code", str(path))
        rows = ClaudeCodeTranscriptSource().newest_first(TranscriptSession(WORKER, "main", ref))
        assert rows is not None
        before = _bytes_read()
        page = history_json(WORKER, rows, limit=5, offset=0, include_tools=False)
        assert _bytes_read() - before <= MAX_READ_BYTES + (1 << 20)
        assert page["messages"] == [] and page["truncated"] is True

    def test_no_read_goes_past_the_budget(self, tmp_path: Path) -> None:
        """R-T4: the line reader's reads add up to its budget at most, whatever the file."""
        path = tmp_path / "t.jsonl"
        path.write_bytes((b"y" * 999 + b"\n") * 5_000)
        with path.open("rb") as file:
            counting = _CountingFile(file)
            lines = list(lines_newest_first(counting, 5_000_000, 100_000))  # type: ignore[arg-type]
        assert counting.read_bytes <= 100_000 and len(lines) == 100

    @pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
    def test_only_a_regular_file_is_read_and_a_fifo_never_blocks(
        self, svc: SessionAwareness, tmp_path: Path, kind: str
    ) -> None:
        """R-T4: not a regular file: `not_available`, at once."""
        path = tmp_path / "t.jsonl"
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "directory":
            path.mkdir()
        else:
            path = Path("/dev/zero")
        noted(svc, path)
        answers: list[dict[str, Any]] = []
        reader = threading.Thread(target=lambda: answers.append(call(svc)), daemon=True)
        reader.start()
        reader.join(timeout=10)
        assert [a["error"]["code"] for a in answers] == ["not_available"]

    def test_a_line_too_deep_or_too_long_is_skipped_and_counted(
        self, svc: SessionAwareness, tmp_path: Path
    ) -> None:
        """R-T4: one bad line never spoils the transcript: the rest shows, `skippedLines`
        counts what was passed over."""
        path = noted(svc, tmp_path / "t.jsonl")
        deep = b'{"type": "user", "message": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
        write(path, row("u-1", "first"), deep, row("u-2", "x" * (2 << 20)), b"{not json\n",
              row("u-3", "last"))  # fmt: skip
        page = call(svc)
        assert texts(page) == ["first", "last"]
        assert page["skippedLines"] == 3

    @pytest.mark.parametrize(
        "uid",
        ["sk-ant-api03-AbCdEfGhIjKlMnOpQrSt", "DB_PASSWORD=hunter2", "ab\ud800cd", 7, None],
        ids=["api_key", "assignment", "lone_surrogate", "number", "absent"],
    )
    def test_a_credential_shaped_or_broken_uuid_shows_the_rest(
        self, svc: SessionAwareness, tmp_path: Path, uid: object
    ) -> None:
        """R-T4: never `not_available`: the row is named by its offset, the rest shown."""
        path = noted(svc, tmp_path / "t.jsonl")
        write(path, row("u-1", "first"))
        offset = path.stat().st_size
        write(path, row(uid, "second \ud800 text"), row("u-3", "third"))
        page = call(svc)
        assert [m["position"] for m in page["messages"]] == ["u-1", f"offset:{offset}", "u-3"]
        assert texts(page)[1] == "second \ufffd text"


class TestStablePaging:
    def test_paging_backward_while_the_transcript_grows_neither_repeats_nor_skips(
        self, svc: SessionAwareness, tmp_path: Path
    ) -> None:
        """R-T4: `nextBefore` names a message, so rows appended between calls do not shift
        the next page (counted offsets would return m07-m10 where m04-m07 are due)."""
        path = noted(svc, tmp_path / "t.jsonl")
        write(path, *(row(f"m{n:02}", f"message {n}") for n in range(1, 11)))
        page = call(svc, limit=3, offset=0)
        seen = [m["position"] for m in page["messages"]]
        grown = 10
        while page.get("hasMore"):
            write(path, *(row(f"m{n:02}", f"message {n}") for n in range(grown + 1, grown + 4)))
            grown += 3
            page = call(svc, limit=3, before=page["nextBefore"])
            seen = [m["position"] for m in page["messages"]] + seen
        assert seen == [f"m{n:02}" for n in range(1, 11)]

    def test_a_repeated_uuid_cannot_send_paging_round_in_a_loop(
        self, svc: SessionAwareness, tmp_path: Path
    ) -> None:
        """R-T4: positions are unique within a read: the older of two rows sharing a `uuid`
        is named by its offset, so following `nextBefore` reads every message once."""
        path = noted(svc, tmp_path / "t.jsonl")
        uids = ["m01", "dup", "m03", "dup", "m05"]
        write(path, *(row(uid, f"message {n}") for n, uid in enumerate(uids, 1)))
        page = call(svc, limit=2, offset=0)
        seen = texts(page)
        for _ in range(5):  # three pages are enough; a loop would go on
            if not page.get("hasMore"):
                break
            page = call(svc, limit=2, before=page["nextBefore"])
            seen = texts(page) + seen
        assert seen == [f"message {n}" for n in range(1, 6)]

    def test_before_with_an_offset_counts_from_that_message(
        self, svc: SessionAwareness, tmp_path: Path
    ) -> None:
        """R-T4: `offset` skips messages older than `before`."""
        path = noted(svc, tmp_path / "t.jsonl")
        write(path, *(row(f"m{n:02}", f"message {n}") for n in range(1, 11)))
        page = call(svc, limit=2, before="m08", offset=1)
        assert [m["position"] for m in page["messages"]] == ["m05", "m06"]
        assert page["nextBefore"] == "m05" and page["offset"] == 1

    def test_a_before_that_names_no_message_is_refused_naming_the_field(
        self, svc: SessionAwareness, tmp_path: Path
    ) -> None:
        """R-T4: a cursor that names nothing is a caller's mistake, never an empty page."""
        path = noted(svc, tmp_path / "t.jsonl")
        write(path, row("m01", "message 1"))
        answer = call(svc, before="m99")
        assert (answer["error"]["code"], answer["error"]["field"]) == ("invalid_input", "before")
        too_long = call(svc, before="m" * (MAX_POSITION_CHARS + 1))
        assert too_long["error"]["field"] == "before"


class _CountingFile:
    def __init__(self, file: Any) -> None:
        self.file, self.read_bytes = file, 0

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self.file.seek(offset, whence))

    def read(self, size: int) -> bytes:
        data: bytes = self.file.read(size)
        self.read_bytes += len(data)
        return data


def _bytes_read() -> int:
    """What this process has read so far (Linux's /proc/self/io `rchar`)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar")


def test_the_cli_pages_by_position_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """R-T4: `transcript KEY --before POS` is the tool's `before`, and the summary names the
    next position and the lines skipped."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    path = tmp_path / "t.jsonl"
    write(path, *(row(f"m{n:02}", f"message {n}") for n in range(1, 6)), b"{bad\n")
    with open_service(url) as svc:
        svc.open_session(WORKER)
        noted(svc, path)
    assert main(["transcript", WORKER, "--limit", "2", "--offset", "0", "--database-url", url]) == 0
    out = capsys.readouterr().out
    assert "2 messages, " in out
    assert "1 line unreadable, next --offset 2 or --before m04" in out
    assert main(["transcript", WORKER, "--limit", "2", "--before", "m04",
                 "--database-url", url]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "(m02)" in out and "(m03)" in out and "next --before m02" in out
