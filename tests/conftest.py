"""Session-wide fixtures: a throw-away PostgreSQL server and the store-backend switch.

``OCD_REQUIRE_POSTGRES=1`` (set by CI) turns "PostgreSQL unavailable" from a skip into a
failure, and fails the run if any test still skipped for a PostgreSQL reason.
``OCD_REQUIRE_NODE=1`` does the same for the tests that run wrangler from npm.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Iterator

import pytest

from tests import js, pg, wrangler

REQUIRE_ENV = "OCD_REQUIRE_POSTGRES"
STORE_ENV = "OCD_TEST_STORE"
STORE_BACKENDS = ("sqlite", "postgres")

_postgres_skips: list[str] = []
_node_skips: list[str] = []


def _postgres_required() -> bool:
    return os.environ.get(REQUIRE_ENV) == "1"


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[pg.Cluster]:
    """The session's PostgreSQL server, started once; skips (or fails) when unavailable."""
    reason = pg.why_unavailable()
    if reason is not None:
        if _postgres_required():
            pytest.fail(f"{REQUIRE_ENV}=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    cluster = pg.start_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def pg_dsn(pg_cluster: pg.Cluster) -> Iterator[str]:
    """A DSN for a fresh database of its own, dropped after the test."""
    name = f"ocd_t_{uuid.uuid4().hex[:16]}"
    dsn = pg_cluster.create_database(name)
    try:
        yield dsn
    finally:
        pg_cluster.drop_database(name)


@pytest.fixture(scope="session")
def store_backend() -> str:
    """The store backend daemon tests run on: ``$OCD_TEST_STORE``, ``sqlite`` by default."""
    backend = os.environ.get(STORE_ENV, "sqlite")
    if backend not in STORE_BACKENDS:
        pytest.fail(f"{STORE_ENV}={backend!r}; expected one of {STORE_BACKENDS}", pytrace=False)
    return backend


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str | None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return None
    if isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    return str(report.longrepr)


def _note_postgres_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    reason = _skip_reason(report)
    if reason is not None and "postgres" in reason.lower():
        _postgres_skips.append(f"{report.nodeid}: {reason}")
    if reason is not None and ("wrangler" in reason.lower() or "workerd" in reason.lower()):
        _node_skips.append(f"{report.nodeid}: {reason}")


@pytest.fixture(scope="session")
def wrangler_cli() -> None:
    """wrangler from tests/node_modules; skips (or fails, with OCD_REQUIRE_NODE=1) without."""
    reason = wrangler.why_unavailable()
    if reason is not None:
        if wrangler.required():
            pytest.fail(f"{wrangler.REQUIRE_ENV}=1 but {reason}", pytrace=False)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def workerd_tools() -> None:
    """workerd and esbuild from tests/node_modules; skips (or fails, with
    OCD_REQUIRE_NODE=1) without."""
    reason = js.why_unavailable()
    if reason is not None:
        if wrangler.required():
            pytest.fail(f"{wrangler.REQUIRE_ENV}=1 but {reason}", pytrace=False)
        pytest.skip(reason)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Acceptance and chaos tests (real processes, real faults) are ``slow``: ``-m "not
    slow"`` leaves the quick tiers."""
    for item in items:
        if any(part in ("acceptance", "chaos") for part in item.path.parts[-3:-1]):
            item.add_marker(pytest.mark.slow)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _note_postgres_skip(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _note_postgres_skip(report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    global _exitstatus
    if _postgres_required() and _postgres_skips and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if wrangler.required() and _node_skips and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    _exitstatus = int(session.exitstatus)


_exitstatus = 0
LEFTOVER_GRACE_S = 10.0
EXIT_WATCHDOG_S = 180.0


def pytest_unconfigure(config: pytest.Config) -> None:
    """A test that failed half-way can leave a non-daemon thread behind (an aiosqlite
    connection never closed, a to_thread call still blocked): Python waits for it at exit,
    and one such run waited until CI's limit with every result already printed. Give such
    threads a grace period, then name them with their stacks and exit with the run's status."""
    # Whatever else could hold the exit (an atexit call, a child's pipe): name it and stop.
    faulthandler.dump_traceback_later(EXIT_WATCHDOG_S, exit=True)
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    for thread in _leftover_threads():
        thread.join(max(0.0, deadline - time.monotonic()))
    leftover = _leftover_threads()
    if not leftover:
        return
    frames = sys._current_frames()
    print(f"\n{len(leftover)} thread(s) still running after the tests:", file=sys.stderr)
    for thread in leftover:
        print(f"--- {thread.name}", file=sys.stderr)
        frame = frames.get(thread.ident or 0)
        if frame is not None:
            traceback.print_stack(frame, file=sys.stderr)
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(_exitstatus)


def _leftover_threads() -> list[threading.Thread]:
    main = threading.main_thread()
    return [t for t in threading.enumerate() if t is not main and not t.daemon and t.is_alive()]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _postgres_required() and _postgres_skips:
        terminalreporter.write_line(
            f"FAILED: {REQUIRE_ENV}=1 but {len(_postgres_skips)} test(s) skipped for a "
            f"PostgreSQL reason, e.g. {_postgres_skips[0]}",
            red=True,
        )
    if wrangler.required() and _node_skips:
        terminalreporter.write_line(
            f"FAILED: {wrangler.REQUIRE_ENV}=1 but {len(_node_skips)} test(s) skipped for a "
            f"wrangler or workerd reason, e.g. {_node_skips[0]}",
            red=True,
        )
