"""A JS Worker's ``env.BUCKET`` through ``ocd serve`` and the real workerd: its ``queue()``
puts each message as an object, its ``fetch`` gets, lists and deletes them (ranges,
conditional gets, custom and HTTP metadata, a multipart upload), across kill -9 of ocd."""

from __future__ import annotations

import os
from pathlib import Path

import aiohttp
import pytest

from tests.helpers import eventually
from tests.js import js_section

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("workerd_tools")]

WORKER = """
const MiB = 1024 * 1024;
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = url.searchParams;
    const B = env.BUCKET;
    if (url.pathname === "/r2/send") {
      await env.QUEUE.sendBatch(JSON.parse(await request.text()).map((body) => ({ body })));
      return new Response("sent");
    }
    if (url.pathname === "/r2/list") {
      const opts = { prefix: q.get("prefix") ?? undefined, cursor: q.get("cursor") ?? undefined,
                     delimiter: q.get("delimiter") ?? undefined,
                     include: ["customMetadata", "httpMetadata"] };
      if (q.get("limit")) opts.limit = Number(q.get("limit"));
      const got = await B.list(opts);
      return Response.json({
        keys: got.objects.map((o) => o.key), truncated: got.truncated, cursor: got.cursor,
        prefixes: got.delimitedPrefixes,
        custom: got.objects.map((o) => o.customMetadata),
        types: got.objects.map((o) => o.httpMetadata.contentType ?? null),
      });
    }
    if (url.pathname === "/r2/get") {
      const o = await B.get(q.get("key"));
      if (o === null) return Response.json(null);
      return Response.json({ text: await o.text(), custom: o.customMetadata, size: o.size,
                             etag: o.etag, type: o.httpMetadata.contentType });
    }
    if (url.pathname === "/r2/features") {
      const out = {};
      const put = await B.put("f/abc", "0123456789", {
        httpMetadata: { contentType: "text/plain" }, customMetadata: { who: "me" },
        sha256: await crypto.subtle.digest("SHA-256", new TextEncoder().encode("0123456789")),
      });
      out.etag = put.etag;
      out.sha256 = put.checksums.sha256 ? [...new Uint8Array(put.checksums.sha256)].length : 0;
      out.range = await (await B.get("f/abc", { range: { offset: 2, length: 3 } })).text();
      out.suffix = await (await B.get("f/abc", { range: { suffix: 4 } })).text();
      const head = await B.head("f/abc");
      out.head = [head.size, head.httpMetadata.contentType, head.customMetadata.who];
      const miss = await B.get("f/abc", { onlyIf: { etagDoesNotMatch: put.etag } });
      out.conditional = [miss !== null, "body" in miss];
      const hit = await B.get("f/abc", { onlyIf: { etagMatches: put.etag } });
      out.conditionalHit = await hit.text();
      out.putIfAbsent = await B.put("f/abc", "x", { onlyIf: { etagDoesNotMatch: "*" } });
      try { await B.put("f/bad", "abc", { md5: "00000000000000000000000000000000" });
            out.badDigest = "ok"; } catch (e) { out.badDigest = e.message.split("\\n")[0]; }
      const mp = await B.createMultipartUpload("f/big", { customMetadata: { parts: "2" } });
      const p1 = await mp.uploadPart(1, new Uint8Array(5 * MiB).fill(97));
      const p2 = await mp.uploadPart(2, "tail");
      const done = await mp.complete([p1, p2]);
      out.multipart = [done.size, done.etag.endsWith("-2")];
      const big = await B.get("f/big", { range: { offset: 5 * MiB - 2, length: 6 } });
      out.bigRange = await big.text();
      const gone = await B.createMultipartUpload("f/never");
      await gone.uploadPart(1, "x");
      await gone.abort();
      try { await gone.uploadPart(2, "y"); out.aborted = "ok"; }
      catch (e) { out.aborted = e.message; }
      await B.put("f/del1", "1"); await B.put("f/del2", "2");
      await B.delete(["f/del1", "f/del2"]);
      out.deleted = [await B.head("f/del1"), await B.get("f/del2")];
      return Response.json(out);
    }
    return new Response("not found", { status: 404 });
  },
  async queue(batch, env) {
    for (const m of batch.messages) {
      await env.BUCKET.put(`msg/${m.body.group}/${m.body.n}`, JSON.stringify(m.body), {
        customMetadata: { id: m.id }, httpMetadata: { contentType: "application/json" },
      });
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

{js}

[[workers]]
name = "r2app"
main = "{main}"
compatibility_date = "2026-11-01"
routes = ["/r2"]
r2_buckets = [{{ binding = "BUCKET", bucket_name = "uploads" }}]

[[workers.queues.producers]]
binding = "QUEUE"
queue = "to-r2"

[[workers.queues.consumers]]
queue = "to-r2"
max_batch_size = 10
max_batch_timeout = 0
"""


