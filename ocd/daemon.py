"""The daemon's lifecycle: open the store, load workers, start dispatchers and HTTP, then
drain in a fixed order on shutdown.

Shutdown order: stop accepting HTTP -> stop claiming -> let in-flight batches finish up to
``shutdown_timeout`` -> hand the rest back without spending an attempt -> wait for
``waitUntil`` work -> close HTTP -> close the store.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

import runtime
from ocd import loader, reload, summary
from ocd.admin import Admin
from ocd.catchall import catch_all
from ocd.clock import Clock, SteadyClock, keep_mark, save_mark
from ocd.config import Config
from ocd.d1 import D1Service
from ocd.dispatch import ConsumerPolicy, Dispatcher, HandlerKind
from ocd.errors import ConfigError, OcdError, StartupError
from ocd.hosts import service_fetch, start_js
from ocd.http.body import BODY_POLICY, MIB, BodyPolicy
from ocd.http.browsers import Guard
from ocd.http.cloudflare.app import add_api
from ocd.http.cloudflare.context import ApiContext
from ocd.http.listeners import Listeners, sqs_verifier
from ocd.http.ops import OpsRoutes
from ocd.http.sqs.context import SqsContext
from ocd.http.ui import Dashboard
from ocd.http.workers import WorkerRouter
from ocd.js.host import Prepared, WorkerdHost
from ocd.kv import KvService
from ocd.loader import LoadedWorker
from ocd.metrics import Metrics
from ocd.notify import Notifier
from ocd.producer import Producer
from ocd.pull import PullService
from ocd.r2 import R2Service
from ocd.retention import RETENTION_SWEEP_S, sweep_forever
from ocd.scheduler import Scheduler
from ocd.services import ServiceSocket
from ocd.store import Store, make_store
from ocd.supervisor import Supervisor, watch_store
from ocd.wiring import consumer_plan, env_of, routes, schedules, serving_workers

log = logging.getLogger(__name__)


def load_workers(config: Config, fresh: bool = False) -> list[LoadedWorker]:
    """Import every worker module; raises WorkerLoadErrors listing every one that fails."""
    return loader.load_workers(config.workers, fresh)


@dataclass
class Daemon:
    config: Config
    workers: list[LoadedWorker]
    clock: Clock = field(default_factory=SteadyClock)  # see ocd.clock: steps do not jump it
    store: Store = field(init=False)
    admin: Admin = field(init=False)  # made at start, once the store is open
    producer: Producer = field(init=False)
    dispatchers: dict[tuple[str, str], Dispatcher] = field(default_factory=dict)
    api: ApiContext | None = None
    router: WorkerRouter | None = None
    listeners: Listeners = field(default_factory=Listeners)
    supervisor: Supervisor = field(default_factory=Supervisor)  # every background task
    retention_sweep_s: float = RETENTION_SWEEP_S
    stopped: bool = False
    notifier: Notifier = field(default_factory=Notifier)
    metrics: Metrics = field(default_factory=Metrics)
    state: str = "starting"  # starting -> ready -> (reloading -> ready) -> draining
    _retiring: set[asyncio.Task[None]] = field(default_factory=set)
    scheduler: Scheduler = field(init=False)  # cron triggers
    ui: Dashboard | None = None
    last_reload: dict[str, Any] | None = None  # when, and what it changed or why it failed
    accept_data_loss: bool = False  # ocd serve --accept-data-loss
    js: WorkerdHost | None = None  # JavaScript workers, in workerd
    services: ServiceSocket | None = None  # service bindings that pass through ocd
    envs: dict[str, runtime.Env] = field(default_factory=dict)  # the Python workers' env
    catch_all: str | None = None  # the worker without routes that answers every other path

    def __post_init__(self) -> None:
        sc = self.config.store
        self.store = make_store(
            sc.backend,
            data_dir=sc.data_dir,
            durability=sc.durability,
            dsn=sc.dsn,
            pool_size=sc.pool_size,
            node_heartbeat_s=sc.node_heartbeat_s,
            clock=self.clock,
            disk_reserve_bytes=self.config.server.disk_reserve_bytes,
            accept_data_loss=self.accept_data_loss,
        )
        if hasattr(self.store, "on_commit"):  # the backend reports its group commits
            self.store.on_commit = self.metrics.committed
        self.producer = Producer(self.store, self.clock, self.metrics)
        self.kv = KvService(self.store, self.clock)
        self.d1 = D1Service(self.config.server.data_dir)
        self.r2 = R2Service(self.config.server.data_dir, self.clock)
        self.scheduler = Scheduler(self.store, self.clock, self.metrics)

    # ---------------------------------------------------------------- start

    async def start(self) -> None:
        try:
            await self.store.open(self.clock())
        except OcdError as e:
            raise StartupError(str(e)) from e
        self.admin = Admin(self.store, self.clock)
        self.admin.configure(self.config)
        try:
            if isinstance(self.clock, SteadyClock):  # never earlier than a time already used
                self.clock.carry_on_from(await self.store.clock_mark())
            await self.admin.ensure_config_queues(self.config.queues)
            await self.admin.resume_moves()
            self.services = ServiceSocket(functools.partial(service_fetch, self))
            await self.services.start()
            self.js = await start_js(self.config, self.workerd)
            try:
                self.catch_all = catch_all(self.config, serving_workers(self.workers, self.js))
            except ConfigError as e:
                raise StartupError(str(e)) from e
            envs = self.envs_of(self.workers)
            self.envs = envs
            plan = consumer_plan(self.config, self.workers, envs, self.js)
            for key, (worker, policy, kind) in plan.items():
                self.start_dispatcher(key, worker, policy, kind)
            self.scheduler.set_schedules(schedules(self.config, self.workers, envs, self.js))
            self.supervisor.start("ocd-cron", self.scheduler.run())
            sweep = sweep_forever(self.store, self.clock, self.metrics, self.retention_sweep_s)
            self.supervisor.start("ocd-retention", sweep)
            if isinstance(self.clock, SteadyClock):
                self.supervisor.start(
                    "ocd-clock", keep_mark(self.clock, self.store.save_clock_mark)
                )
            self.supervisor.start("ocd-move-adopt", self.admin.adopt_loop())
            self.supervisor.start("ocd-store-loops", watch_store(self.store))
            await self._start_http(envs)
        except BaseException:
            await self.supervisor.stop()
            if self.js is not None:
                await self.js.stop()
            await self.d1.close()
            if self.services is not None:
                await self.services.stop()
            await self.store.close()
            raise
        started = summary.started(self.config, self.store, self.port)
        log.info("%s", started.line, extra={"event": "started", **started.fields})
        self.state = "ready"
        self.notifier.ready(self.status_line())
        self.supervisor.start("ocd-watchdog", self.notifier.watchdog())
        self.supervisor.start("ocd-status", summary.report_status(self.notifier, self.status_line))

    def workerd(self, config: Config, prepared: Prepared) -> WorkerdHost:
        """A workerd host for ``config``'s JavaScript workers, their bindings served here."""
        return WorkerdHost(
            config, prepared, self.producer, self.kv, self.d1, self.r2, self.services
        )

    def envs_of(self, workers: list[LoadedWorker]) -> dict[str, runtime.Env]:
        """Each Python worker's env, its bindings served by this daemon."""
        return {
            w.config.name: env_of(w.config, self.producer, self.kv, self.d1, self.services)
            for w in workers
        }

    def start_dispatcher(
        self, key: tuple[str, str], worker: str, policy: ConsumerPolicy, kind: HandlerKind
    ) -> None:
        d = Dispatcher(self.store, worker, policy, kind, self.clock, self.metrics)
        self.dispatchers[key] = d
        self.supervisor.start(_dispatch_task(key), d.run())

    async def _start_http(self, envs: dict[str, runtime.Env]) -> None:
        self.router = WorkerRouter(routes(self.config, self.workers, envs, self.js, self.catch_all))
        pull = await PullService.open(self.store, self.admin, self.clock, self.metrics)
        api = ApiContext.from_config(
            self.config, self.store, self.producer, pull, self.admin, self.clock
        )
        self.api = api
        server = self.config.server
        app = web.Application()
        app[BODY_POLICY] = BodyPolicy(MIB, server.body_timeout_s)
        guard = Guard(server.host, lambda: api.accounts.open)
        OpsRoutes(self, guard).add_to(app.router)
        add_api(app, api, guard)
        if self.config.ui.enabled:
            self.ui = Dashboard(self)
            await self.ui.open()
            self.ui.add_to(app.router)
            self.supervisor.start("ocd-ui-live", self.ui.hub.run())
        app.router.add_route("*", r"/{tail:[\s\S]*}", self.router.handle)  # %0A too
        await self.listeners.start(app, server)
        sqs = self.config.sqs
        if sqs is not None:
            ctx = SqsContext(
                self.store,
                self.producer,
                pull,
                self.admin,
                self.clock,
                sqs.region,
                sqs.public_url,
                verifier=sqs_verifier(self.config),
            )
            await self.listeners.start_sqs(ctx, sqs, server)

    # ---------------------------------------------------------------- background

    def status_line(self) -> str:
        """What systemd shows of ocd while it runs (``ocd.summary``)."""
        return summary.status_line(self.workers, self.store)

    async def wait_failed(self) -> None:
        await self.supervisor.failed.wait()

    @property
    def failure(self) -> BaseException | None:
        """Why a background task died (the daemon then stops); None while none has."""
        return self.supervisor.failure

    # ---------------------------------------------------------------- stop

    async def shutdown(self, timeout_s: float | None = None) -> None:
        if self.stopped:
            return
        self.stopped = True
        self.state = "draining"
        self.notifier.stopping()
        timeout = self.config.server.shutdown_timeout_s if timeout_s is None else timeout_s
        started = time.monotonic()
        log.info("shutting down: draining up to %.0f s", timeout, extra={"event": "stopping"})
        await self.listeners.stop_accepting()
        if self.api is not None:
            self.api.pull.close()  # long polls answer now instead of holding the drain
        if self.ui is not None:
            self.ui.hub.close()  # event streams end now instead of holding the drain
        for d in self.dispatchers.values():
            d.stop_claiming()
        # A dispatcher may be between claiming and starting a batch: let its loop finish
        # so that drain sees every batch.
        loops = [t for n, t in self.supervisor.tasks.items() if n.startswith("ocd-dispatch-")]
        if loops:
            await asyncio.wait(loops, timeout=5)
        inflight = sum(d.inflight for d in self.dispatchers.values())
        await asyncio.gather(*(d.drain(timeout) for d in self.dispatchers.values()))
        if self._retiring:  # consumers removed by a reload, still finishing their batches
            await asyncio.wait(set(self._retiring), timeout=timeout)
        cron_loop = self.supervisor.tasks.pop("ocd-cron", None)
        if cron_loop is not None:  # no new cron runs; those under way may finish
            cron_loop.cancel()
        await self.scheduler.idle(max(0.0, timeout - (time.monotonic() - started)))
        self.scheduler.cancel()
        if self.router is not None and self.router.background:
            left = max(0.0, timeout - (time.monotonic() - started))
            await asyncio.wait(set(self.router.background), timeout=left)
        await self.listeners.close()
        await self.supervisor.stop()
        if self.js is not None:
            await self.js.stop()
        if self.services is not None:
            await self.services.stop()
        if isinstance(self.clock, SteadyClock):
            await save_mark(self.clock, self.store.save_clock_mark)
        await self.admin.stop_moves()  # they go on after the next start
        await self.d1.close()  # after workerd: its last batches have been answered
        await self.store.close()
        self.r2.close()
        self.notifier.close()
        log.info(
            "stopped (%d batch(es) were in flight at shutdown)",
            inflight,
            extra={"event": "stopped", "inflight": inflight},
        )

    # ---------------------------------------------------------------- reload

    async def reload(self) -> bool:
        """Re-read the config and every worker module and apply what changed. A config that
        fails validation is rejected whole and the running one stays. Returns whether the
        new configuration was applied (``ocd.reload``)."""
        return await reload.run(self)

    def retire(self, task: asyncio.Task[None]) -> None:
        """Keep ``task`` (removed work finishing its batches) until done; a shutdown
        waits for it."""
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def status(self) -> dict[str, Any]:
        """What ``ocd status`` shows: workers, queues with their counts, consumers."""
        return await OpsRoutes(self).report()

    @property
    def port(self) -> int:
        """The main listener's port (the configured one, or the one port 0 was given)."""
        return self.listeners.port

    @property
    def sqs_port(self) -> int:
        return self.listeners.sqs_port

    @property
    def workerd_state(self) -> str | None:
        if self.js is None:
            return None
        return "up" if self.js.up else "down"

    def force(self) -> None:
        """Stop waiting for in-flight batches: hand them back now."""
        for d in self.dispatchers.values():
            d.abort()


def _dispatch_task(key: tuple[str, str]) -> str:
    return f"ocd-dispatch-{key[0]}/{key[1]}"
