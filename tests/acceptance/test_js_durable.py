"""Durable Objects of a JS Worker through ``ocd serve`` and the real workerd, configured in
its wrangler file: ``queue()`` routes each message to a counter object by name, which
counts with ``ctx.storage`` (KV API) and SQL; ``fetch`` reads the counts over RPC (and another
worker too, by ``script_name``); an alarm fires; the counts survive kill -9 of workerd (ocd
starts it again) and of ocd."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.helpers import eventually
from tests.js import js_section, workerd_pid

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("workerd_tools")]

WORKER = """
import { DurableObject } from "cloudflare:workers";

export class Counter extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    ctx.blockConcurrencyWhile(async () => {
      ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS seen (id TEXT PRIMARY KEY, n INTEGER)");
    });
  }
  async add(id, n) {
    const count = ((await this.ctx.storage.get("count")) ?? 0) + 1;
    await this.ctx.storage.put("count", count);
    this.ctx.storage.sql.exec("INSERT OR REPLACE INTO seen VALUES (?, ?)", id, n);
    return count;
  }
  async counts() {
    const seen = this.ctx.storage.sql.exec("SELECT count(*) AS c, sum(n) AS s FROM seen").one();
    return {
      kv: (await this.ctx.storage.get("count")) ?? 0,
      sql: seen.c,
      sum: seen.s ?? 0,
      alarms: (await this.ctx.storage.get("alarms")) ?? 0,
    };
  }
  async arm(ms) {
    await this.ctx.storage.setAlarm(Date.now() + ms);
  }
  async alarm() {
    await this.ctx.storage.put("alarms", ((await this.ctx.storage.get("alarms")) ?? 0) + 1);
  }
  async fetch(request) {
    return new Response("object " + this.ctx.id.toString());
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const name = url.searchParams.get("name") ?? "a";
    const stub = env.COUNTER.get(env.COUNTER.idFromName(name));
    if (url.pathname === "/do/send") {
      await env.QUEUE.sendBatch((await request.json()).map((body) => ({ body })));
      return new Response("sent");
    }
    if (url.pathname === "/do/counts") return Response.json(await stub.counts());
    if (url.pathname === "/do/alarm") {
      await stub.arm(Number(url.searchParams.get("ms")));
      return new Response("armed");
    }
    if (url.pathname === "/do/ids") {
      const id = env.COUNTER.idFromName(name);
      const again = env.COUNTER.idFromString(id.toString());
      const text = await (await env.COUNTER.get(again).fetch("http://do/")).text();
      const unique = env.COUNTER.newUniqueId().toString();
      return Response.json({ same: again.equals(id), id: id.toString(), text, unique });
    }
    return new Response("not found", { status: 404 });
  },
  async queue(batch, env) {
    for (const m of batch.messages) {
      const stub = env.COUNTER.get(env.COUNTER.idFromName(m.body.counter));
      await stub.add(m.id, m.body.n);
      m.ack();
    }
  },
};
"""

WRANGLER = """
name = "doapp"
main = "worker.js"
compatibility_date = "2026-11-01"

[[queues.producers]]
binding = "QUEUE"
queue = "to-do"

[[queues.consumers]]
queue = "to-do"
max_batch_size = 10
max_batch_timeout = 0

[[durable_objects.bindings]]
name = "COUNTER"
class_name = "Counter"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["Counter"]
"""

CONFIG = """
[server]
listen = "127.0.0.1:{port}"
data_dir = "data"
shutdown_timeout = 5

{js}

