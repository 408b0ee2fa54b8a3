"""ocd's services socket, which carries JavaScript workers' service bindings to Python
workers: only a request with the start's secret reaches a worker, and the worker never sees
the headers that routed it."""

from __future__ import annotations

import aiohttp
from aiohttp import web

from ocd.services import SERVICE_SECRET, SERVICE_TARGET, ServicesEndpoint


async def test_services_socket_checks_the_secret_and_strips_its_headers(tmp_path):
    seen: list[tuple[str, dict[str, str], bytes]] = []

    async def fetch(worker: str, request: web.Request) -> web.StreamResponse:
        seen.append((worker, dict(request.headers), await request.read()))
        return web.Response(text="answered", headers={"X-From": worker})

    runner = web.AppRunner(ServicesEndpoint("s3cret", fetch).app())
    await runner.setup()
    sock = tmp_path / "services.sock"
    await web.UnixSite(runner, str(sock)).start()
    try:
        connector = aiohttp.UnixConnector(path=str(sock))
        async with aiohttp.ClientSession(connector=connector) as s:
            for secret in ("", "wrong"):
                headers = {SERVICE_TARGET: "py", SERVICE_SECRET: secret}
                async with s.post("http://py/x", data=b"body", headers=headers) as r:
                    assert r.status == 403
            assert seen == []
            headers = {SERVICE_TARGET: "py", SERVICE_SECRET: "s3cret", "Authorization": "mine"}
            async with s.post("http://py/x", data=b"body", headers=headers) as r:
                assert r.status == 200 and await r.text() == "answered"
                assert r.headers["X-From"] == "py"
        [(worker, got, body)] = seen
        assert worker == "py" and body == b"body" and got["Authorization"] == "mine"
        assert not {SERVICE_TARGET.lower(), SERVICE_SECRET.lower()} & {k.lower() for k in got}
    finally:
        await runner.cleanup()
