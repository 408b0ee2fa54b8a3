"""Service bindings that pass through ocd: a JavaScript worker's binding to a Python worker,
and a Python worker's binding to any worker. (Between two JavaScript workers workerd calls
the other worker itself and nothing comes here.)

One private unix socket per daemon run, in a 0700 directory of its own, with a secret made
at start: a request on it names its target worker (``SERVICE_TARGET``) and carries the
secret (``SERVICE_SECRET``); ocd takes both headers off and hands the request to the
target's fetch as if it had come in on one of its routes (the daemon's ``ServiceFetch``:
a Python worker's handler, or workerd's socket for a JavaScript one)."""

from __future__ import annotations

import hmac
import secrets
import shutil
from collections.abc import Awaitable, Callable

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

import runtime
from ocd.files import socket_dir
from runtime.fetch import FetchResponse, Outgoing, send

# Named so as not to take the place of a header the calling Worker sets itself
# (Authorization), and taken off before the called worker sees the request.
SERVICE_TARGET = "X-Ocd-Service-Worker"
SERVICE_SECRET = "X-Ocd-Service-Secret"

# (worker, request) -> its answer; the daemon's, which knows the running workers
ServiceFetch = Callable[[str, web.Request], Awaitable[web.StreamResponse]]


class ServicesEndpoint:
    def __init__(self, secret: str, fetch: ServiceFetch) -> None:
        self.secret = secret.encode()
        self.fetch = fetch

    def app(self) -> web.Application:
        app = web.Application(client_max_size=0)  # the body is the called worker's to read
        app.router.add_route("*", r"/{tail:[\s\S]*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        given = request.headers.get(SERVICE_SECRET, "").encode()
        if not hmac.compare_digest(given, self.secret):
            return web.Response(status=403, text="not allowed\n")
        worker = request.headers.get(SERVICE_TARGET, "")
        headers = CIMultiDict(request.headers)
        for name in (SERVICE_SECRET, SERVICE_TARGET):
            headers.popall(name, None)
        return await self.fetch(worker, request.clone(headers=headers))


class ServiceSocket:
    """The socket, while the daemon runs."""

    def __init__(self, fetch: ServiceFetch) -> None:
        self.secret = secrets.token_urlsafe(32)
        self.dir = socket_dir("ocd-services-", len("services.sock"))  # 0700: private
        self.path = self.dir / "services.sock"
        self._endpoint = ServicesEndpoint(self.secret, fetch)
        self._runner: web.AppRunner | None = None

    @property
    def address(self) -> str:
        return f"unix:{self.path}"

    async def start(self) -> None:
        self._runner = web.AppRunner(self._endpoint.app(), access_log=None)
        await self._runner.setup()
        await web.UnixSite(self._runner, str(self.path)).start()
        self.path.chmod(0o600)  # its directory is 0700 already; the socket says so too

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        shutil.rmtree(self.dir, ignore_errors=True)

    def binding(self, worker: str) -> runtime.Fetcher:
        """A Python worker's ``env.<binding>`` to ``worker``."""

        async def backend(request: Outgoing) -> FetchResponse:
            request.headers = {
                **{k: v for k, v in request.headers.items() if k.lower() not in _OURS},
                SERVICE_TARGET: worker,
                SERVICE_SECRET: self.secret,
            }
            session = aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(self.path)))
            return await send(session, request)

        return runtime.Fetcher(backend, worker)


_OURS = (SERVICE_TARGET.lower(), SERVICE_SECRET.lower())