def _config(tmp: Path, port: int = 0) -> Path:
    main = tmp / "worker.js"
    main.write_text(WORKER)
    cfg = tmp / "ocd.toml"
    cfg.write_text(CONFIG.format(port=port, js=js_section(), main=main))
    return cfg


async def _json(s: aiohttp.ClientSession, url: str) -> object:
    async with s.get(url) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def _listed(s: aiohttp.ClientSession, base: str, extra: str = "") -> list[str]:
    names: list[str] = []
    cursor = ""
    while True:
        page = await _json(s, f"{base}/r2/list?prefix=msg/&limit=7{extra}{cursor}")
        assert isinstance(page, dict)
        names += page["keys"] + page["prefixes"]
        if not page["truncated"]:
            return names
        cursor = f"&cursor={page['cursor']}"


async def test_queue_puts_objects_and_fetch_reads_them_across_kill_9(tmp_path, ocd_processes):
    first = ocd_processes(_config(tmp_path))
    port = first.wait_started()
    base = f"http://127.0.0.1:{port}"
    sent = [{"group": g, "n": n} for g in ("a", "b", "c") for n in range(6)]
    want = sorted(f"msg/{m['group']}/{m['n']}" for m in sent)
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{base}/r2/send", json=sent) as r:
            assert r.status == 200

        async def all_there() -> bool:
            return sorted(await _listed(s, base)) == want

        assert await eventually(all_there, 60)
        assert await _listed(s, base, "&delimiter=/") == ["msg/a/", "msg/b/", "msg/c/"]
        page = await _json(s, f"{base}/r2/list?prefix=msg/b/&limit=2")
        assert isinstance(page, dict)
        assert page["keys"] == ["msg/b/0", "msg/b/1"] and page["truncated"]
        assert isinstance(page["custom"][0]["id"], str)
        assert page["types"] == ["application/json"] * 2
        got = await _json(s, f"{base}/r2/get?key=msg/c/5")
        assert isinstance(got, dict) and got["type"] == "application/json"
        assert got["text"] == '{"group":"c","n":5}'
        assert await _json(s, f"{base}/r2/get?key=nothing") is None
        features = await _json(s, f"{base}/r2/features")
    assert features == {
        "etag": "781e5e245d69b566979b86e28d23f2c7",  # md5 of "0123456789"
        "sha256": 32,
        "range": "234",
        "suffix": "6789",
        "head": [10, "text/plain", "me"],
        "conditional": [True, False],
        "conditionalHit": "0123456789",
        "putIfAbsent": None,
        "badDigest": "put: The MD5 checksum you specified did not match what we received.",
        "multipart": [5 * 1024 * 1024 + 4, True],
        "bigRange": "aatail",
        "aborted": "uploadPart: The specified multipart upload does not exist. (10024)",
        "deleted": [None, None],
    }
    first.kill9()

    second = ocd_processes(_config(tmp_path, port))
    second.wait_started()
    async with aiohttp.ClientSession() as s:
        assert sorted(await _listed(s, base)) == want
        got = await _json(s, f"{base}/r2/get?key=msg/a/3")
        assert isinstance(got, dict) and got["text"] == '{"group":"a","n":3}'
        big = await _json(s, f"{base}/r2/get?key=f/big")
        assert isinstance(big, dict) and big["size"] == 5 * 1024 * 1024 + 4
    assert second.stop() == 0
    bucket = tmp_path / "data" / "r2" / "uploads"
    assert (bucket / "meta.sqlite").is_file()
    assert os.stat(bucket).st_mode & 0o077 == 0
    # every blob file is named by a row: the aborted upload's and the deleted objects' are gone
    assert len(os.listdir(bucket / "blobs")) == len(want) + 1 + 2
