"""A JS Worker (in the real workerd) and a Python worker bound to the same KV namespace id
see the same keys: what one's queue consumer writes, the other's fetch reads back, values,
metadata, bytes and expirations alike. With ``OCD_TEST_STORE=postgres`` the namespace lives
in PostgreSQL."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.acceptance.conftest import STORE_SECTION_ENV
from tests.helpers import eventually
from tests.js import js_section

pytestmark = [pytest.mark.timeout(150), pytest.mark.usefixtures("workerd_tools")]

JS_WORKER = """
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const key = url.searchParams.get("key");
    switch (url.pathname) {
      case "/js/send":
        await env.QUEUE.sendBatch((await request.json()).map((n) => ({ body: { n } })));
        return new Response("sent");
      case "/js/get":
        return Response.json(await env.SHARED.getWithMetadata(key, "json"));
      case "/js/bytes":
        return Response.json([...new Uint8Array(await env.SHARED.get(key, "arrayBuffer"))]);
      case "/js/list":
        return Response.json(await env.SHARED.list({ prefix: url.searchParams.get("prefix") }));
    }
    return new Response("not found", { status: 404 });
  },
  async queue(batch, env) {
    for (const m of batch.messages) {
      const n = m.body.n;
      await env.SHARED.put(`from-js:${n}`, JSON.stringify({ n, by: "js" }), {
        metadata: { writer: "js", n },
      });
      await env.SHARED.put(`bin-js:${n}`, new Uint8Array([n, 0, 255]));
      m.ack();
    }
  },
};
"""

PY_WORKER = """
import json
from urllib.parse import parse_qs, urlparse

from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        url = urlparse(request.url)
        key = parse_qs(url.query).get("key", [None])[0]
        kv = self.env.KV
        if url.path == "/py/send":
            ns = json.loads(await request.text())
            await self.env.PYQ.sendBatch([{"body": {"n": n}} for n in ns])
            return Response("sent")
        if url.path == "/py/get":
            return Response.json(await kv.getWithMetadata(key, type="json"))
        if url.path == "/py/bytes":
            return Response.json(list(await kv.get(key, type="arrayBuffer")))
        if url.path == "/py/list":
            prefix = parse_qs(url.query)["prefix"][0]
            page = await kv.list(prefix=prefix)
            return Response.json({"keys": page.keys, "list_complete": page.list_complete})
        return Response("not found", status=404)

    async def queue(self, batch, env, ctx):
        for m in batch.messages:
            n = m.body["n"]
            await env.KV.put(
                f"from-py:{n}", json.dumps({"n": n, "by": "py"}),
                metadata={"writer": "py", "n": n}, expirationTtl=3600,
            )
            await env.KV.put(f"bin-py:{n}", bytes([n, 0, 255]))
            m.ack()
"""

CONFIG = """
[server]
listen = "127.0.0.1:0"
data_dir = "data"
shutdown_timeout = 5

{store}
{js}

[[workers]]
name = "jsw"
main = "{js_main}"
compatibility_date = "2026-11-01"
routes = ["/js"]
kv_namespaces = [{{ binding = "SHARED", id = "shared-ns" }}]

[[workers.queues.producers]]
binding = "QUEUE"
queue = "js-jobs"

[[workers.queues.consumers]]
queue = "js-jobs"
max_batch_timeout = 0

[[workers]]
name = "pyw"
main = "{py_main}"
routes = ["/py"]
kv_namespaces = [{{ binding = "KV", id = "shared-ns" }}]

[[workers.queues.producers]]
binding = "PYQ"
queue = "py-jobs"

[[workers.queues.consumers]]
queue = "py-jobs"
max_batch_timeout = 0
"""


def _config(tmp: Path) -> Path:
    (tmp / "worker.js").write_text(JS_WORKER)
    (tmp / "entry.py").write_text(PY_WORKER)
    cfg = tmp / "ocd.toml"
    cfg.write_text(
        CONFIG.format(
            store=os.environ.get(STORE_SECTION_ENV, ""),
            js=js_section(),
            js_main=tmp / "worker.js",
            py_main=tmp / "entry.py",
        )
    )
    return cfg


async def _get(s: aiohttp.ClientSession, url: str) -> Any:
    async with s.get(url) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def _written(s: aiohttp.ClientSession, url: str, count: int) -> bool:
    page = await _get(s, url)
    return len(page["keys"]) == count


async def test_js_and_python_workers_share_one_kv_namespace(tmp_path, ocd_processes, store_backend):
    p = ocd_processes(_config(tmp_path))
    base = f"http://127.0.0.1:{p.wait_started(60)}"
    started = p.event("started")
    assert started is not None
    # The namespace is in the store this run is about, not a SQLite file beside it.
    assert ("database: postgresql://" in started["msg"]) == (store_backend == "postgres")
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{base}/js/send", json=[1, 2, 3]) as r:
            assert r.status == 200, await r.text()
        async with s.post(f"{base}/py/send", json=[4, 5]) as r:
            assert r.status == 200, await r.text()

        # The JS consumer's writes, read by the Python worker.
        await eventually(lambda: _written(s, f"{base}/py/list?prefix=from-js:", 3), 60, 0.1)
        got = await _get(s, f"{base}/py/get?key=from-js:2")
        assert got == {
            "value": {"n": 2, "by": "js"},
            "metadata": {"writer": "js", "n": 2},
            "cacheStatus": None,
        }
        assert await _get(s, f"{base}/py/bytes?key=bin-js:3") == [3, 0, 255]
        listed = await _get(s, f"{base}/py/list?prefix=from-js:")
        assert [k["name"] for k in listed["keys"]] == ["from-js:1", "from-js:2", "from-js:3"]
        assert listed["keys"][0]["metadata"] == {"writer": "js", "n": 1}

        # The Python consumer's writes, read by the JS Worker.
        await eventually(lambda: _written(s, f"{base}/js/list?prefix=from-py:", 2), 60, 0.1)
        got = await _get(s, f"{base}/js/get?key=from-py:5")
        assert got == {
            "value": {"n": 5, "by": "py"},
            "metadata": {"writer": "py", "n": 5},
            "cacheStatus": None,
        }
        assert await _get(s, f"{base}/js/bytes?key=bin-py:4") == [4, 0, 255]
        listed = await _get(s, f"{base}/js/list?prefix=from-py:")
        assert [k["name"] for k in listed["keys"]] == ["from-py:4", "from-py:5"]
        assert listed["list_complete"] is True
        assert all(k["expiration"] > 0 for k in listed["keys"])  # the Python side's TTL
        assert listed["keys"][1]["metadata"] == {"writer": "py", "n": 5}

        # A key neither wrote reads as missing on both sides.
        assert (await _get(s, f"{base}/js/get?key=nobody"))["value"] is None
        assert (await _get(s, f"{base}/py/get?key=nobody"))["value"] is None
    assert p.stop() == 0
