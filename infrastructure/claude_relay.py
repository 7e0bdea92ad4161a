"""The hook's fast path: hand the signal to the MCP server of the same Claude Code process.

A hook run is a process start, and opening the service (importing it, opening the store, the
startup prune and sweep) costs most of it. Under Claude Code the session's MCP server already
has the service open, so it listens on a Unix socket named after its Claude Code process; a
hook run whose parent or grandparent is that process sends the mapped signal there (one JSON
line) and gets the drained notices back. When no server answers — it has not started yet,
another database URL, a relay error, or signals still kept from an outage — the hook records
in-process as before; the human turn's idempotency key makes a repeat harmless.

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
) -> list[str] | None:
    """The notices, when the session's MCP server recorded the signal; else None."""
    if state.has_spooled():
        return None
    request = json.dumps(
        {"signal": signal, "agent": agent, "databaseUrl": effective_url(database_url)}
    ).encode()
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


def _ask(path: str, request: bytes) -> list[str] | None:
    import socket  # noqa: PLC0415 -- only once a server's socket is there (module docstring)

    if not hasattr(socket, "AF_UNIX"):
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(RELAY_TIMEOUT)
        conn.connect(path)
        conn.sendall(request + b"\n")
        reply = b""
        while not reply.endswith(b"\n") and len(reply) < MAX_MESSAGE:
            chunk = conn.recv(MAX_MESSAGE)
            if not chunk:
                break
            reply += chunk
    answer = json.loads(reply)
    notices = answer.get("notices") if isinstance(answer, dict) else None
    if isinstance(notices, list) and all(isinstance(n, str) for n in notices):
        return notices
    return None
