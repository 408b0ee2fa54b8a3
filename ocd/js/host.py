"""Every JS worker of a config in one workerd, with ocd as its queue backend.

``prepare`` (also what ``check-config`` runs): find workerd and esbuild, refuse a
compatibility date newer than the binary supports, bundle each worker into
``<data_dir>/workerd/<name>/``, write the workerd config there. ``start``: the producer,
KV, D1 and R2 endpoints on private unix sockets, then workerd, ready once its sockets
listen (service bindings to Python workers go to the daemon's ``ocd.services`` socket). If
workerd dies it is started again with backoff; meanwhile batches are handed back unspent
(``unreached``) and sends reject in the Worker (there is no Worker to send).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import secrets
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from ocd.config import Config, WorkerConfig
from ocd.d1 import D1Service
from ocd.errors import HandlerThrew, WorkerLoadError, WorkerLoadErrors
from ocd.files import FILE_MODE, private_dir, socket_dir, write_file
from ocd.js import bundle, capnp, handlers, proxy, toolchain
from ocd.js.d1 import D1Endpoint
from ocd.js.invoke import Bridge, WorkerdKind
from ocd.js.kv import KvEndpoint
from ocd.js.producer import MAX_REQUEST_BYTES, ProducerEndpoint
from ocd.js.r2 import R2Endpoint
from ocd.js.reports import ErrorReports, load_maps
from ocd.js.wire import PrivateServer, routed
from ocd.js.workerd import Workerd, WorkerdFailed
from ocd.kv import KvService
from ocd.producer import Producer
from ocd.r2 import R2Service
from ocd.services import ServiceSocket
from ocd.store import KvNamespace

log = logging.getLogger(__name__)

RESTART_BACKOFF_S = (0.5, 1.0, 2.0, 5.0, 10.0)


@dataclass(frozen=True, slots=True)
class Prepared:
    tools: toolchain.Toolchain
    workers: tuple[capnp.JsWorker, ...]
    dir: Path  # <data_dir>/workerd: bundles, bridge.js, config.capnp
    fingerprint: str  # of the bundles and everything the generated config says
    workerd_version: str = "unknown"  # what `workerd --version` says
    serving: frozenset[str] = frozenset()  # workers whose bundle exports fetch()


def js_workers(config: Config) -> list[WorkerConfig]:
    return [w for w in config.workers if w.js]


def prepare(config: Config, environ: dict[str, str] | None = None) -> Prepared | None:
    """Toolchain, dates and bundles of the config's JS workers (None if it has none);
    ``WorkerLoadErrors`` naming each worker's problem, with esbuild's file and line."""
    import os

    workers = js_workers(config)
    if not workers:
        return None
    env = dict(os.environ if environ is None else environ)
    config_dir = config.path.parent
    first = workers[0]

    def fail(w: WorkerConfig, key: str, message: str) -> WorkerLoadError:
        return WorkerLoadError(w.name, w.source, _key_path(w, key), message)

    try:
        tools = toolchain.Toolchain(
            workerd=toolchain.find("workerd", config.js.workerd, config_dir, env),
            esbuild=toolchain.find("esbuild", config.js.esbuild, config_dir, env),
        )
    except toolchain.ToolMissing as e:
        raise WorkerLoadErrors([fail(first, "main", str(e))]) from None
    out = config.server.data_dir / "workerd"
    private_dir(out, tighten=True)  # bundles and config.capnp (the bridge's secret) in it
    for w in workers:
        if w.durable_classes:
            private_dir(_durable_dir(config, w))
    version = toolchain.binary_version(tools.workerd)
    newest = toolchain.newest_compatibility_date(tools.workerd, out / "probe")
    errors: list[WorkerLoadError] = []
    dated: list[tuple[WorkerConfig, str]] = []
    names = frozenset(w.name for w in workers)
    for w in workers:
        date = w.compatibility_date or newest or capnp.BRIDGE_DATE  # unset: as wrangler dev
        if newest is not None and date > newest:
            errors.append(
                fail(w, "compatibility_date", _too_new(w.name, date, newest, version, tools))
            )
            continue
        assert w.main is not None
        try:
            bundle.bundle(tools.esbuild, w.main, out / w.name, w.no_bundle)
        except bundle.BundleError as e:
            errors.append(
                fail(w, "main", "esbuild could not bundle it:\n    " + "\n    ".join(e.problems))
            )
            continue
        dated.append((w, date))
    if errors:
        raise WorkerLoadErrors(errors)
    found = handlers.exported(
        tools.workerd,
        out,
        [_js_worker(config, w, date, False, names) for w, date in dated],
    )
    # a worker whose handlers could not be read (it fails at load: the trial says why) is
    # taken to serve, so that its routes reach it
    serving = frozenset(w.name for w, _ in dated if "fetch" in found.get(w.name, {"fetch"}))
    prepared = [
        _js_worker(config, w, date, bool(w.routes) or w.name in serving, names) for w, date in dated
    ]
    if errors:
        raise WorkerLoadErrors(errors)
    source = resources.files("ocd.js").joinpath("bridge.js")
    write_file(out / "bridge.js", source.read_text())
    digest = hashlib.sha256(
        repr(
            (
                tools,
                prepared,
                _bindings(config),
                _kv_bindings(config),
                _d1_bindings(config),
                _r2_bindings(config),
            )
        ).encode()
    )
    for jw in prepared:
        digest.update((out / jw.module_path).read_bytes())
    return Prepared(tools, tuple(prepared), out, digest.hexdigest(), version, serving)


def _durable_dir(config: Config, w: WorkerConfig) -> Path:
    """Where workerd keeps ``w``'s Durable Objects: a directory per class, a SQLite file per
    object."""
    return config.server.data_dir / "do" / w.name


def _key_path(w: WorkerConfig, key: str) -> str:
    """Where ``key`` of worker ``w`` is, in the file ``w.source``: a wrangler file's keys are
    at its top."""
    if w.wrangler is not None and w.source == w.wrangler:
        return key
    return f"{w.key_path}.{key}" if key else w.key_path


def _js_worker(
    config: Config, w: WorkerConfig, date: str, serves_http: bool, js_names: frozenset[str]
) -> capnp.JsWorker:
    return capnp.JsWorker(
        name=w.name,
        module_path=f"{w.name}/index.js",
        compatibility_date=date,
        compatibility_flags=w.compatibility_flags,
        vars=w.vars,
        producers=tuple(p.binding for p in w.producers),
        serves_http=serves_http,
        kv=tuple(k.binding for k in w.kv_namespaces),
        d1=tuple(d.binding for d in w.d1_databases),
        r2=tuple(b.binding for b in w.r2_buckets),
        durable_objects=w.durable_objects,
        durable_classes=w.durable_classes,
        durable_dir=str(_durable_dir(config, w)),
        services=tuple(
            capnp.JsService(s.binding, s.service, s.entrypoint, s.service not in js_names)
            for s in w.services
        ),
    )


def _too_new(name: str, date: str, newest: str, version: str, tools: toolchain.Toolchain) -> str:
    """A worker's date beyond what the binary runs: both dates, the binary as it names
    itself, and the npm command that fixes it (a project's own workerd is found in
    node_modules/.bin before wrangler's)."""
    return (
        f'worker "{name}" requires compatibility date "{date}", but the newest date workerd '
        f'{version} ({tools.workerd}) supports is "{newest}": run `npm install -D '
        f"workerd@{toolchain.WORKERD_VERSION}` beside it (or update wrangler: `npm install -D "
        "wrangler@latest`), or set an older compatibility_date"
    )


def _bindings(config: Config) -> dict[tuple[str, str], tuple[str, str]]:
    """(worker, producer binding) -> (queue, account), for the producer endpoint."""
    return {
        (w.name, p.binding): (p.queue, w.account) for w in js_workers(config) for p in w.producers
    }


def _kv_bindings(config: Config) -> dict[tuple[str, str], KvNamespace]:
    """(worker, KV binding) -> its namespace, for the KV endpoint."""
    return {
        (w.name, k.binding): KvNamespace(w.account, k.id)
        for w in js_workers(config)
        for k in w.kv_namespaces
    }


def _d1_bindings(config: Config) -> dict[tuple[str, str], str]:
    """(worker, D1 binding) -> its database id, for the D1 endpoint."""
    return {(w.name, d.binding): d.database_id for w in js_workers(config) for d in w.d1_databases}


def _r2_bindings(config: Config) -> dict[tuple[str, str], str]:
    """(worker, R2 binding) -> its bucket's name, for the R2 endpoint."""
    return {(w.name, b.binding): b.bucket_name for w in js_workers(config) for b in w.r2_buckets}


def check(config: Config) -> Prepared | None:
    """What ``check-config`` (and ``serve``, before it opens anything) checks of the JS
    workers: ``prepare``, then workerd loading the generated config once, so that a
    syntax error at load is reported as a config problem, with workerd's own words."""
    prepared = prepare(config)
    if prepared is None:
        return None

    async def trial() -> None:
        host = WorkerdHost(config, prepared, None)
        host.announce = False
        try:
            await host.start()
        finally:
            await host.stop()

    try:
        asyncio.run(trial())
    except WorkerdFailed as e:
        w = js_workers(config)[0]
        raise WorkerLoadErrors(
            [
                WorkerLoadError(
                    w.name,
                    w.source,
                    _key_path(w, ""),
                    "workerd refused the JavaScript worker(s):\n    "
                    + "\n    ".join(_in_users_words(str(e)).splitlines()),
                )
            ]
        ) from None
    return prepared


def _in_users_words(text: str) -> str:
    """workerd's words with its service names as the config names them: ``service
    w_<name>`` is worker <name>; the bridge is ocd's, not something the user wrote."""
    text = re.sub(r"service w_([A-Za-z0-9_-]+):", r'worker "\1":', text)
    return text.replace("service ocd-bridge:", "ocd's bridge worker:")


class WorkerdHost:
    def __init__(
        self,
        config: Config,
        prepared: Prepared,
        producer: Producer | None,
        kv: KvService | None = None,
        d1: D1Service | None = None,
        r2: R2Service | None = None,
        services: ServiceSocket | None = None,
    ) -> None:
        self.config = config
        self.services = services  # where service bindings to Python workers go
        self.kv = kv
        self.d1 = d1
        self.r2 = r2
        self.prepared = prepared
        self.producer = producer
        self.secret = secrets.token_urlsafe(32)
        self.run_dir = socket_dir("ocd-workerd-")  # mode 0700: private
        self.workerd: Workerd | None = None
        self._bridge: Bridge | None = None
        self._runners: list[web.AppRunner] = []  # one per private socket
        self._servers: list[PrivateServer] = []  # the producer socket's
        self._restarting: asyncio.Task[None] | None = None
        self._stopping = False
        self._sessions: dict[str, aiohttp.ClientSession] = {}
        self.announce = True  # log workerd_started (not for check-config's trial)
        self.reports = ErrorReports(
            self.secret,
            load_maps(prepared.dir, (w.name for w in prepared.workers), config.path.parent),
        )

    # ------------------------------------------------------------ addresses

    def _sock(self, name: str) -> Path:
        return self.run_dir / f"{name}.sock"

    def http_socket(self, worker: str) -> Path:
        return self._sock(capnp.http_socket(worker))

    # ------------------------------------------------------------ running

    async def start(self) -> None:
        """The producer endpoint, then workerd; ``WorkerdFailed`` (with workerd's own
        words) if it exits before it listens."""
        endpoint = ProducerEndpoint(self.producer, self.secret, _bindings(self.config))
        producer = PrivateServer(
            str(self._sock("producer")),
            routed({**endpoint.routes(), **self.reports.routes()}),
            MAX_REQUEST_BYTES,
        )
        await producer.start()
        self._servers.append(producer)
        self._sock("producer").chmod(FILE_MODE)
        # KV, D1 and R2 on sockets of their own: their paths are keys, any of which may be
        # one of another protocol's routes ("message", "query", ...)
        await self._serve("kv", KvEndpoint(self.kv, self.secret, _kv_bindings(self.config)).app())
        await self._serve("d1", D1Endpoint(self.d1, self.secret, _d1_bindings(self.config)).app())
        await self._serve("r2", R2Endpoint(self.r2, self.secret, _r2_bindings(self.config)).app())
        self._write_config()
        await self._start_workerd()

    async def _serve(self, name: str, app: web.Application) -> None:
        """``app`` on the private socket ``name``: its directory is 0700 already, and the
        socket itself says so too."""
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        self._runners.append(runner)
        await web.UnixSite(runner, str(self._sock(name))).start()
        self._sock(name).chmod(FILE_MODE)

    def _write_config(self) -> None:
        p = self.prepared
        text = capnp.config_text(
            p.workers,
            producer_address=f"unix:{self._sock('producer')}",
            bridge_address=f"unix:{self._sock('bridge')}",
            http_addresses={w.name: f"unix:{self.http_socket(w.name)}" for w in p.workers},
            secret=self.secret,
            bridge_path="bridge.js",
            kv_address=f"unix:{self._sock('kv')}",
            d1_address=f"unix:{self._sock('d1')}",
            r2_address=f"unix:{self._sock('r2')}",
            # check-config's trial has no daemon: a socket nothing listens on
            services_address=(
                f"unix:{self._sock('services')}" if self.services is None else self.services.address
            ),
            services_secret="" if self.services is None else self.services.secret,
        )
        write_file(p.dir / "config.capnp", text)  # it holds the start's secret

    async def _start_workerd(self) -> None:
        for name in capnp.sockets_of(self.prepared.workers):
            with contextlib.suppress(FileNotFoundError):
                self._sock(name).unlink()
        w = Workerd(
            self.prepared.tools.workerd,
            self.prepared.dir / "config.capnp",
            capnp.sockets_of(self.prepared.workers),
            [x.name for x in self.prepared.workers],
        )
        await w.start()
        w.on_exit = self._exited
        self.workerd = w
        old, self._bridge = (
            self._bridge,
            Bridge(str(self._sock("bridge")), self.secret, self.reports),
        )
        if old is not None:
            await old.close()
        if not self.announce:
            return
        log.info(
            "workerd %s serving %d JavaScript worker(s): %s",
            self.prepared.workerd_version,
            len(self.prepared.workers),
            ", ".join(x.name for x in self.prepared.workers),
            extra={"event": "workerd_started"},
        )

    def _exited(self, code: int) -> None:
        if self._stopping:
            return
        log.error(
            "workerd exited (status %s); starting it again",
            code,
            extra={"event": "workerd_exited", "status": code},
        )
        self._restarting = asyncio.create_task(self._restart(), name="ocd-workerd-restart")

    async def _restart(self) -> None:
        attempt = 0
        while not self._stopping:
            await asyncio.sleep(RESTART_BACKOFF_S[min(attempt, len(RESTART_BACKOFF_S) - 1)])
            attempt += 1
            try:
                await self._start_workerd()
                return
            except (WorkerdFailed, OSError) as e:
                log.error(
                    "workerd did not start again: %s", e, extra={"event": "workerd_restart_failed"}
                )

    def bridge(self) -> Bridge | None:
        """The bridge of the running workerd; None while it is down."""
        if self.workerd is None or not self.workerd.running:
            return None
        return self._bridge

    async def fetch(self, worker: str, request: web.Request) -> web.StreamResponse:
        """A request to one of ``worker``'s routes, passed to workerd as received (after
        ocd's own listener checks: auth, limits, connection caps), its answer streamed
        back (``ocd.js.proxy``)."""
        if not self.up:
            return web.Response(status=503, text="the JavaScript worker runtime is restarting\n")
        session = self._sessions.get(worker)
        if session is None or session.closed:
            session = self._sessions[worker] = aiohttp.ClientSession(
                connector=aiohttp.UnixConnector(path=str(self.http_socket(worker))),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
                auto_decompress=False,
            )
        return await proxy.forward(session, worker, request)

    def scheduled(self, worker: str) -> Callable[..., Awaitable[None]]:
        """``worker``'s ``scheduled()`` as the scheduler calls a handler: through the
        bridge (``Fetcher.scheduled``); raises unless its outcome is ``ok``."""

        async def call(controller: Any, env: Any, ctx: Any) -> None:
            bridge = self.bridge()
            if bridge is None:
                raise RuntimeError("workerd, which runs the JavaScript workers, is not running")
            url = f"http://workerd/scheduled/{capnp.bridge_binding(worker)}"
            body = {"cron": controller.cron, "scheduledTime": controller.scheduledTime}
            async with bridge.session.post(url, json=body, headers=bridge.headers) as r:
                if r.status != 200:
                    raise RuntimeError(f"the bridge answered {r.status}: {await r.text()}")
                result = await r.json()
            if result.get("noRetry"):
                controller.noRetry()
            outcome = result.get("outcome")
            if outcome != "ok":
                thrown = self.reports.take_scheduled(
                    worker, controller.cron, controller.scheduledTime
                )
                if thrown is not None:
                    raise HandlerThrew(worker, "scheduled", thrown.summary())
                raise RuntimeError(f"scheduled() ended with outcome {outcome}")

        return call

    def kind(self, worker: str) -> WorkerdKind:
        return WorkerdKind(worker, self.bridge)

    @property
    def up(self) -> bool:
        return self.workerd is not None and self.workerd.running

    async def stop(self) -> None:
        self._stopping = True
        if self._restarting is not None:
            self._restarting.cancel()
        if self.workerd is not None:
            await self.workerd.stop()
        if self._bridge is not None:
            await self._bridge.close()
        for session in self._sessions.values():
            await session.close()
        for server in self._servers:
            await server.close()
        for runner in self._runners:
            await runner.cleanup()
        shutil.rmtree(self.run_dir, ignore_errors=True)
