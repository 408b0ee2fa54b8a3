"""Where the daemon's workers run: its own process for the Python ones, workerd for the
JavaScript ones. ``start_js`` bundles the JavaScript workers and starts workerd for them
at start (a reload builds its next host with the same ``host_for``); ``service_fetch``
answers a service binding's request (the daemon's ``ocd.services`` socket) from wherever
its target worker runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from aiohttp import web

import runtime
from ocd.config import Config
from ocd.errors import StartupError, WorkerLoadErrors
from ocd.http.workers import WorkerRoute, WorkerRouter
from ocd.js.host import Prepared, WorkerdHost, prepare
from ocd.js.workerd import WorkerdFailed
from ocd.loader import LoadedWorker

# (config, its bundled JavaScript workers) -> a host with their bindings served by ocd
HostFor = Callable[[Config, Prepared], WorkerdHost]


async def start_js(config: Config, host_for: HostFor) -> WorkerdHost | None:
    """Bundle ``config``'s JavaScript workers and start workerd for them; None without any."""
    try:
        prepared = prepare(config)
    except WorkerLoadErrors as e:
        raise StartupError("; ".join(str(x) for x in e.errors)) from e
    if prepared is None:
        return None
    host = host_for(config, prepared)
    try:
        await host.start()
    except BaseException as e:
        await host.stop()  # what it had started: its endpoints, perhaps workerd
        if isinstance(e, WorkerdFailed):
            raise StartupError(f"workerd refused the JavaScript workers:\n{e}") from e
        raise
    return host


class Running(Protocol):
    """What a service binding's request reads of the daemon, live: a reload replaces the
    workers, their envs and the workerd host."""

    @property
    def js(self) -> WorkerdHost | None: ...
    @property
    def workers(self) -> Sequence[LoadedWorker]: ...
    @property
    def router(self) -> WorkerRouter | None: ...
    @property
    def envs(self) -> Mapping[str, runtime.Env]: ...


async def service_fetch(running: Running, worker: str, request: web.Request) -> web.StreamResponse:
    """A service binding's request to ``worker``: a JavaScript worker's fetch in workerd, or
    a Python worker's with the env and background-task keeping its routes have."""
    js = running.js
    if js is not None and any(w.name == worker for w in js.prepared.workers):
        if not any(w.name == worker and w.serves_http for w in js.prepared.workers):
            return web.Response(status=502, text=f'worker "{worker}" has no fetch handler\n')
        return await js.fetch(worker, request)
    w = next((w for w in running.workers if w.config.name == worker), None)
    if w is None or w.fetch is None or running.router is None or worker not in running.envs:
        what = "has no fetch handler" if w is not None else "is not running"
        return web.Response(status=502, text=f'worker "{worker}" {what}\n')
    route = WorkerRoute(worker, "", w.fetch, running.envs[worker])
    return await running.router.serve(route, request)
