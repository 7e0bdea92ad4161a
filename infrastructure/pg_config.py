"""A PostgreSQL URL read the way libpq reads it (`psycopg.conninfo`), with the service's own
options taken out of its query first.

Every libpq parameter passes through (`sslmode`, `sslrootcert`, `application_name`,
`options`, `target_session_attrs`, several hosts, `service=`, a user or password from the
environment or a password file); a parameter neither libpq nor the service knows is refused.
The service's own options are `schema`, `pool_size`, `max_overflow`, `connect_timeout` (also
libpq's) and `lock_timeout`, each checked against what PostgreSQL and the pool can hold. No
message built here holds the password (`_without_secret` says how).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from session_awareness.application.errors import ConfigurationError
from session_awareness.configuration import credentials_end, redact, secret_of

#: PostgreSQL truncates identifiers (and channel names) to NAMEDATALEN - 1 bytes.
MAX_IDENTIFIER_BYTES = 63
#: `lock_timeout` is an int of milliseconds on the server.
MAX_LOCK_TIMEOUT = 2_147_483
#: Bounds the service holds the pool to (connections per process).
MAX_POOL_SIZE, MAX_OVERFLOW = 1000, 1000
#: `connect_timeout` bounds every call during an outage: 1 s to 10 minutes.
MAX_CONNECT_TIMEOUT = 600
CHANNEL_PREFIX = "session_awareness_"

#: The service's own options: name -> (default, lowest, highest).
SERVICE_OPTIONS: dict[str, tuple[int, int, int]] = {
    "pool_size": (2, 1, MAX_POOL_SIZE),
    "max_overflow": (8, 0, MAX_OVERFLOW),
    "connect_timeout": (3, 1, MAX_CONNECT_TIMEOUT),
    "lock_timeout": (0, 0, MAX_LOCK_TIMEOUT),
}


@dataclass(frozen=True)
class PostgresConfig:
    """What a PostgreSQL URL asks for: libpq's parameters and the service's options."""

    #: libpq's connection parameters, as `conninfo_to_dict` gives them (the password too).
    params: dict[str, Any] = field(repr=False)
    schema: str = "public"
    pool_size: int = 2
    max_overflow: int = 8
    connect_timeout: int = 3
    lock_timeout: int = 0

    @property
    def conninfo(self) -> str:
        """The connection string handed to libpq; it holds the password: never print it."""
        return make_conninfo("", **self.params)

    def describe(self) -> str:
        """Where the service connects, for messages: host, port and database, no secret."""
        hosts = self.params.get("host") or self.params.get("hostaddr") or "the default host"
        port = self.params.get("port")
        where = f"{hosts}:{port}" if port else str(hosts)
        return f"{where}/{self.params.get('dbname', '')}".rstrip("/")


def wake_channel_for(schema: str) -> str:
    """The LISTEN/NOTIFY channel of a schema, at most 63 bytes: named after the schema when
    that fits and is ASCII, else after a hash of it (a long or non-ASCII schema)."""
    plain = CHANNEL_PREFIX + schema
    if plain.isascii() and len(plain) <= MAX_IDENTIFIER_BYTES:
        return plain
    return CHANNEL_PREFIX + "h" + hashlib.sha256(schema.encode()).hexdigest()[:32]


def parse_postgres_url(url: str) -> PostgresConfig:
    """Read a `postgresql://` URL; `ConfigurationError` (naming the problem, never the
    password) for anything libpq or the service would refuse."""
    secret = secret_of(url)
    if secret and any(c in secret for c in "/?#@"):
        raise ConfigurationError(
            "the URL's password holds a reserved character (/ ? # @): "
            "percent-encode it (e.g. %2F for /, %3F for ?, %23 for #, %40 for @)"
        )
    base, query = _split_query(url)
    options: dict[str, str] = {}
    passed: list[tuple[str, str]] = []
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name == "schema" or name in SERVICE_OPTIONS:
            if name in options:
                raise ConfigurationError(f"{name} is given twice")
            options[name] = value
            continue  # connect_timeout goes to libpq too, once checked (below)
        passed.append((name, value))
    rebuilt = base + ("?" + "&".join(f"{quote(k)}={quote(v)}" for k, v in passed) if passed else "")
    try:
        params = conninfo_to_dict(rebuilt)
    except (psycopg.Error, ValueError) as error:
        raise ConfigurationError(
            _without_secret("bad PostgreSQL URL: " + redact(_one_line(error)), secret)
        ) from None
    values = {name: _int_option(name, options.get(name)) for name in SERVICE_OPTIONS}
    schema = _schema(options.get("schema", "public"))
    timeout = values["connect_timeout"]
    params["connect_timeout"] = timeout
    # A dead peer (a partition, a frozen host) is noticed by the kernel, not only by the
    # service's own deadline: keepalives on idle connections (the wake listener's), and
    # unacknowledged writes given up after twice the connect timeout.
    for name, value in (("keepalives", 1), ("keepalives_idle", 30), ("keepalives_interval", 5),
                        ("keepalives_count", 3), ("tcp_user_timeout", 2000 * timeout)):  # fmt: skip
        params.setdefault(name, value)
    return PostgresConfig(params=params, schema=schema, **values)


def _split_query(url: str) -> tuple[str, str]:
    """The URL before its query, and the query. The query starts at the first `?` after the
    credentials (a password with an unencoded `?` was refused before)."""
    at = credentials_end(url)
    mark = url.find("?", 0 if at is None else at + 1)
    if mark < 0:
        return url, ""
    return url[:mark], url[mark + 1 :]


def _int_option(name: str, given: str | None) -> int:
    default, lowest, highest = SERVICE_OPTIONS[name]
    if given is None:
        return default
    if not given.isascii() or not given.isdigit() or not lowest <= int(given) <= highest:
        raise ConfigurationError(
            f"{name} must be an integer from {lowest} to {highest}, got {given!r}"
        )
    return int(given)


def _schema(schema: str) -> str:
    if not schema.strip() or "\x00" in schema:
        raise ConfigurationError("schema must be a non-blank name")
    size = len(schema.encode())
    if size > MAX_IDENTIFIER_BYTES:
        raise ConfigurationError(
            f"schema must be at most {MAX_IDENTIFIER_BYTES} bytes in UTF-8 (PostgreSQL "
            f"truncates longer names, so two schemas would share one store), got {size} bytes"
        )
    return schema.strip()


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


#: The shortest piece of a password that messages mask (see `_without_secret`).
MIN_MASKED = 3


def _without_secret(message: str, secret: str | None) -> str:
    """A message with every piece of the password (as written, or decoded) of at least
    `MIN_MASKED` characters masked: the one rule for every message built here.

    libpq never echoes a password: its messages name the host, the port, the user and the
    database (`connection to server at "h", port 5432 failed: FATAL: password authentication
    failed for user "u"`). A password turns up in a message only when the URL parser quotes
    a malformed URL back, or by coincidence. A piece of three characters or more is masked
    wherever it is. A shorter one is left alone: masking it would mangle the message (a
    password `p` made `port 9` read `***ort 9`) and show the password itself by where the
    `***` fall, while leaving it shows nothing (which `p` in the message was it?)."""
    if secret:
        pieces = {secret, unquote(secret), *re.split(r"[%/?#@:]", secret)}
        for piece in sorted(pieces, key=len, reverse=True):
            if len(piece) >= MIN_MASKED:
                message = message.replace(piece, "***")
    return message


def connection_failure(error: BaseException, config: PostgresConfig) -> str:
    """Why a connection failed, in the server's (or libpq's) words, on one line: `password
    authentication failed for user …`, `database "x" does not exist`, `Connection refused`;
    the password masked by the same rule as every other message (`_without_secret`)."""
    return _without_secret(_one_line(error), str(config.params.get("password") or ""))
