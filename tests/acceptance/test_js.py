"""JavaScript workers through ``ocd serve`` and ``ocd check-config`` as processes, with the
pinned npm workerd and esbuild: the README's example Worker unchanged, kill -9 of ocd under
a JS producer's and consumer's load, kill -9 of workerd mid-batch, and the config problems
check-config reports."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.acceptance.conftest import APPS, REPO, records, run_ocd
from tests.helpers import eventually
from tests.js import ESBUILD, JS_APP, WORKERD, js_section, workerd_pid

pytestmark = [pytest.mark.timeout(150), pytest.mark.usefixtures("workerd_tools")]
TOOLS = {"OCD_WORKERD": str(WORKERD), "OCD_ESBUILD": str(ESBUILD)}


def _store() -> str:
    return os.environ.get("OCD_TEST_STORE_SECTION", "")


def _logged(p: Any, text: str) -> list[dict[str, Any]]:
    return [e for e in p.events if e.get("event") == "worker_log" and text in e.get("msg", "")]


async def test_the_example_worker_runs_unchanged(tmp_path, ocd_processes):
    app = tmp_path / "js-app"
    shutil.copytree(
        REPO / "examples" / "js-app", app, ignore=shutil.ignore_patterns("node_modules", ".ocd")
    )
    cfg = app / "ocd.toml"
    cfg.write_text(cfg.read_text().replace("127.0.0.1:8787", "127.0.0.1:0") + _store())
    p = ocd_processes(cfg, extra_env=TOOLS)
    port = p.wait_started()
    async with aiohttp.ClientSession() as s:
        async with s.post(f"http://127.0.0.1:{port}/", data=b"{}") as r:
            assert r.status == 200
            assert await r.text() == "Sent message to the queue"
    lines = await eventually(lambda: _logged(p, "hello"), 30)
    assert lines[0]["worker"] == "js-app"
    assert lines[0]["msg"] == "worker js-app: { hello: 'world' }"
    assert p.stop() == 0


CONFIG = """
[server]
listen = "127.0.0.1:{port}"
data_dir = "data"
shutdown_timeout = 5

{store}
{js}

[[workers]]
name = "jsapp"
main = "{main}"
compatibility_date = "2026-11-01"
routes = ["/js"]

[[workers.queues.producers]]
binding = "QUEUE"
queue = "to-js"

[[workers.queues.producers]]
binding = "ECHO"
queue = "echo"

[[workers.queues.consumers]]
queue = "to-js"
max_batch_size = 10
max_batch_timeout = 0
max_retries = 3

[[workers]]
name = "app"
main = "{recorder}"
routes = ["/"]
vars = {{ RECORD = "{record}" }}

