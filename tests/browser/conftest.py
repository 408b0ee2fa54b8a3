"""The dashboard in a real Chromium (Debian's /usr/bin/chromium, driven by Playwright),
against a real ``ocd serve`` subprocess with the recorder worker.

Where /usr/bin/chromium is missing these tests skip with one line saying how to install
it; ``OCD_REQUIRE_BROWSER=1`` (set by CI) turns that skip into a failure. Screenshots of
every page go to ``tests/artifacts/`` (git-ignored).
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import pg
from tests.acceptance.conftest import APPS, OcdProcess
from tests.helpers import wait_sync

CHROMIUM = Path("/usr/bin/chromium")
REQUIRE_ENV = "OCD_REQUIRE_BROWSER"
INSTALL_HINT = "Chromium not found at /usr/bin/chromium: install it with apt-get install chromium"
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ADMIN_TOKEN = "admin-token-" + "a" * 20
READ_TOKEN = "read-token-" + "r" * 20


def sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium for one module: Playwright's sync API runs an event loop of its own in this
    thread while it is open, which the asyncio tests of other modules must not meet."""
    if not CHROMIUM.exists():
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {INSTALL_HINT}", pytrace=False)
        pytest.skip(INSTALL_HINT)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    ctx.set_default_timeout(15_000)
    try:
        yield ctx
    finally:
        ctx.close()


@pytest.fixture
def page(context: Any) -> Any:
    return context.new_page()


def screenshot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@dataclass
class Daemon:
    proc: OcdProcess
    port: int
    account: str = "local"
    token: str | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ui(self) -> str:
        return self.base + "/__ocd/ui"

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """A REST API call under /client/v4/accounts/<account>."""
        url = f"{self.base}/client/v4/accounts/{self.account}{path}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())["result"]

    def send(self, queue: str, bodies: list[Any], content_type: str = "json") -> None:
        for i in range(0, len(bodies), 100):
            chunk = bodies[i : i + 100]
            msgs = [{"body": b, "content_type": content_type} for b in chunk]
            self.api("POST", f"/queues/{queue}/messages/batch", {"messages": msgs})

    def backlog(self, queue: str) -> int:
        return int(self.api("GET", f"/queues/{queue}/metrics")["backlog_count"])

    def create(self, queue: str) -> None:
        self.api("POST", "/queues", {"queue_name": queue})

    def wait_backlog(self, queue: str, n: int, timeout: float = 15) -> None:
        wait_sync(lambda: self.backlog(queue) == n, timeout)


CONSUMERS = """
[[workers.queues.consumers]]
queue = "failing"
max_batch_size = 10
max_batch_timeout = 0.1
max_retries = 0
dead_letter_queue = "failing-dlq"
"""


def write_config(tmp: Path, store: str, extra: str = "") -> Path:
    cfg = tmp / "ocd.toml"
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:0"
data_dir = "data"
shutdown_timeout = 5

{store}
{extra}

[[workers]]
name = "app"
main = "{APPS / "recorder.py"}"
routes = ["/"]
{"account = " + json.dumps("acme") if "[[accounts]]" in extra else ""}
vars = {{ RECORD = "{tmp / "record.jsonl"}" }}

[[workers.queues.producers]]
binding = "QUEUE"
queue = "failing"
{CONSUMERS}
"""
    )
    return cfg


@pytest.fixture(scope="module")
def store_section(request: pytest.FixtureRequest, store_backend: str) -> Iterator[str]:
    """The daemon's [store] section: SQLite, or a PostgreSQL database of this module's own."""
    if store_backend != "postgres":
        yield ""
        return
    cluster: pg.Cluster = request.getfixturevalue("pg_cluster")
    name = f"ocd_b_{uuid.uuid4().hex[:16]}"
    dsn = cluster.create_database(name)
    try:
        yield pg.store_config_toml("postgres", dsn)
    finally:
        cluster.drop_database(name)


def start(tmp: Path, store: str, extra: str = "", **kw: Any) -> Daemon:
    proc = OcdProcess(write_config(tmp, store, extra))
    try:
        port = proc.wait_started()
    except BaseException:
        proc.close()
        raise
    return Daemon(proc, port, **kw)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, store_section: str) -> Iterator[Daemon]:
    """One loopback daemon (no accounts, no login) for the module's tests; each test uses
    queues of its own."""
    d = start(tmp_path_factory.mktemp("ui"), store_section)
    try:
        yield d
    finally:
        d.proc.close()


ACCOUNTS = f"""
[[accounts]]
id = "acme"
token_sha256 = ["{sha(ADMIN_TOKEN)}", {{ sha256 = "{sha(READ_TOKEN)}", role = "read" }}]
"""


def http_status(url: str, data: bytes, headers: dict[str, str]) -> int:
    req = urllib.request.Request(url, data=data, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
