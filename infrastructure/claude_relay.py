"""The hook's fast path: hand the signal to the MCP server of the same Claude Code process.

A hook run is a process start, and opening the service (importing it, opening the store, the
startup prune and sweep) costs most of it. Under Claude Code the session's MCP server already
has the service open, so it listens on a Unix socket named after its Claude Code process; a
hook run whose parent or grandparent is that process sends the mapped signal there (one JSON
line) and gets the session's pending notices back, read, not acknowledged, with a token. The
hook prints them, then confirms on the same connection (a second line with the token), and
only then does the server acknowledge them (R-N8, ADR 047): a hook that times out, reads a
broken answer or is killed before it confirms leaves them pending, and the next hook run
(in-process or relayed) shows them, so a notice is repeated at worst, never lost. When no
server answers — it has not started yet, another database URL, a relay error, or signals
still kept from an outage — the hook records in-process as before; the human turn's
idempotency key makes a repeat harmless.

Only the mapped fields travel, never message text. The socket lives in a folder only this user
can enter.

The hook's side imports the standard library's `json`, `os`, `socket` and `zlib` and
nothing else (no third-party package, no `pathlib`, `tempfile` or `typing`): on this path the
hook's imports are most of the prompt's wait. `socket` is imported only once a server's socket
is found: a hook that then records in-process (no server up) never loads it.
"""

from __future__ import annotations

import json
import os
import zlib

from session_awareness.configuration import url_in_force
from session_awareness.infrastructure.claude_state import ClaudeState, parent_of, process_identity

#: `typing.TYPE_CHECKING` without importing `typing`; mypy treats the name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

#: How long a hook waits for the server's answer before recording in-process.
RELAY_TIMEOUT = 5.0
MAX_MESSAGE = 1 << 16
#: The longest answer a hook reads (the notices of a large fan-out are far below it); a
#: longer one is not confirmed, so its notices stay pending and the hook shows them itself.
MAX_ANSWER = 1 << 24


def socket_path(state: ClaudeState, host: str) -> Path:
    """Short (Unix socket paths are bounded), per user, per state directory and process."""
    from pathlib import Path  # noqa: PLC0415 -- the hook's side uses `socket_file`

    return Path(socket_file(state, host))


def socket_file(state: ClaudeState, host: str) -> str:
    """`socket_path` as a path string, named by two CRC-32s (of the state directory with the
    host process, and of the host process alone): the name needs to be distinct and short,
    not secret (the folder is this user's alone, and the server checks the database a hook
    names), so `hashlib` (OpenSSL, loaded on import) stays out of the hook."""
    root = os.path.realpath(state.root_text)
    uid = os.getuid() if hasattr(os, "getuid") else 0
    both = f"{root}\0{host}".encode()
    digest = f"{zlib.crc32(both):08x}{zlib.crc32(host.encode()):08x}"
    return os.path.join(temp_dir(), f"session-awareness-{uid}", f"{digest}.sock")


def temp_dir() -> str:
    """The folder `tempfile.gettempdir()` names (`$TMPDIR`, `$TEMP`, `$TMP`, else the usual
    ones, the first this user can write to), without importing `tempfile`."""
    for name in ("TMPDIR", "TEMP", "TMP"):
        given = os.environ.get(name)
        if given and _writable_dir(given):
            return os.path.abspath(given)
    for folder in ("/tmp", "/var/tmp", "/usr/tmp"):  # noqa: S108 -- tempfile's own candidates
        if _writable_dir(folder):
            return folder
    return os.getcwd()


def _writable_dir(path: str) -> bool:
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)


def effective_url(database_url: str | None) -> str | None:
    """The URL given or in the environment; None leaves the choice to the server."""
    return url_in_force(database_url, default=None)


def forward(
    signal: dict[str, Any], *, agent: str, database_url: str | None, state: ClaudeState
) -> Relayed | None:
    """The notices, when the session's MCP server recorded the signal; else None. The
    notices are still pending: print them, then `Relayed.confirm` (R-N8)."""
    if state.has_spooled():
        return None
    request = relay_request(signal, agent=agent, database_url=database_url)
    pid: int | None = os.getpid()
    for _ in range(2):  # a hook runs under a shell, or directly under Claude Code
        pid = parent_of(pid) if pid is not None else None
        host = process_identity(pid) if pid is not None and pid > 1 else None
        if host is None:
            return None
        path = socket_file(state, host)
        if not os.path.exists(path):
            continue
        try:
            return _ask(path, request)
        except (OSError, ValueError):
            return None
    return None


def relay_request(signal: dict[str, Any], *, agent: str, database_url: str | None) -> bytes:
    """The one JSON line a hook sends: its signal, asking for a hand-over (R-N8)."""
    body = {
        "signal": signal,
        "agent": agent,
        "databaseUrl": effective_url(database_url),
        "handover": True,
    }
    return json.dumps(body).encode()


class Relayed:
    """The notices the server handed over, still pending there, and the connection it
    waits on for their confirmation (None: an older server, which drained them already).
    `other_store`: the server serves another store than the hook names, and recorded
    nothing."""

    __slots__ = ("_conn", "_token", "notices", "other_store")

    def __init__(
        self,
        notices: list[str],
        conn: Any = None,
        token: str | None = None,
        *,
        other_store: bool = False,
    ) -> None:
        self.notices, self._conn, self._token = notices, conn, token
        self.other_store = other_store

    def confirm(self) -> None:
        """Tell the server the notices are out (printed), so it acknowledges them, and wait
        for its answer, so the next prompt finds them acknowledged. Call it only after the
        print: a hook that ends before confirming leaves them pending, shown again at the
        next prompt (a repeat, never a loss). A failure here is that same repeat."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            with conn:
                conn.sendall(json.dumps({"confirm": self._token}).encode() + b"\n")
                _line(conn, MAX_MESSAGE)
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        """Give the notices up unconfirmed: they stay pending at the server."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _ask(path: str, request: bytes) -> Relayed | None:
    import socket  # noqa: PLC0415 -- only once a server's socket is there (module docstring)

    if not hasattr(socket, "AF_UNIX"):
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(RELAY_TIMEOUT)
        conn.connect(path)
        conn.sendall(request + b"\n")
        answer = json.loads(_line(conn, MAX_ANSWER))
        if isinstance(answer, dict) and answer.get("otherStore") is True:
            conn.close()
            return Relayed([], other_store=True)
        notices = answer.get("notices") if isinstance(answer, dict) else None
        if not isinstance(notices, list) or not all(isinstance(n, str) for n in notices):
            conn.close()
            return None
        token = answer.get("token")
        if not isinstance(token, str) or not notices:
            conn.close()  # nothing to confirm: no notice, or an older server that drained
            return Relayed(notices)
        return Relayed(notices, conn, token)
    except BaseException:
        conn.close()
        raise


def _line(conn: Any, limit: int) -> bytes:
    """One line from the server, read to its newline; `ValueError` when the connection ends
    first or the line runs past `limit` (the hook then records in-process, and finds the
    notices the server handed over still pending: it acknowledges only on confirmation)."""
    chunks: list[bytes] = []
    size = 0
    while not chunks or not chunks[-1].endswith(b"\n"):
        chunk = conn.recv(MAX_MESSAGE)
        if not chunk:
            raise ValueError("the server closed the connection mid-answer")
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise ValueError("the server's answer is too long")
    return b"".join(chunks)
