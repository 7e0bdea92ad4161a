"""What kind of failure an open reports (R-E1): a server that cannot be reached or is
restarting is a `StoreUnavailableError` (a gateway retries at start-up on the class alone); only
a malformed URL or option, or what the server refuses, is a `ConfigurationError`."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from session_awareness.application import ConfigurationError, StoreUnavailableError, open_service
from session_awareness.infrastructure.cli import main
from session_awareness.testing.pgcluster import PostgresCluster

SECRET = "S3cret-pw"  # noqa: S105 -- made up, to check it never shows
#: The protocol's requests a client may send before its startup packet: SSL, GSS encryption.
_ENCRYPTION_REQUESTS = (80877103, 80877104)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def error_response(code: str, message: str) -> bytes:
    """A PostgreSQL `ErrorResponse` message, as a server sends it before authentication."""
    fields = b"".join(
        kind + text.encode() + b"\0"
        for kind, text in ((b"S", "FATAL"), (b"V", "FATAL"), (b"C", code), (b"M", message))
    )
    body = fields + b"\0"
    return b"E" + struct.pack("!I", len(body) + 4) + body


@pytest.fixture
def starting_up() -> Iterator[int]:
    """A server that answers every connection as PostgreSQL does while it starts up (SQLSTATE
    57P03): libpq talks to it over a real socket."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                while True:
                    length, code = struct.unpack("!II", conn.recv(8, socket.MSG_WAITALL))
                    if code not in _ENCRYPTION_REQUESTS:
                        conn.recv(length - 8, socket.MSG_WAITALL)
                        break
                    conn.sendall(b"N")  # no encryption: the startup packet follows
                conn.sendall(error_response("57P03", "the database system is starting up"))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    thread.join(timeout=5)
    listener.close()


class TestUnreachableAtOpen:
    def test_a_refused_connection_is_a_store_unavailable_error(self) -> None:
        """R-E1: a closed port; the server's (libpq's) words, without the password."""
        url = f"postgresql://sa:{SECRET}@127.0.0.1:{closed_port()}/db?connect_timeout=2"
        with pytest.raises(StoreUnavailableError) as raised:
            open_service(url)
        assert "Connection refused" in str(raised.value)
        assert SECRET not in str(raised.value)
        assert not isinstance(raised.value, ConfigurationError)

    def test_an_unknown_host_is_a_store_unavailable_error(self) -> None:
        """R-E1: a host name that does not resolve (`.invalid` never does)."""
        url = f"postgresql://sa:{SECRET}@no-such-host.invalid/db?connect_timeout=2"
        with pytest.raises(StoreUnavailableError) as raised:
            open_service(url)
        assert "no-such-host.invalid" in str(raised.value)
        assert SECRET not in str(raised.value)

    def test_a_server_starting_up_is_a_store_unavailable_error(self, starting_up: int) -> None:
        """R-E1: "the database system is starting up" is worth trying again."""
        url = f"postgresql://sa:{SECRET}@127.0.0.1:{starting_up}/db?connect_timeout=3"
        with pytest.raises(StoreUnavailableError) as raised:
            open_service(url)
        assert "the database system is starting up" in str(raised.value)
        assert SECRET not in str(raised.value)


class TestRefusedAtOpen:
    @pytest.mark.parametrize(
        "query", ["pool_size=0", "connect_timeout=abc", "schema=", "no_such_option=1"]
    )
    def test_a_malformed_option_is_a_configuration_error(self, query: str) -> None:
        """R-E1: an option the service cannot use, before any connection is tried."""
        url = f"postgresql://sa:{SECRET}@127.0.0.1:{closed_port()}/db?{query}"
        with pytest.raises(ConfigurationError) as raised:
            open_service(url)
        assert SECRET not in str(raised.value)

    def test_a_real_server_refusing_the_password_is_a_configuration_error(
        self, postgres: PostgresCluster
    ) -> None:
        """R-E1: a reachable server that refuses the credentials: trying again won't help."""
        wrong = postgres.url.replace(f":{postgres.password}@", f":{SECRET}@")
        with pytest.raises(ConfigurationError) as raised:
            open_service(wrong)
        assert "password authentication failed" in str(raised.value)
        assert SECRET not in str(raised.value)
        with open_service(f"{postgres.url}?schema=open_errors") as svc:  # it does answer
            assert svc.health()["store"] == "ok"


class TestTheCli:
    def test_an_unreachable_server_reads_as_such_and_exits_2(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """R-E1: the CLI's one line says the store is unavailable, without the password."""
        url = f"postgresql://sa:{SECRET}@127.0.0.1:{closed_port()}/db?connect_timeout=2"
        assert main(["audit", "--database-url", url]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: session store unavailable: cannot open postgresql://sa:***@")
        assert "Connection refused" in err and SECRET not in err
