"""A Worker project's first hour on ocd: ``ocd dev`` in the folder of an ``npm create
cloudflare`` queues project (a wrangler file, ``src/index.ts``, ``npm install`` done so that
wrangler's workerd is in ``node_modules/.bin``), with no ocd.toml; ``-c wrangler.toml``; the
worker without routes; a wrangler file without a compatibility date; and a worker date the
installed workerd is too old for."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.acceptance.conftest import APPS, REPO, run_ocd
from tests.helpers import eventually, free_port
from tests.js import ESBUILD, OLDEST_WORKERD, WORKERD, WRANGLER_WORKERD, js_section

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("workerd_tools")]

EXAMPLE = REPO / "examples" / "js-app"
# Set outside, these would decide for ocd what the tests leave to the project folder.
CLEAN = {"OCD_CONFIG": "", "OCD_WORKERD": "", "OCD_ESBUILD": ""}

WRANGLER_JSONC = """{
  // as `npm create cloudflare` writes it for a queues project
  "$schema": "node_modules/wrangler/config-schema.json",
  "name": "my-queues-app",
  "main": "src/index.ts",
  %(date)s
  "observability": { "enabled": true },
  "queues": {
    "producers": [{ "binding": "QUEUE", "queue": "my-queue" }],
    "consumers": [{ "queue": "my-queue", "max_batch_timeout": 0 }],
  },
}
"""


def _project(
    tmp: Path,
    date: str | None = '"compatibility_date": "2026-04-01",',
    workerd: Path = WRANGLER_WORKERD,
) -> Path:
    """A Worker project as npm leaves it: wrangler.jsonc, src/index.ts, and node_modules/.bin
    holding wrangler's workerd (not ocd's pinned one) and esbuild."""
    (tmp / "src").mkdir()
    shutil.copy(EXAMPLE / "src" / "index.ts", tmp / "src" / "index.ts")
    (tmp / "wrangler.jsonc").write_text(WRANGLER_JSONC % {"date": date or ""})
    bin_dir = tmp / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "workerd").symlink_to(workerd)
    (bin_dir / "esbuild").symlink_to(ESBUILD)
    return tmp


def _logged(p: Any, text: str) -> list[dict[str, Any]]:
    return [e for e in p.events if e.get("event") == "worker_log" and text in e.get("msg", "")]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEAN}
    env.update(extra)
    return env


def _need(workerd: Path) -> None:
    if not workerd.exists():
        pytest.skip(f"{workerd} is not installed: run npm --prefix tests ci (Linux x64)")


@pytest.mark.parametrize(
    ("workerd", "version"),
    [(WRANGLER_WORKERD, "2026-11-17"), (OLDEST_WORKERD, "2026-04-26")],
    ids=["wranglers-workerd", "oldest-supported-workerd"],
)
async def test_ocd_dev_runs_a_wrangler_project_folder(tmp_path, ocd_processes, workerd, version):
    """On the workerd wrangler installs, and on the oldest ocd supports (whose newest date,
    2026-05-03, is older than the date ocd's bridge used to ask for)."""
    _need(workerd)
    project = _project(tmp_path, workerd=workerd)
    port = free_port()
    p = ocd_processes(
        None, command="dev", args=("--port", str(port)), cwd=project, extra_env=_env()
    )
    assert p.wait_started(60) == port
    async with aiohttp.ClientSession() as s:
        async with s.post(f"http://127.0.0.1:{port}/any/path", data=b"{}") as r:
            assert r.status == 200
            assert await r.text() == "Sent message to the queue"
    lines = await eventually(lambda: _logged(p, "hello"), 30)
    assert lines[0]["msg"] == "worker my-queues-app: { hello: 'world' }"
    started = p.event("workerd_started")
    assert started is not None
    assert started["msg"].startswith(f"workerd {version} serving")  # the binary, named
    assert (project / ".ocd").is_dir()
    assert p.stop() == 0


async def test_serve_takes_a_wrangler_toml_with_c(tmp_path, ocd_processes):
    (tmp_path / "src").mkdir()
    shutil.copy(EXAMPLE / "src" / "index.ts", tmp_path / "src" / "index.ts")
    shutil.copy(EXAMPLE / "wrangler.toml", tmp_path / "wrangler.toml")
    p = ocd_processes(
        tmp_path / "wrangler.toml",
        args=("--port", "0"),
        extra_env=_env(OCD_WORKERD=str(WORKERD), OCD_ESBUILD=str(ESBUILD)),
    )
    port = p.wait_started(60)
    async with aiohttp.ClientSession() as s:
        async with s.post(f"http://127.0.0.1:{port}/", data=b"{}") as r:
            assert r.status == 200
            assert await r.text() == "Sent message to the queue"
    await eventually(lambda: _logged(p, "hello"), 30)
    assert (tmp_path / ".ocd").is_dir()  # the data beside the wrangler file
    assert p.stop() == 0


def test_a_wrangler_file_without_a_date_runs_on_the_newest_with_one_warning(tmp_path):
    project = _project(tmp_path, date=None)
    out = run_ocd("check-config", cwd=project, env=_env())
    assert out.returncode == 0, out.stderr
    warnings = [line for line in out.stderr.splitlines() if "compatibility_date" in line]
    assert len(warnings) == 1, out.stderr
    assert "wrangler.jsonc: compatibility_date: not set" in warnings[0]
    assert "newest date the installed workerd supports" in warnings[0]
    assert out.stdout.startswith("wrangler.jsonc: OK (1 worker(s), 1 queue(s), 1 consumer(s))")


def _two_workers(tmp: Path, js_routes: str, second: str) -> Path:
    (tmp / "w.js").write_text(
        'export default { async fetch(req) { return new Response("js " + new URL(req.url)'
        ".pathname); } };\n"
    )
    (tmp / "consumer.js").write_text("export default { async queue(batch) { batch.ackAll(); } };\n")
    cfg = tmp / "ocd.toml"
    cfg.write_text(
        f'[server]\nlisten = "127.0.0.1:0"\ndata_dir = "data"\n{js_section()}\n'
        f'[[workers]]\nname = "web"\nmain = "w.js"\ncompatibility_date = "2026-11-01"\n'
        f"{js_routes}\n{second}"
    )
    return cfg


def test_a_worker_without_routes_gets_every_path_no_other_claims(tmp_path, ocd_processes):
    """A JS worker with fetch and no routes beside a Python worker on /py and a JS
    consumer-only worker without routes (no fetch, so it takes nothing)."""
    cfg = _two_workers(
        tmp_path,
        "",
        f'[[workers]]\nname = "py"\nmain = "{APPS / "recorder.py"}"\nroutes = ["/py"]\n'
        f'vars = {{ RECORD = "{tmp_path / "r.jsonl"}" }}\n'
        '[[workers]]\nname = "sink"\nmain = "consumer.js"\ncompatibility_date = "2026-11-01"\n'
        '[[workers.queues.consumers]]\nqueue = "q"\n',
    )
    assert run_ocd("check-config", "-c", str(cfg)).returncode == 0
    p = ocd_processes(cfg)
    port = p.wait_started(60)
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/some/where") as r:
        assert r.read() == b"js /some/where"
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/__ocd/healthz") as r:
        assert r.status == 200  # ocd's own paths stay ocd's
    assert p.stop() == 0


def test_check_config_names_each_worker_without_routes_when_several(tmp_path):
    cfg = _two_workers(
        tmp_path,
        "",
        '[[workers]]\nname = "other"\nmain = "w.js"\ncompatibility_date = "2026-11-01"\n',
    )
    out = run_ocd("check-config", "-c", str(cfg))
    assert out.returncode == 2
    assert f'{cfg}: workers[0]: worker "web" has a fetch handler and no routes' in out.stderr
    assert f'{cfg}: workers[1]: worker "other" has a fetch handler and no routes' in out.stderr
    assert 'add routes = ["/..."]' in out.stderr
    # routes on one of them settle it
    cfg.write_text(cfg.read_text().replace('name = "other"', 'name = "other"\nroutes = ["/o"]'))
    assert run_ocd("check-config", "-c", str(cfg)).returncode == 0


def test_a_date_newer_than_the_installed_workerd_says_what_to_install(tmp_path):
    """The issue's case: an older wrangler's workerd first in node_modules/.bin."""
    _need(OLDEST_WORKERD)
    date = '"compatibility_date": "2026-11-01",'
    project = _project(tmp_path, date=date, workerd=OLDEST_WORKERD)
    out = run_ocd("check-config", cwd=project, env=_env())
    assert out.returncode == 2
    assert "ocd-bridge" not in out.stderr
    line = next(x for x in out.stderr.splitlines() if "compatibility_date" in x)
    assert line.strip().startswith("wrangler.jsonc: compatibility_date:")
    assert 'worker "my-queues-app" requires compatibility date "2026-11-01"' in line
    assert "workerd 2026-04-26" in line  # what the binary says it is, not ocd's pin
    assert 'supports is "2026-05-03"' in line
    assert "npm install -D workerd@1.20261123.1" in line
