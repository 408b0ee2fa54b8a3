"""Worker routes: a request goes to the worker whose route prefix matches it best, and to
its static assets first when it has them (``ocd.http.assets``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

import runtime
from ocd.http.assets import Assets
from ocd.http.body import BodyError, ClientGone, read_body
from ocd.loader import Handler

log = logging.getLogger(__name__)

Proxy = Callable[[web.Request], Awaitable[web.StreamResponse]]


class WorkerRoute:
    def __init__(
        self,
        name: str,
        prefix: str,
        fetch: Handler | None,
        env: runtime.Env,
        assets: Assets | None = None,
        proxy: Proxy | None = None,
    ) -> None:
        self.name = name
        self.prefix = prefix.rstrip("/")
        self.fetch = fetch
        self.env = env
        self.assets = assets
        self.proxy = proxy  # a worker that runs elsewhere (workerd): the request goes there

    def matches(self, path: str) -> bool:
        return path == self.prefix or path.startswith(self.prefix + "/") or self.prefix == ""


class WorkerRouter:
    """Longest matching prefix wins; ``ctx.waitUntil`` tasks are kept until they finish."""

    def __init__(self, routes: list[WorkerRoute]) -> None:
        self.routes: list[WorkerRoute] = []
        self.set_routes(routes)
        self.background: set[asyncio.Future[Any]] = set()

    def set_routes(self, routes: list[WorkerRoute]) -> None:
        """Swap the routing table at once; requests already running finish on the old one."""
        self.routes = sorted(routes, key=lambda r: len(r.prefix), reverse=True)

    def find(self, path: str) -> WorkerRoute | None:
        for route in self.routes:
            if route.matches(path):
                return route
        return None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        route = self.find(request.path)
        if route is None:
            return web.Response(status=404, text="No worker route matches this path.\n")
        if route.assets is not None:
            served = route.assets.serve(request)
            if served is not None:
                return served
            if route.fetch is None:
                return route.assets.fallback(request)
        if route.proxy is not None:  # the body is streamed on as it arrives
            return await route.proxy(request)
        if route.fetch is None:  # no worker routes without fetch or assets
            return web.Response(status=404, text="No worker route matches this path.\n")
        return await self.serve(route, request)

    async def serve(self, route: WorkerRoute, request: web.Request) -> web.StreamResponse:
        """``request`` to the Python worker ``route`` names (its fetch), wherever it came
        from: one of its routes, or a JavaScript worker's service binding."""
        assert route.fetch is not None
        body = _Body(request)
        req = runtime.Request(request.method, str(request.url), request.headers, body.read)
        ctx = runtime.ExecutionContext()
        try:
            result = await route.fetch(req, route.env, ctx)
        except Exception:
            if body.error is not None:  # the body could not be read: the client's doing
                return body.answer(route.name)
            log.exception(
                "worker %s: fetch raised",
                route.name,
                extra={"event": "fetch_failed", "worker": route.name},
            )
            return web.Response(status=500, text="Worker threw exception\n")
        finally:
            for task in ctx.tasks:
                self.background.add(task)
                task.add_done_callback(self._background_done)
        return to_aiohttp(route.name, result)

    def _background_done(self, task: asyncio.Future[Any]) -> None:
        self.background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a waitUntil task failed", exc_info=task.exception())


class _Body:
    """A worker request's body, read (and inflated) on demand; remembers why it could not
    be, so that a fetch that raised on it is answered for what it was: the client's error."""

    def __init__(self, request: web.Request) -> None:
        self.request = request
        self.error: BodyError | ClientGone | None = None

    async def read(self) -> bytes:
        try:
            return await read_body(self.request)
        except (BodyError, ClientGone) as e:
            self.error = e
            raise

    def answer(self, worker: str) -> web.Response:
        if isinstance(self.error, BodyError):
            response = web.Response(status=self.error.status, text=self.error.message + "\n")
        else:
            log.info(
                "client went away mid-request: %s %s (worker %s)",
                self.request.method,
                self.request.path,
                worker,
                extra={"event": "client_gone", "worker": worker},
            )
            response = web.Response(status=400, text="request body incomplete\n")
        response.force_close()
        return response


def to_aiohttp(worker: str, result: Any) -> web.StreamResponse:
    if isinstance(result, web.StreamResponse):
        return result
    if isinstance(result, runtime.Response):
        return web.Response(
            body=result.body,
            status=result.status,
            reason=result.status_text,
            headers=_plain(result.headers),
        )
    if isinstance(result, str):
        return web.Response(text=result)
    log.error(
        "worker %s: fetch returned %s, not a Response",
        worker,
        type(result).__name__,
        extra={"event": "fetch_failed", "worker": worker},
    )
    return web.Response(status=500, text="Worker did not return a Response\n")


def _plain(headers: Mapping[str, str]) -> dict[str, str]:
    return {str(k): str(v) for k, v in headers.items()}
