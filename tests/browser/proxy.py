"""A rewriting reverse proxy for the prefix-mount test: ``/ops/<path>`` -> ``<upstream>/<path>``,
streaming (Server-Sent Events pass through), run in a thread with its own event loop."""

from __future__ import annotations

import asyncio
import threading

import aiohttp
from aiohttp import web

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class Proxy:
    def __init__(self, upstream: str, prefix: str = "/ops") -> None:
        self.upstream = upstream
        self.prefix = prefix
        self.port = 0
        self.seen: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Proxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("proxy did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _run(self) -> None:
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        session = aiohttp.ClientSession(auto_decompress=False)
        app = web.Application()

        async def forward(request: web.Request) -> web.StreamResponse:
            return await self._forward(session, request)

        app.router.add_route("*", "/{tail:.*}", forward)
        runner = web.AppRunner(app, shutdown_timeout=1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()
        await session.close()

    async def _forward(
        self, session: aiohttp.ClientSession, request: web.Request
    ) -> web.StreamResponse:
        self.seen.append(request.path_qs)
        if not request.path.startswith(self.prefix + "/"):
            return web.Response(status=404, text="outside the proxied prefix")
        target = self.upstream + request.path_qs[len(self.prefix) :]
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        async with session.request(
            request.method, target, headers=headers, data=await request.read(),
            allow_redirects=False,
        ) as up:  # fmt: skip
            out = web.StreamResponse(status=up.status)
            for k, v in up.headers.items():
                if k.lower() not in HOP:
                    out.headers.add(k, v)
            await out.prepare(request)
            async for chunk in up.content.iter_any():
                await out.write(chunk)
            return out
