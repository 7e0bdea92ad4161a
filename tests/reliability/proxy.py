"""A loopback TCP proxy in front of a test PostgreSQL server that can lose a COMMIT's reply.

Armed, it forwards the client's COMMIT to the server, waits for the server's CommandComplete
for it (sent only once the commit is durable) and then drops both connections instead of
passing it on: the transaction is committed, and the client cannot know. It reads the
frontend protocol to find the COMMIT: a simple query ('Q') ending in it or, as psycopg's
pipeline mode sends it, a Parse ('P') of `COMMIT`. Loopback only; every connection ends
with the proxy.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable

#: Startup-phase requests that carry no type byte and get a one-byte answer.
_SSL_REQUEST, _GSSENC_REQUEST = 80877103, 80877104


def is_commit(kind: bytes, body: bytes) -> bool:
    """Whether a frontend message runs COMMIT: a simple query whose last statement is COMMIT
    (the write path sends its rows and the COMMIT as one query), or a Parse of it."""
    if kind == b"Q":
        return body.rstrip(b"\0").rsplit(b";", 1)[-1].strip().upper() == b"COMMIT"
    if kind == b"P":  # Parse: statement name \0, query \0, parameter types
        _, _, rest = body.partition(b"\0")
        return rest.partition(b"\0")[0].strip().upper() == b"COMMIT"
    return False


class Link:
    """One client connection and its upstream connection."""

    def __init__(self, proxy: CommitDroppingProxy, client: socket.socket) -> None:
        self.proxy, self.client = proxy, client
        self.server = socket.create_connection(("127.0.0.1", proxy.upstream_port), timeout=10)
        self.server.settimeout(None)
        for sock in (client, self.server):  # no Nagle delay on a chatty protocol
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.commit_forwarded = threading.Event()
        self.untyped_answers = 0  # one-byte answers owed to SSL/GSS requests
        self.closed = threading.Event()
        for pump in (self._from_client, self._from_server):
            threading.Thread(target=self._guard(pump), daemon=True).start()

    def _guard(self, pump: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                pump()
            except OSError:
                pass
            finally:
                self.close()

        return run

    def close(self) -> None:
        if not self.closed.is_set():
            self.closed.set()
            for sock in (self.client, self.server):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    @staticmethod
    def _read(sock: socket.socket, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = sock.recv(size - len(data))
            if not chunk:
                raise OSError("connection closed")
            data += chunk
        return data

    def _message(self, sock: socket.socket) -> tuple[bytes, bytes]:
        kind = self._read(sock, 1)
        (length,) = struct.unpack("!i", self._read(sock, 4))
        return kind, self._read(sock, length - 4)

    def _from_client(self) -> None:
        startup = True
        while True:
            if startup:  # untyped: length, then a request code or the protocol version
                header = self._read(self.client, 8)
                length, code = struct.unpack("!ii", header)
                startup = code in (_SSL_REQUEST, _GSSENC_REQUEST)
                self.untyped_answers += startup
                self.server.sendall(header + self._read(self.client, length - 8))
                continue
            kind, body = self._message(self.client)
            if self.proxy.armed.is_set() and is_commit(kind, body):
                self.proxy.armed.clear()
                self.proxy.commits_seen.append(kind.decode())
                self.commit_forwarded.set()
            self.server.sendall(kind + struct.pack("!i", len(body) + 4) + body)

    def _from_server(self) -> None:
        while True:
            kind = self._read(self.server, 1)
            if self.untyped_answers:  # counted before the request was forwarded
                self.untyped_answers -= 1
                self.client.sendall(kind)
                continue
            (length,) = struct.unpack("!i", self._read(self.server, 4))
            body = self._read(self.server, length - 4)
            if self.commit_forwarded.is_set() and kind == b"C" and body.startswith(b"COMMIT"):
                self.proxy.dropped.set()  # committed: lose the answer and the connection
                return
            self.client.sendall(kind + struct.pack("!i", len(body) + 4) + body)


class CommitDroppingProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.armed = threading.Event()
        self.dropped = threading.Event()
        self.commits_seen: list[str] = []
        self.links: list[Link] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.links.append(Link(self, client))

    def arm(self) -> None:
        """Lose the answer to the next COMMIT any connection sends."""
        self.dropped.clear()
        self.armed.set()

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        for link in self.links:
            link.close()