[[workers]]
wrangler = "wrangler.toml"
routes = ["/do"]
"""


# another worker of the config, reaching doapp's class by script_name
READER = """
export default {
  async fetch(request, env) {
    const stub = env.C.get(env.C.idFromName(new URL(request.url).searchParams.get("name")));
    return Response.json(await stub.counts());
  },
};
"""
READER_ENTRY = """
[[workers]]
name = "reader"
main = "reader.js"
compatibility_date = "2026-11-01"
routes = ["/reader"]
durable_objects = { bindings = [{ name = "C", class_name = "Counter", script_name = "doapp" }] }
"""


def _config(tmp: Path, port: int = 0, extra: str = "") -> Path:
    (tmp / "worker.js").write_text(WORKER)
    (tmp / "reader.js").write_text(READER)
    (tmp / "wrangler.toml").write_text(WRANGLER)
    cfg = tmp / "ocd.toml"
    cfg.write_text(CONFIG.format(port=port, js=js_section()) + extra)
    return cfg


async def _json(s: aiohttp.ClientSession, url: str) -> Any:
    async with s.get(url) as r:
        assert r.status == 200, await r.text()
        return await r.json()


WANT = {
    "a": {"kv": 12, "sql": 12, "sum": sum(n for n in range(30) if n % 5 < 2), "alarms": 0},
    "b": {"kv": 18, "sql": 18, "sum": sum(n for n in range(30) if n % 5 >= 2), "alarms": 0},
}


async def _counts(s: aiohttp.ClientSession, base: str) -> dict[str, Any]:
    return {name: await _json(s, f"{base}/do/counts?name={name}") for name in WANT}


async def test_queue_counts_in_a_durable_object_across_kill_9_of_workerd_and_ocd(
    tmp_path, ocd_processes
):
    first = ocd_processes(_config(tmp_path))
    port = first.wait_started(60)
    base = f"http://127.0.0.1:{port}"
    body = [{"counter": "a" if n % 5 < 2 else "b", "n": n} for n in range(30)]
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{base}/do/send", json=body) as r:
            assert r.status == 200, await r.text()

        async def counted() -> bool:
            return await _counts(s, base) == WANT

        await eventually(counted, 60, interval=0.2)
        ids = await _json(s, f"{base}/do/ids?name=a")
        assert ids["same"] is True and ids["text"] == f"object {ids['id']}"
        assert len(ids["unique"]) == 64 and ids["unique"] != ids["id"]

        old = workerd_pid(first.proc.pid)
        os.kill(old, signal.SIGKILL)
        await eventually(lambda: first.event("workerd_exited"), 10)

        async def back() -> dict[str, Any] | None:
            try:
                return await _counts(s, base)
            except AssertionError:  # 503 while workerd restarts
                return None

        assert await eventually(back, 60, interval=0.2) == WANT
        assert workerd_pid(first.proc.pid) != old
        # the same name is the same object, with the same id, after the restart
        assert (await _json(s, f"{base}/do/ids?name=a"))["id"] == ids["id"]
    first.kill9()

    second = ocd_processes(_config(tmp_path, port))
    second.wait_started(60)
    async with aiohttp.ClientSession() as s:
        assert await _counts(s, base) == WANT
    assert second.stop() == 0
    # one SQLite file per object (beside workerd's metadata.sqlite, its alarms), in the
    # class's directory under the worker's, all owner-only
    where = tmp_path / "data" / "do" / "doapp"
    objects = [f for f in (where / "doapp-Counter").glob("*.sqlite") if f.stem != "metadata"]
    assert len(objects) == 2
    assert all(p.stat().st_mode & 0o077 == 0 for p in [where, *where.rglob("*")])


async def test_an_alarm_fires_and_another_worker_reads_its_effect(tmp_path, ocd_processes):
    p = ocd_processes(_config(tmp_path, extra=READER_ENTRY))
    port = p.wait_started(60)
    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{base}/do/alarm?name=z&ms=200") as r:
            assert r.status == 200, await r.text()

        async def fired() -> bool:
            return (await _json(s, f"{base}/do/counts?name=z"))["alarms"] == 1

        await eventually(fired, 30, interval=0.1)
        seen = await _json(s, f"{base}/reader?name=z")
        assert seen == {"kv": 0, "sql": 0, "sum": 0, "alarms": 1}
    assert p.stop() == 0
