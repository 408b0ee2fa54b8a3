"""A throw-away PostgreSQL server for the test session.

``start_cluster()`` runs ``initdb`` in a temp directory and starts ``postgres`` on a free port of
127.0.0.1 with trust auth and superuser ``ocd``; with ``OCD_TEST_POSTGRES_DSN`` set it uses that
server instead and starts nothing. Everything goes through the server binaries (``psql``
included), so the harness needs no database driver.

Environment:
    OCD_TEST_POSTGRES_DSN  use this server (a superuser DSN) instead of starting one
    OCD_TEST_POSTGRES_BIN  directory with initdb/pg_ctl/psql, overriding discovery
"""

from __future__ import annotations

import atexit
import glob
import json
import os
import pwd
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tests.helpers import free_port

DSN_ENV = "OCD_TEST_POSTGRES_DSN"
BIN_ENV = "OCD_TEST_POSTGRES_BIN"
SUPERUSER = "ocd"
# initdb and postgres refuse to run as root; this is the account they run as instead.
SERVER_USER = "postgres"
HOW_TO_ENABLE = (
    f"install PostgreSQL server binaries (Debian: apt-get install postgresql) or set {DSN_ENV}"
)
READY_TIMEOUT_S = 30.0
_DB_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def find_bin_dir() -> Path | None:
    """The directory holding ``initdb``: ``$OCD_TEST_POSTGRES_BIN``, pg_config, newest Debian."""
    override = os.environ.get(BIN_ENV)
    if override is not None:
        return Path(override) if (Path(override) / "initdb").is_file() else None
    if shutil.which("pg_config"):
        try:
            out = subprocess.run(
                ["pg_config", "--bindir"], capture_output=True, text=True, timeout=10, check=True
            )
        except (OSError, subprocess.SubprocessError):
            out = None
        if out is not None and (Path(out.stdout.strip()) / "initdb").is_file():
            return Path(out.stdout.strip())
    found = [Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")]
    found.sort(key=lambda p: _version_key(p.parent.name))
    return found[-1] if found else None


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", name))


def _psql_path() -> str | None:
    bin_dir = find_bin_dir()
    if bin_dir is not None and (bin_dir / "psql").is_file():
        return str(bin_dir / "psql")
    return shutil.which("psql")


def why_unavailable() -> str | None:
    """None if PostgreSQL can be provided, else one line saying why not and how to enable it."""
    if os.environ.get(DSN_ENV):
        if _psql_path() is None:
            return f"PostgreSQL unavailable: {DSN_ENV} is set but no psql binary was found"
        return None
    bin_dir = find_bin_dir()
    if bin_dir is None:
        where = f"{BIN_ENV}={os.environ[BIN_ENV]}" if BIN_ENV in os.environ else "pg_config, PATH"
        return (
            f"PostgreSQL unavailable: no initdb found ({where}, /usr/lib/postgresql/*/bin); "
            + HOW_TO_ENABLE
        )
    missing = [b for b in ("pg_ctl", "psql") if not (bin_dir / b).is_file()]
    if missing:
        return f"PostgreSQL unavailable: {bin_dir} lacks {', '.join(missing)}; " + HOW_TO_ENABLE
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return (
                f"PostgreSQL unavailable: running as root and there is no {SERVER_USER!r} user "
                f"to run the server as; create it or set {DSN_ENV}"
            )
    return None


def with_database(dsn: str, name: str) -> str:
    """``dsn`` pointing at database ``name`` instead."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + name))


def store_config_toml(backend: str, pg_dsn: str | None) -> str:
    """The ``[store]`` section of an ocd.toml selecting ``backend`` ("" for the sqlite default)."""
    if backend == "sqlite":
        return ""
    if backend == "postgres":
        if not pg_dsn:
            raise ValueError("the postgres store backend needs a DSN")
        # A JSON string of ASCII text is a valid TOML basic string.
        return f'[store]\nbackend = "postgres"\ndsn = {json.dumps(pg_dsn)}\n'
    raise ValueError(f"unknown store backend {backend!r}; expected 'sqlite' or 'postgres'")


@dataclass
class Cluster:
    """A PostgreSQL server: one this module started (``managed``) or one named by a DSN."""

    dsn: str
    port: int
    data_dir: Path | None
    bin_dir: Path | None
    managed: bool = True
    _base_dir: Path | None = field(default=None, repr=False)
    _server_options: str = field(default="", repr=False)
    _running: bool = field(default=False, repr=False)

    # -- SQL, through psql so no driver is needed --------------------------------------------

    def psql(self, sql: str, dsn: str | None = None) -> str:
        """Run ``sql`` (autocommit) and return psql's unaligned, tuples-only output."""
        psql = str(self.bin_dir / "psql") if self.bin_dir else _psql_path()
        if psql is None:
            raise RuntimeError("no psql binary found")
        out = subprocess.run(
            [psql, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", dsn or self.dsn],
            input=sql,
            capture_output=True,
            text=True,
            timeout=60,
            env=_client_env(),
        )
        if out.returncode != 0:
            raise RuntimeError(f"psql failed ({out.returncode}): {out.stderr.strip()}")
        return out.stdout.strip()

    def create_database(self, name: str) -> str:
        """Create database ``name`` and return a DSN for it."""
        self.psql(f'CREATE DATABASE "{_checked_name(name)}"')
        return with_database(self.dsn, name)

    def drop_database(self, name: str) -> None:
        """Drop database ``name`` (if it exists), disconnecting whoever is still connected."""
        self.psql(f'DROP DATABASE IF EXISTS "{_checked_name(name)}" WITH (FORCE)')

    def accepts_connections(self) -> bool:
        try:
            return self.psql("SELECT 1") == "1"
        except (RuntimeError, subprocess.SubprocessError):
            return False

    # -- lifecycle (managed clusters only) ------------------------------------------------------

    def start(self) -> None:
        """Start the (stopped) server on the same port and data directory."""
        self._pg_ctl("start", "-l", str(self._log_path), "-o", self._server_options)
        self._running = True
        self._wait_ready()

    def restart(self, mode: str = "fast") -> None:
        """``pg_ctl restart -m MODE``, returning once it accepts connections on the same port."""
        self._pg_ctl("restart", "-m", mode, "-l", str(self._log_path), "-o", self._server_options)
        self._running = True
        self._wait_ready()

    def halt(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m MODE``, keeping the data: ``start()`` brings it back. With
        ``start()`` after it, a restart whose outage the test can observe."""
        self._pg_ctl("stop", "-m", mode)
        self._running = False

    def stop_immediate(self) -> None:
        """Stop without a checkpoint, as a crash would: the next ``start()`` runs WAL recovery."""
        self._pg_ctl("stop", "-m", "immediate")
        self._running = False

    def stop(self) -> None:
        """Stop the server (if running) and remove its directory. Idempotent."""
        atexit.unregister(self.stop)
        if not self.managed or self._base_dir is None:
            return
        try:
            if self._running:
                self._pg_ctl("stop", "-m", "fast")
                self._running = False
        finally:
            shutil.rmtree(self._base_dir, ignore_errors=True)
            self._base_dir = None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self._log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    @property
    def _log_path(self) -> Path:
        return self._require_base() / "postgres.log"

    def _require_base(self) -> Path:
        if not self.managed or self._base_dir is None:
            raise RuntimeError("this PostgreSQL server is not managed by the test harness")
        return self._base_dir

    def _pg_ctl(self, *args: str) -> None:
        assert self.bin_dir is not None and self.data_dir is not None
        cmd = [str(self.bin_dir / "pg_ctl"), "-w", "-t", str(int(READY_TIMEOUT_S))]
        _run_server_cmd([*cmd, "-D", str(self.data_dir), *args], self._require_base(), self)

    def _wait_ready(self) -> None:
        # pg_ctl -w waits for postmaster.pid to say "ready"; also prove a client gets in.
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self.accepts_connections():
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"PostgreSQL on port {self.port} not accepting connections within "
                    f"{READY_TIMEOUT_S}s; log:\n{self.log_tail()}"
                )
            time.sleep(0.02)


def start_cluster() -> Cluster:
    """Start a throw-away server (or attach to ``$OCD_TEST_POSTGRES_DSN``); see module doc."""
    reason = why_unavailable()
    if reason is not None:
        raise RuntimeError(reason)
    external = os.environ.get(DSN_ENV)
    if external:
        cluster = Cluster(
            dsn=external,
            port=urlsplit(external).port or 5432,
            data_dir=None,
            bin_dir=find_bin_dir(),
            managed=False,
        )
        if not cluster.accepts_connections():
            raise RuntimeError(f"cannot connect to {DSN_ENV}={external}")
        return cluster

    bin_dir = find_bin_dir()
    assert bin_dir is not None
    base = Path(tempfile.mkdtemp(prefix="ocd-pg-"))
    if os.geteuid() == 0:
        user = pwd.getpwnam(SERVER_USER)
        os.chown(base, user.pw_uid, user.pw_gid)
    port = free_port()
    cluster = Cluster(
        dsn=f"postgresql://{SUPERUSER}@127.0.0.1:{port}/postgres",
        port=port,
        data_dir=base / "data",
        bin_dir=bin_dir,
        _base_dir=base,
        _server_options=" ".join(
            [
                f"-k {shlex.quote(str(base))}",
                f"-p {port}",
                "-c listen_addresses=127.0.0.1",
                "-c fsync=on",
                "-c synchronous_commit=on",
                "-c max_connections=200",
                "-c shared_buffers=128MB",
            ]
        ),
    )
    # Registered before anything can fail, so a half-started server is still cleaned up.
    atexit.register(cluster.stop)
    try:
        initdb = [str(bin_dir / "initdb"), "-D", str(cluster.data_dir), "-A", "trust"]
        initdb += ["-U", SUPERUSER, "--no-sync", "-E", "UTF8", "--locale=C"]
        _run_server_cmd(initdb, base, cluster)
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _run_server_cmd(cmd: list[str], cwd: Path, cluster: Cluster) -> None:
    kwargs: dict[str, Any] = {}
    if os.geteuid() == 0:
        user = pwd.getpwnam(SERVER_USER)
        kwargs = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    out = subprocess.run(
        cmd,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=READY_TIMEOUT_S + 30,
        env=_client_env(),
        stdin=subprocess.DEVNULL,
        **kwargs,
    )
    if out.returncode != 0:
        raise RuntimeError(
            f"{shlex.join([Path(cmd[0]).name, *cmd[1:]])} failed ({out.returncode}): "
            f"{out.stderr.strip() or out.stdout.strip()}\nserver log:\n{cluster.log_tail()}"
        )


def _client_env() -> dict[str, str]:
    # PG* variables from the developer's shell (PGHOST, PGDATABASE, ...) must not redirect us.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    return env


def _checked_name(name: str) -> str:
    if not _DB_NAME.fullmatch(name):
        raise ValueError(f"not a safe database name: {name!r}")
    return name
