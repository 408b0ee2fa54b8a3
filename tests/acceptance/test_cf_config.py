"""The seed's example project, configured by its ``cf.config.ts``, run as ``ocd serve -c
cf.config.ts`` with the pinned workerd and esbuild and the system's node: a message sent by
its fetch is consumed by its queue(), and kill -9 of ocd mid-batch loses nothing. And what
``ocd check-config -c cf.config.ts`` says about a bad one."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.acceptance.conftest import APPS, run_ocd
from tests.helpers import eventually
from tests.js import ESBUILD, NODE, WORKERD

pytestmark = [pytest.mark.timeout(150), pytest.mark.usefixtures("workerd_tools")]
TOOLS = {
    "OCD_WORKERD": str(WORKERD),
    "OCD_ESBUILD": str(ESBUILD),
    "OCD_NODE": str(NODE),
}


def _app(tmp: Path) -> Path:
    shutil.copytree(APPS / "cf_config", tmp / "app")
    return tmp / "app" / "cf.config.ts"


def _logged(p: Any, prefix: str) -> list[str]:
    """The Worker's own log lines starting with ``prefix``."""
    tag = "worker queue-app: "
    return [
        e["msg"][len(tag) :]
        for e in p.events
        if e.get("event") == "worker_log" and e.get("msg", "").startswith(tag + prefix)
    ]


async def _send(s: aiohttp.ClientSession, port: int, id_: str) -> None:
    async with s.post(f"http://127.0.0.1:{port}/?id={id_}") as r:
        assert (r.status, await r.text()) == (200, f"queued {id_}")


async def test_the_seed_project_runs_from_its_cf_config_and_survives_kill_9(
    tmp_path, ocd_processes
):
    cfg = _app(tmp_path)
    first = ocd_processes(cfg, extra_env=TOOLS, args=("--port", "0"))
    port = first.wait_started()
    async with aiohttp.ClientSession() as s:
        await _send(s, port, "first")
        assert await eventually(lambda: _logged(first, "consumed first"), 30) == [
            "consumed first (hello from cf.config)"  # the var from bindings.var reached env
        ]
        await eventually(lambda: first.event("batch_acked"), 30)  # settled: not redelivered
        # One message held in queue() when ocd dies, more committed behind it.
        await _send(s, port, "hold-1")
        await eventually(lambda: _logged(first, "received hold-1 attempt 1"), 30)
        for i in range(10):
            await _send(s, port, f"after-{i}")
    first.kill9()

    second = ocd_processes(cfg, extra_env=TOOLS, args=("--port", "0"))
    second.wait_started()
    wanted = {"hold-1", *(f"after-{i}" for i in range(10))}

    def consumed() -> set[str]:
        lines = _logged(first, "consumed ") + _logged(second, "consumed ")
        return {line.split()[1] for line in lines}

    await eventually(lambda: wanted <= consumed(), 60)
    # The held message was delivered again, its killed attempt counted.
    assert _logged(second, "received hold-1 attempt 2")
    assert _logged(second, "consumed first") == []  # acked before the kill: not redelivered
    assert second.stop() == 0


def _check(cfg: Path) -> tuple[int, str]:
    done = run_ocd("check-config", "-c", str(cfg), env={**os.environ, **TOOLS})
    return done.returncode, done.stderr


def test_check_config_names_the_file_and_the_cf_config_key_path(tmp_path):
    cfg = _app(tmp_path)
    cfg.write_text(cfg.read_text().replace("maxBatchSize: 5", "maxBatchSize: 500"))
    code, err = _check(cfg)
    assert code == 2
    assert (
        f"{cfg}: worker.triggers.queues[0].maxBatchSize: expected an integer 1..100, got 500"
    ) in err
    assert "Traceback" not in err


def test_check_config_shows_the_js_error_of_a_config_that_throws(tmp_path):
    cfg = _app(tmp_path)
    cfg.write_text(
        cfg.read_text().replace(
            "export default",
            'if (!process.env.REGION) throw new Error("set REGION");\nexport default',
        )
    )
    code, err = _check(cfg)
    assert code == 2
    assert f"{cfg}: evaluating the file failed:" in err
    assert "Error: set REGION" in err
    assert "Traceback" not in err


def test_check_config_accepts_the_seed_project(tmp_path):
    cfg = _app(tmp_path)
    code, err = _check(cfg)
    assert code == 0, err


async def test_ocd_dev_reloads_when_the_cf_config_changes(tmp_path, ocd_processes):
    cfg = _app(tmp_path)
    p = ocd_processes(cfg, extra_env=TOOLS, command="dev", args=("--port", "0"))
    port = p.wait_started()
    await eventually(lambda: p.event("dev_watching"), 10)
    async with aiohttp.ClientSession() as s:
        await _send(s, port, "before")
        await eventually(lambda: _logged(p, "consumed before"), 30)
        cfg.write_text(cfg.read_text().replace("hello from cf.config", "edited greeting"))
        await eventually(lambda: p.event("reload_applied"), 30)
        await _send(s, port, "after")
        assert await eventually(lambda: _logged(p, "consumed after"), 30) == [
            "consumed after (edited greeting)"
        ]
    assert p.stop() == 0