[[workers.queues.consumers]]
queue = "echo"
max_batch_size = 100
max_batch_timeout = 0
"""


def _config(tmp: Path, port: int = 0) -> Path:
    cfg = tmp / "ocd.toml"
    cfg.write_text(
        CONFIG.format(
            port=port,
            store=_store(),
            js=js_section(),
            main=JS_APP / "src" / "index.ts",
            recorder=APPS / "recorder.py",
            record=tmp / "record.jsonl",
        )
    )
    return cfg


def _echoed(tmp: Path) -> list[dict[str, Any]]:
    return [r["body"] for r in records(tmp) if r["queue"] == "echo"]


async def _produce(port: int, confirmed: set[int], stop: asyncio.Event, start: int) -> None:
    """sendBatch(10) from the JS worker until ``stop``; remember the numbers whose send
    resolved in the Worker (a 200 with ok)."""
    n = start
    async with aiohttp.ClientSession() as s:
        while not stop.is_set():
            batch = [{"body": {"n": n + i}} for i in range(10)]
            try:
                async with s.post(f"http://127.0.0.1:{port}/js/send-batch", json=batch) as r:
                    out = await r.json()
                    if r.status == 200 and out.get("ok"):
                        confirmed.update(range(n, n + 10))
            except (aiohttp.ClientError, ValueError):
                return
            n += 10


async def test_kill_9_under_js_load_loses_no_confirmed_message(tmp_path, ocd_processes):
    cfg = _config(tmp_path)
    first = ocd_processes(cfg)
    port = first.wait_started()
    confirmed: set[int] = set()
    stop = asyncio.Event()
    producers = [
        asyncio.create_task(_produce(port, confirmed, stop, k * 10_000_000)) for k in range(4)
    ]
    await eventually(lambda: len(confirmed) >= 1000 and len(_echoed(tmp_path)) >= 200, 60)
    first.kill9()
    stop.set()
    await asyncio.gather(*producers)

    second = ocd_processes(_config(tmp_path, port))
    second.wait_started()

    def delivered() -> set[int]:
        return {e["body"]["n"] for e in _echoed(tmp_path)}

    await eventually(lambda: confirmed <= delivered(), 90)
    assert second.stop() == 0


async def test_kill_9_of_workerd_mid_batch_redelivers_and_workerd_comes_back(
    tmp_path, ocd_processes
):
    p = ocd_processes(_config(tmp_path))
    port = p.wait_started()
    async with aiohttp.ClientSession() as s:
        body = {"body": {"sleepFirst": 60_000, "tag": "slow"}}
        async with s.post(f"http://127.0.0.1:{port}/js/send", json=body) as r:
            assert r.status == 200, await r.text()
        # the handler has it (its record line is logged before it sleeps)
        await eventually(lambda: _logged(p, '"tag":"slow"'), 30)
        old = workerd_pid(p.proc.pid)
        os.kill(old, signal.SIGKILL)
        await eventually(lambda: p.event("workerd_exited"), 10)
        rows = await eventually(lambda: _echoed(tmp_path), 60)
        assert rows[0]["body"]["tag"] == "slow"
        # the killed delivery counted (the handler may have run), and so did any other that
        # lost the bridge: a POST made before ocd saw workerd go lands in the backlog of its
        # dying socket, read or not. Those that never reached it (released) did not count.
        batches = [e for e in p.events if str(e.get("event", "")).startswith("batch_")]
        lost = [e for e in batches if e["event"] == "batch_retried"]
        assert len(lost) >= 1, batches
        assert rows[0]["attempts"] == len(lost) + 1, batches
        assert workerd_pid(p.proc.pid) != old

        async def ready() -> bool:
            async with s.get(f"http://127.0.0.1:{port}/__ocd/readyz") as r:
                return r.status == 200 and (await r.json())["workerd"] == "up"

        await eventually(ready, 10)
    assert p.stop() == 0
    assert len(_echoed(tmp_path)) == 1


def _check(tmp: Path, main: str, source: str, date: str = "2026-11-01") -> Any:
    (tmp / "src").mkdir(exist_ok=True)
    (tmp / "src" / Path(main).name).write_text(source)
    cfg = tmp / "ocd.toml"
    cfg.write_text(
        f'[server]\ndata_dir = "data"\n{js_section()}\n[[workers]]\nname = "w"\n'
        f'main = "{main}"\ncompatibility_date = "{date}"\n'
    )
    return run_ocd("check-config", "-c", str(cfg))


def test_check_config_shows_esbuilds_errors_with_file_and_line(tmp_path):
    out = _check(tmp_path, "src/broken.ts", "export default {\n  async fetch( {\n")
    assert out.returncode == 2
    assert "workers[0].main: esbuild could not bundle it" in out.stderr
    assert "src/broken.ts:3:0: Expected identifier but found end of file" in out.stderr
    assert "Traceback" not in out.stderr


def test_check_config_refuses_a_compatibility_date_newer_than_workerd(tmp_path):
    out = _check(tmp_path, "src/ok.js", "export default {};\n", date="2099-01-01")
    assert out.returncode == 2
    assert (
        'workers[0].compatibility_date: worker "w" requires compatibility date "2099-01-01"'
        in out.stderr
    )
    assert "newest date workerd" in out.stderr


def test_check_config_shows_workerds_refusal_at_load(tmp_path):
    out = _check(tmp_path, "src/throws.js", "export default {};\nnotDefinedAnywhere();\n")
    assert out.returncode == 2
    assert "workerd refused the JavaScript worker(s)" in out.stderr
    assert "ReferenceError: notDefinedAnywhere is not defined" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_missing_toolchain_says_what_to_install(tmp_path):
    (tmp_path / "w.js").write_text("export default {};\n")
    cfg = tmp_path / "ocd.toml"
    cfg.write_text(
        '[server]\ndata_dir = "data"\n[[workers]]\nname = "w"\nmain = "w.js"\n'
        'compatibility_date = "2026-11-01"\n'
    )
    env = {"PATH": "/usr/bin:/bin"}
    out = run_ocd("check-config", "-c", str(cfg), env=env)
    assert out.returncode == 2
    assert "workerd is not installed" in out.stderr
    assert "npm install workerd@1.20261123.1 esbuild@0.28.2" in out.stderr


async def test_sigterm_lets_a_js_batch_finish_and_acks_it(tmp_path, ocd_processes):
    p = ocd_processes(_config(tmp_path))
    port = p.wait_started()
    async with aiohttp.ClientSession() as s:
        body = {"body": {"sleepFirst": 1_500, "tag": "draining"}}
        async with s.post(f"http://127.0.0.1:{port}/js/send", json=body) as r:
            assert r.status == 200, await r.text()
    await eventually(lambda: _logged(p, '"tag":"draining"'), 30)
    assert p.stop() == 0  # SIGTERM while the handler sleeps: it finishes first
    assert p.event("batch_acked") is not None
    assert p.event("batch_released") is None
    # nothing left: a new start delivers nothing again
    again = ocd_processes(_config(tmp_path))
    again.wait_started()
    rows = await eventually(lambda: _echoed(tmp_path), 30)  # the echo may wait for this run
    assert [(r["body"]["tag"], r["attempts"]) for r in rows] == [("draining", 1)]
    assert again.stop() == 0
    assert [r["body"]["tag"] for r in _echoed(tmp_path)] == ["draining"]


async def test_dev_rebundles_a_changed_js_worker_and_ignores_its_own_writes(
    tmp_path, ocd_processes
):
    """``ocd dev`` with the worker, its config and the data directory in one folder: an edit
    of the worker switches to a new workerd; ocd's own writes there (the database, the
    bundles) reload nothing."""
    for f in (JS_APP / "src").iterdir():  # beside the config and the data dir
        shutil.copy(f, tmp_path / f.name)
    cfg = tmp_path / "ocd.toml"
    cfg.write_text(
        f'[server]\nlisten = "127.0.0.1:0"\ndata_dir = ".ocd"\n{_store()}\n{js_section()}\n'
        '[[workers]]\nname = "jsapp"\nmain = "index.ts"\ncompatibility_date = "2026-11-01"\n'
        'routes = ["/"]\n[[workers.queues.producers]]\nbinding = "QUEUE"\nqueue = "loop"\n'
        '[[workers.queues.consumers]]\nqueue = "loop"\nmax_batch_timeout = 0\n'
    )
    p = ocd_processes(cfg, command="dev")
    port = p.wait_started()
    await eventually(lambda: p.event("dev_watching"), 20)
    async with aiohttp.ClientSession() as s:

        async def text() -> str:
            async with s.get(f"http://127.0.0.1:{port}/x") as r:
                return await r.text()

        assert await text() == "hello from GET /x"
        async with s.post(f"http://127.0.0.1:{port}/send", json={"body": {"n": 1}}) as r:
            assert r.status == 200, await r.text()
        await eventually(lambda: p.event("batch_acked"), 30)  # the database was written
        index = tmp_path / "index.ts"
        index.write_text(index.read_text().replace("hello from", "edited from"))

        async def edited() -> bool:
            return await text() == "edited from GET /x"

        await eventually(edited, 30)
    reloads = [e for e in p.events if e.get("event") == "reload_applied"]
    assert len(reloads) == 1, [e["msg"] for e in reloads]
    changes = [e["msg"] for e in p.events if e.get("event") == "dev_changed"]
    assert changes and not any("/.ocd/" in c for c in changes), changes
    assert "running on a new workerd" in reloads[0]["msg"]
    assert p.stop() == 0
