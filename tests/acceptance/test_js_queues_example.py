"""The workers-sdk queues example shape, end to end: a project folder holding only
``wrangler.jsonc`` (a queue producer and consumer, a KV namespace, no compatibility date),
``src/index.ts`` and ``node_modules/.bin``, run with ``ocd dev`` and no ocd.toml. A POST
enqueues a job, the Worker's ``queue()`` writes its result into KV, a GET reads it back,
and kill -9 of ocd loses none of it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.acceptance.conftest import APPS
from tests.helpers import eventually
from tests.js import ESBUILD, WORKERD

# The project folder alone decides: it has no store section, so there is no PostgreSQL run.
pytestmark = [
    pytest.mark.timeout(150),
    pytest.mark.usefixtures("workerd_tools"),
    pytest.mark.sqlite_only,
]

EXAMPLE = APPS / "queues_kv"
# Set outside, these would decide for ocd what the test leaves to the project folder.
CLEAN = ("OCD_CONFIG", "OCD_WORKERD", "OCD_ESBUILD")


def _project(tmp: Path) -> Path:
    """The example as a Worker project's ``npm install`` leaves it."""
    project = tmp / "queues-kv"
    shutil.copytree(EXAMPLE, project)
    bin_dir = project / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "workerd").symlink_to(WORKERD)
    (bin_dir / "esbuild").symlink_to(ESBUILD)
    return project


def _dev(ocd_processes: Any, project: Path) -> Any:
    return ocd_processes(None, command="dev", args=("--port", "0"), cwd=project)


async def _result(s: aiohttp.ClientSession, base: str, job: str) -> dict[str, Any] | None:
    async with s.get(f"{base}/?id={job}") as r:
        if r.status == 404:
            return None
        assert r.status == 200, await r.text()
        got: dict[str, Any] = await r.json()
        return got


async def test_a_job_posted_is_processed_into_kv_and_survives_kill_9(
    tmp_path, ocd_processes, monkeypatch
):
    for name in CLEAN:
        monkeypatch.delenv(name, raising=False)
    project = _project(tmp_path)
    first = _dev(ocd_processes, project)
    base = f"http://127.0.0.1:{first.wait_started(60)}"
    warnings = [
        e for e in first.events
        if e.get("event") == "config_warning" and "compatibility_date" in e.get("msg", "")
    ]  # fmt: skip
    assert len(warnings) == 1, first.log
    assert warnings[0]["msg"].startswith("wrangler.jsonc: compatibility_date: not set")

    async with aiohttp.ClientSession() as s:
        async with s.post(f"{base}/", data="the quick brown fox") as r:
            assert r.status == 202, await r.text()
            job = (await r.json())["id"]
        got = await eventually(lambda: _result(s, base, job), 60, interval=0.1)
        assert got == {"id": job, "words": 4, "shout": "THE QUICK BROWN FOX"}
        async with s.get(f"{base}/") as r:
            assert r.status == 400  # the Worker's own answer: no id given
    first.kill9()

    second = _dev(ocd_processes, project)
    base = f"http://127.0.0.1:{second.wait_started(60)}"
    async with aiohttp.ClientSession() as s:
        assert await _result(s, base, job) == got
        async with s.get(f"{base}/?id=no-such-job") as r:
            assert r.status == 404
            assert await r.text() == "job no-such-job: no result yet\n"
    assert (project / ".ocd").is_dir()  # the data beside the wrangler file
    assert second.stop() == 0
