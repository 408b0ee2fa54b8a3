"""Service bindings between the workers of one ocd, through ``ocd serve`` and the real
workerd: a JS worker calls another JS worker's fetch, an RPC method of its named
``WorkerEntrypoint``, and a Python worker's fetch (through ocd's services socket); a Python
worker calls a JS worker's fetch and a Python one's, passing its own request on too; the
answers as the called worker gave them."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from tests.acceptance.conftest import run_ocd
from tests.js import js_section

pytestmark = [pytest.mark.timeout(150), pytest.mark.usefixtures("workerd_tools")]

FRONT = """
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/front/js") {
      const r = await env.API.fetch("http://api/echo?x=1", {
        method: "POST", body: "hello", headers: { Authorization: "Bearer mine" },
      });
      return new Response(`${r.status} ${await r.text()}`);
    }
    if (url.pathname === "/front/rpc") {
      return Response.json({ sum: await env.ADMIN.add(2, 3) });
    }
    if (url.pathname === "/front/py") {
      const r = await env.PY.fetch("http://py/hello", {
        method: "PUT", body: "from js", headers: { Authorization: "Bearer mine" },
      });
      return new Response(`${r.status} ${r.headers.get("x-py")} ${await r.text()}`);
    }
    return new Response("not found", { status: 404 });
  },
};
"""

API = """
import { WorkerEntrypoint } from "cloudflare:workers";
export class Admin extends WorkerEntrypoint {
  async add(a, b) { return a + b + Number(this.env.OFFSET); }
}
export default {
  async fetch(request) {
    const url = new URL(request.url);
    const auth = request.headers.get("authorization");
    return new Response(`api ${request.method} ${url.pathname}${url.search} ${auth} `
      + await request.text());
  },
};
"""

PY = """
from workers import Response


async def fetch(request, env, ctx):
    path = request.url.split("/", 3)[3].split("?")[0]
    if path == "py/call-js":
        r = await env.API.fetch("http://api/from-py", method="POST", body="hi",
                                headers={"Authorization": "p"})
        return Response(f"{r.status} {await r.text()}")
    if path == "py/call-py":
        r = await env.SELF.fetch("http://py/hello", {"method": "PUT", "body": "inner"})
        return Response(f"{r.status} {r.headers.get('x-py')} {await r.text()}")
    if path == "py/pass":
        r = await env.API.fetch(request)
        return Response(f"{r.status} {await r.text()}")
    body = await request.text()
    seen = sorted(k.lower() for k in request.headers.keys() if k.lower().startswith("x-ocd"))
    auth = request.headers.get("authorization")
    return Response(
        f"py {request.method} {request.url} {auth} {body} {seen}", headers={"x-py": "yes"}
    )
"""

CONFIG = """
[server]
listen = "127.0.0.1:0"
data_dir = "data"
shutdown_timeout = 5

{js}

[[workers]]
name = "front"
main = "front.js"
compatibility_date = "2026-11-01"
routes = ["/front"]
services = [
  {{ binding = "API", service = "api" }},
  {{ binding = "ADMIN", service = "api", entrypoint = "Admin" }},
  {{ binding = "PY", service = "py" }},
]

[[workers]]
name = "api"
main = "api.js"
compatibility_date = "2026-11-01"
routes = ["/api"]
vars = {{ OFFSET = "10" }}

[[workers]]
name = "py"
main = "py.py"
routes = ["/py"]
services = [
  {{ binding = "API", service = "api" }},
  {{ binding = "SELF", service = "py" }},
]
"""


def _config(tmp: Path) -> Path:
    (tmp / "front.js").write_text(FRONT)
    (tmp / "api.js").write_text(API)
    (tmp / "py.py").write_text(PY)
    cfg = tmp / "ocd.toml"
    cfg.write_text(CONFIG.format(js=js_section()))
    return cfg


async def _text(s: aiohttp.ClientSession, url: str) -> str:
    async with s.get(url) as r:
        assert r.status == 200, await r.text()
        return await r.text()


async def test_js_worker_calls_js_fetch_rpc_entrypoint_and_python_fetch(tmp_path, ocd_processes):
    p = ocd_processes(_config(tmp_path))
    port = p.wait_started()
    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as s:
        assert await _text(s, f"{base}/front/js") == "200 api POST /echo?x=1 Bearer mine hello"
        assert await _text(s, f"{base}/front/rpc") == '{"sum":15}'
        got = await _text(s, f"{base}/front/py")
        assert got == "200 yes py PUT http://py/hello Bearer mine from js []"
        assert await _text(s, f"{base}/py/call-js") == "200 api POST /from-py p hi"
        assert await _text(s, f"{base}/py/call-py") == (
            "200 yes py PUT http://py/hello None inner []"
        )
        async with s.post(f"{base}/py/pass?x=2", data=b"passed") as r:
            assert await r.text() == "200 api POST /py/pass?x=2 null passed"
        page = await _text(s, f"{base}/__ocd/ui/workers")
    for name, target in (("API", "api"), ("ADMIN", "api#Admin"), ("PY", "py")):
        assert (
            f'<span class="binding" data-kind="service">service <span class="mono">{name}'
            f'</span> → <span class="mono">{target}</span></span>'
        ) in page
    r = run_ocd("status", "--url", base)
    assert r.returncode == 0, r.stderr
    lines = [line.split() for line in r.stdout.splitlines()]
    assert ["WORKER", "BINDING", "KIND", "TARGET"] in lines
    assert ["front", "ADMIN", "service", "api#Admin"] in lines
    assert p.stop() == 0
