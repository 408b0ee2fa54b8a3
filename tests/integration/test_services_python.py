"""Service bindings between Python workers, with no JavaScript worker (and no workerd) in
the config: ``env.B.fetch`` reaches worker b's fetch through ocd's services socket, with the
method, headers and body the caller gave, and b's answer comes back as it gave it."""

from __future__ import annotations

import aiohttp

from ocd.config import load_config
from ocd.daemon import Daemon, load_workers

A = """
from workers import Response


async def fetch(request, env, ctx):
    if request.url.endswith("/a/pass"):
        r = await env.B.fetch(request)
    else:
        r = await env.B.fetch("http://b/inner?q=1", method="POST", body="from a",
                              headers={"X-Mine": "1"})
    return Response(f"{r.status} {r.headers.get('x-b')} {await r.text()}")
"""

B = """
from workers import Response


async def fetch(request, env, ctx):
    body = await request.text()
    mine = request.headers.get("x-mine")
    ours = sorted(k for k in request.headers.keys() if k.lower().startswith("x-ocd"))
    return Response(f"b {request.method} {request.url} {mine} {body} {ours}", status=201,
                    headers={"x-b": "yes"})
"""

CONFIG = """
[server]
listen = "127.0.0.1:0"
data_dir = "data"
shutdown_timeout = 5

[[workers]]
name = "a"
main = "a.py"
routes = ["/a"]
services = [{ binding = "B", service = "b" }]

[[workers]]
name = "b"
main = "b.py"
routes = ["/b"]
"""


async def test_python_worker_calls_another_python_workers_fetch(tmp_path):
    (tmp_path / "a.py").write_text(A)
    (tmp_path / "b.py").write_text(B)
    (tmp_path / "ocd.toml").write_text(CONFIG)
    config = load_config(tmp_path / "ocd.toml")
    daemon = Daemon(config, load_workers(config))
    await daemon.start()
    try:
        base = f"http://127.0.0.1:{daemon.port}"
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{base}/a/call") as r:
                assert await r.text() == "201 yes b POST http://b/inner?q=1 1 from a []"
            async with s.put(f"{base}/a/pass", data=b"passed", headers={"X-Mine": "2"}) as r:
                assert await r.text() == f"201 yes b PUT {base}/a/pass 2 passed []"
    finally:
        await daemon.shutdown(timeout_s=1)
