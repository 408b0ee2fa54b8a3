"""What a JS worker's handlers throw reaches ocd's log as one record tagged with the worker,
with the error's name, message and a stack told in the user's TypeScript files; and the
batch line, the consumer's last outcome and the cron line say which error it was."""

from __future__ import annotations

import html
import logging
from pathlib import Path

import pytest

from tests.helpers import eventually
from tests.integration.test_js import _js_app
from tests.js import JS_APP

pytestmark = [pytest.mark.timeout(90), pytest.mark.usefixtures("workerd_tools")]
SOURCE = JS_APP / "src" / "index.ts"


@pytest.fixture
async def js_app(tmp_path, store_section):
    async for app in _js_app(tmp_path, store_section, JS_APP):
        yield app


def throw_line() -> str:
    """``index.ts:<line>:`` of the one ``throw new RouteError`` of the test worker."""
    lines = SOURCE.read_text().splitlines()
    [n] = [i + 1 for i, line in enumerate(lines) if "throw new RouteError" in line]
    return f"{Path('js_worker') / 'src' / 'index.ts'}:{n}:"


def records(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == event]


async def test_a_throwing_queue_is_told_with_its_error_stack_and_in_the_batch_line(js_app, caplog):
    caplog.set_level(logging.INFO)
    await js_app.py_send({"throwNamed": True, "noEcho": True})
    error = (await eventually(lambda: records(caplog, "worker_error"), 30))[0]
    assert error.worker == "jsapp" and error.handler == "queue" and error.queue == "to-js"
    assert error.error_name == "RouteError"
    assert error.error_message == "thrown by queue() on purpose"
    assert error.stack.startswith("RouteError: thrown by queue() on purpose\n")
    assert throw_line() in error.stack  # the user's file and line, not the bundle's
    assert "index.js:" not in error.stack and "ocd-entry" not in error.stack
    assert error.getMessage().startswith("worker jsapp: queue() threw RouteError: thrown by")
    batch = (await eventually(lambda: records(caplog, "batch_retried"), 30))[0]
    assert batch.error.startswith("RouteError: thrown by queue() on purpose (at ")
    assert throw_line() in batch.error and throw_line() in batch.getMessage()
    last = js_app.daemon.dispatchers[("local", "to-js")].last_outcome
    assert last is not None and last["outcome"] == "exception"
    assert last["error"] == batch.error
    assert not records(caplog, "handler_failed")  # one record for the error, not two
    # the dashboard's consumers page shows it with the batch
    async with js_app.session.get(js_app.base + "/__ocd/ui/consumers") as r:
        assert r.status == 200, await r.text()
        page = await r.text()
    assert html.escape(batch.error) in page


async def test_a_throwing_fetch_is_told_without_workerds_prefixes(js_app, caplog):
    caplog.set_level(logging.INFO)
    async with js_app.session.get(js_app.base + "/js/throw") as r:
        assert r.status == 500
        assert await r.text() == "Worker threw exception\n"
    [error] = await eventually(lambda: records(caplog, "worker_error"), 30)
    assert error.worker == "jsapp" and error.handler == "fetch"
    assert (error.error_name, error.error_message) == ("RouteError", "thrown by fetch() on purpose")
    assert throw_line() in error.stack
    assert error.method == "GET" and error.url.endswith("/js/throw")
    said = "\n".join(r.getMessage() for r in caplog.records)
    assert "Uncaught exception" not in said and "workerd/" not in said


async def test_a_throwing_scheduled_is_told_in_the_cron_line(js_app, caplog):
    caplog.set_level(logging.INFO)
    url = js_app.base + "/__ocd/scheduled?worker=jsapp&cron=0+0+1+1+*"
    async with js_app.session.post(url) as r:
        out = await r.json()
    assert [x["outcome"] for x in out["ran"]] == ["exception"]
    [error] = records(caplog, "worker_error")  # reported before the outcome came back
    assert error.handler == "scheduled" and error.error_message == "this schedule fails"
    assert "src/index.ts:" in error.stack
    [cron] = records(caplog, "cron_failed")
    assert cron.error.startswith("Error: this schedule fails (at ")
    assert "Traceback" not in (cron.exc_text or "")
    assert cron.exc_info is None  # ocd's own frames are nobody's business here
