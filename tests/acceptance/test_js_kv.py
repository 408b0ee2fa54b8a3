"""A JS Worker's ``env.KV`` through ``ocd serve`` and the real workerd: its ``queue()``
writes each message into KV, its ``fetch`` reads them back, across kill -9 of ocd; and
Cloudflare's limits with their texts as the Worker sees them."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from tests.helpers import eventually
from tests.js import js_section

pytestmark = [pytest.mark.timeout(150), pytest.mark.usefixtures("workerd_tools")]

WORKER = """
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = url.searchParams;
    if (url.pathname === "/kv/send") {
      await env.QUEUE.sendBatch(JSON.parse(await request.text()).map((body) => ({ body })));
      return new Response("sent");
    }
    if (url.pathname === "/kv/get") {
      const got = await env.KV.getWithMetadata(q.get("key"), { type: "json", cacheTtl: 60 });
      return Response.json(got);
    }
    if (url.pathname === "/kv/list") {
      const opts = { prefix: q.get("prefix") ?? undefined, cursor: q.get("cursor") ?? undefined };
      if (q.get("limit")) opts.limit = Number(q.get("limit"));
      return Response.json(await env.KV.list(opts));
    }
    if (url.pathname === "/kv/roundtrip") {
      const bytes = new Uint8Array([0, 1, 2, 255]);
      await env.KV.put("bin", bytes.buffer, { expirationTtl: 3600 });
      const back = new Uint8Array(await env.KV.get("bin", "arrayBuffer"));
      const stream = new Blob(["streamed"]).stream();
      await env.KV.put("st", stream);
      const text = await new Response(await env.KV.get("st", { type: "stream" })).text();
      await env.KV.put("gone", "x");
      await env.KV.delete("gone");
      return Response.json({ back: [...back], text, gone: await env.KV.get("gone") });
    }
    if (url.pathname === "/kv/limits") {
      const out = {};
      const tries = {
        ttl: () => env.KV.put("k", "v", { expirationTtl: 30 }),
        past: () => env.KV.put("k", "v", { expiration: 1000 }),
        meta: () => env.KV.put("k", "v", { metadata: { pad: "x".repeat(1100) } }),
        value: () => env.KV.put("k", "x".repeat(25 * 1024 * 1024 + 1)),
        key: () => env.KV.get("k".repeat(513)),
        limit: () => env.KV.list({ limit: 1001 }),
      };
      for (const [name, attempt] of Object.entries(tries)) {
        try { await attempt(); out[name] = "ok"; } catch (e) { out[name] = String(e.message); }
      }
      return Response.json(out);
    }
    return new Response("not found", { status: 404 });
  },
  async queue(batch, env) {
    for (const m of batch.messages) {
      await env.KV.put("msg:" + m.body.n, JSON.stringify(m.body), { metadata: { id: m.id } });
      m.ack();
    }
  },
};
"""

CONFIG = """
[server]
listen = "127.0.0.1:{port}"
data_dir = "data"
shutdown_timeout = 5

{store}
{js}

[[workers]]
name = "kvapp"
main = "{main}"
compatibility_date = "2026-11-01"
routes = ["/kv"]
kv_namespaces = [{{ binding = "KV", id = "ns-kv" }}]

[[workers.queues.producers]]
binding = "QUEUE"
queue = "to-kv"

[[workers.queues.consumers]]
queue = "to-kv"
max_batch_size = 10
max_batch_timeout = 0
"""


def _config(tmp: Path, port: int = 0) -> Path:
    import os

    main = tmp / "worker.js"
    main.write_text(WORKER)
    cfg = tmp / "ocd.toml"
    store = os.environ.get("OCD_TEST_STORE_SECTION", "")
    cfg.write_text(CONFIG.format(port=port, store=store, js=js_section(), main=main))
    return cfg


async def _json(s: aiohttp.ClientSession, url: str) -> object:
    async with s.get(url) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def _listed(s: aiohttp.ClientSession, base: str) -> list[str]:
    names: list[str] = []
    cursor = ""
    while True:
        page = await _json(s, f"{base}/kv/list?prefix=msg:&limit=7" + cursor)
        assert isinstance(page, dict)
        names += [k["name"] for k in page["keys"]]
        if page["list_complete"]:
            return names
        cursor = f"&cursor={page['cursor']}"


async def test_queue_writes_into_kv_and_fetch_reads_back_across_kill_9(tmp_path, ocd_processes):
    first = ocd_processes(_config(tmp_path))
    port = first.wait_started()
    base = f"http://127.0.0.1:{port}"
    want = sorted(f"msg:{n}" for n in range(20))
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{base}/kv/send", json=[{"n": n} for n in range(20)]) as r:
            assert r.status == 200
        assert await eventually(lambda: _listed_now(s, base, want), 60)
        got = await _json(s, f"{base}/kv/get?key=msg:7")
        assert isinstance(got, dict) and got["value"] == {"n": 7}
        assert isinstance(got["metadata"]["id"], str)
        missing = await _json(s, f"{base}/kv/get?key=nothing")
        assert missing == {"value": None, "metadata": None, "cacheStatus": None}
        rt = await _json(s, f"{base}/kv/roundtrip")
        assert rt == {"back": [0, 1, 2, 255], "text": "streamed", "gone": None}
    first.kill9()

    second = ocd_processes(_config(tmp_path, port))
    second.wait_started()
    async with aiohttp.ClientSession() as s:
        assert sorted(await _listed(s, base)) == want
        got = await _json(s, f"{base}/kv/get?key=msg:19")
        assert isinstance(got, dict) and got["value"] == {"n": 19}
    assert second.stop() == 0


async def _listed_now(s: aiohttp.ClientSession, base: str, want: list[str]) -> bool:
    return sorted(await _listed(s, base)) == want


async def test_kv_limits_reject_with_cloudflares_texts(tmp_path, ocd_processes):
    p = ocd_processes(_config(tmp_path))
    port = p.wait_started()
    async with aiohttp.ClientSession() as s:
        out = await _json(s, f"http://127.0.0.1:{port}/kv/limits")
    assert out == {
        "ttl": "KV PUT failed: 400 Invalid expiration_ttl of 30. "
        "Expiration TTL must be at least 60.",
        "past": "KV PUT failed: 400 Invalid expiration of 1000. Please specify integer greater "
        "than the current number of seconds since the UNIX epoch.",
        "meta": "KV PUT failed: 413 Metadata length of 1110 exceeds limit of 1024.",
        "value": "KV PUT failed: 413 Value length of 26214401 exceeds limit of 26214400.",
        "key": "KV GET failed: 414 UTF-8 encoded length of 513 exceeds key length limit of 512.",
        "limit": "KV GET failed: 400 Invalid key_count_limit of 1001. "
        "Please specify an integer less than 1000.",
    }
    assert p.stop() == 0
