"""The bench's PostgreSQL: one throw-away cluster for the whole run (``tests/pg.py``'s
``start_cluster``: fsync and synchronous_commit on, otherwise default settings), a fresh
database per scenario run, the database's size and the server's CPU use.

When no cluster can be started, ``PgServer.unavailable`` says why, and every ``pg_``
scenario is reported as skipped with that reason.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

from harness import CLOCK_TICKS, REPO

sys.path.insert(0, str(REPO))  # tests/pg.py, the test suite's throw-away cluster

from tests import pg


class PgServer:
    """Started lazily, on the first ``database()``; ``close()`` stops it."""

    def __init__(self) -> None:
        self.cluster: pg.Cluster | None = None
        self.unavailable: str | None = None
        self._started = False
        self._names = itertools.count(1)

    def start(self) -> str | None:
        """Start the cluster if not yet tried; None when it runs, else why it cannot."""
        if not self._started:
            self._started = True
            try:
                self.cluster = pg.start_cluster()
            except (RuntimeError, OSError) as e:
                self.unavailable = str(e).splitlines()[0] if str(e) else repr(e)
        return self.unavailable

    @property
    def version(self) -> str | None:
        if self.cluster is None:
            return None
        return str(self.cluster.psql("SHOW server_version"))

    def settings(self) -> dict[str, str]:
        if self.cluster is None:
            return {}
        names = ("fsync", "synchronous_commit", "shared_buffers", "max_connections", "wal_level")
        rows = self.cluster.psql(
            "SELECT name, current_setting(name) FROM pg_settings WHERE name IN ("
            + ", ".join(f"'{n}'" for n in names)
            + ")"
        )
        return dict(line.split("|", 1) for line in rows.splitlines())

    @contextlib.contextmanager
    def database(self, label: str) -> Iterator[str]:
        """A fresh database for one scenario run; its DSN. Dropped afterwards."""
        assert self.cluster is not None
        name = f"bench_{label}_{next(self._names)}".lower().replace("-", "_")
        dsn = self.cluster.create_database(name)
        try:
            yield dsn
        finally:
            with contextlib.suppress(RuntimeError, OSError):
                self.cluster.drop_database(name)

    def db_size_mb(self, dsn: str) -> float:
        assert self.cluster is not None
        return int(self.cluster.psql("SELECT pg_database_size(current_database())", dsn)) / 2**20

    def psql(self, sql: str, dsn: str) -> str:
        assert self.cluster is not None
        return str(self.cluster.psql(sql, dsn))

    def cpu_s(self) -> float:
        """CPU time of the server: the postmaster's own, its live children's (backends, WAL
        writer, checkpointer, ...) and, through its cutime/cstime, that of the children it
        has reaped (exited backends, autovacuum workers)."""
        pid = self.postmaster_pid()
        if pid is None:
            return 0.0
        total = 0.0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(entry.name) == pid:
                    total += sum(int(f) for f in fields[11:15]) / CLOCK_TICKS
                elif int(fields[1]) == pid:
                    total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        return total

    def postmaster_pid(self) -> int | None:
        if self.cluster is None or self.cluster.data_dir is None:
            return None
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int((self.cluster.data_dir / "postmaster.pid").read_text().split()[0])
        return None

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None
