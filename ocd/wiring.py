"""How the configured workers are wired into ocd: a Python worker's env (its bindings), which
worker consumes which queue with what settings, the HTTP routes, the cron schedules. The
daemon builds these at start and again at each reload, from the config then running and,
for JavaScript workers, the workerd host then running.
"""

from __future__ import annotations

import functools
from typing import Any

import runtime
from ocd import cron
from ocd.catchall import routes_of, serving
from ocd.config import Config, ConsumerConfig, WorkerConfig
from ocd.d1 import D1Binding, D1Service
from ocd.dispatch import ConsumerPolicy, HandlerKind, PythonHandler
from ocd.http.assets import Assets, AssetsBinding
from ocd.http.workers import WorkerRoute
from ocd.js.host import WorkerdHost, js_workers
from ocd.kv import KvBinding, KvService
from ocd.loader import Handler, LoadedWorker
from ocd.producer import Producer
from ocd.python_handler import QueueCall
from ocd.scheduler import Schedule, schedules_of
from ocd.services import ServiceSocket
from ocd.store import KvNamespace
from runtime.unsupported import Unsupported

# (account, queue) -> the worker, settings and handler kind that consume it
ConsumerPlan = dict[tuple[str, str], tuple[str, ConsumerPolicy, HandlerKind]]


def env_of(
    w: WorkerConfig,
    producer: Producer,
    kv: KvService,
    d1: D1Service,
    services: ServiceSocket | None,
) -> runtime.Env:
    """A Python worker's env: its vars and a binding object for each of its bindings."""
    values: dict[str, Any] = dict(w.vars)
    for p in w.producers:
        values[p.binding] = runtime.Queue(p.queue, producer.binding(p.queue, w.account))
    for k in w.kv_namespaces:
        ns = KvNamespace(w.account, k.id)
        values[k.binding] = runtime.KvNamespace(KvBinding(kv, ns))
    for d in w.d1_databases:
        values[d.binding] = runtime.D1Database(D1Binding(d1, d.database_id))
    for svc in w.services:  # a Python worker's: through ocd.services
        assert services is not None
        values[svc.binding] = services.binding(svc.service)
    if w.assets is not None and w.assets.binding is not None:
        values[w.assets.binding] = AssetsBinding(_assets(w))
    for b in w.ignored_bindings:  # refused, let through by ignore_unsupported_bindings
        if b.name:
            values[b.name] = Unsupported(f"{b.feature.removesuffix('s')} {b.name}")
    return runtime.Env(values)


def consumer_plan(
    config: Config,
    workers: list[LoadedWorker],
    envs: dict[str, runtime.Env],
    js: WorkerdHost | None,
) -> ConsumerPlan:
    """(account, queue) -> the worker, settings and handler kind that consume it."""
    plan: ConsumerPlan = {}
    for w in workers:
        if w.queue is None:
            continue
        for c in w.config.consumers:
            policy = _policy(w.config, c)
            plan[(w.config.account, c.queue)] = (
                w.config.name,
                policy,
                PythonHandler(_bind_call(w.queue, envs[w.config.name])),
            )
    if js is not None:
        for wc in js_workers(config):
            for c in wc.consumers:
                plan[(wc.account, c.queue)] = (
                    wc.name,
                    _policy(wc, c),
                    js.kind(wc.name),
                )
    return plan


def routes(
    config: Config,
    workers: list[LoadedWorker],
    envs: dict[str, runtime.Env],
    js: WorkerdHost | None,
    catch_all: str | None,
) -> list[WorkerRoute]:
    """The HTTP routes of every worker with a fetch handler or assets; a JavaScript
    worker's go to workerd."""
    found = [
        WorkerRoute(
            w.config.name,
            prefix,
            w.fetch,
            envs[w.config.name],
            None if w.config.assets is None else _assets(w.config),
        )
        for w in workers
        if w.fetch is not None or w.config.assets is not None
        for prefix in routes_of(w.config.routes, w.config.name, catch_all)
    ]
    if js is not None:
        for wc in js_workers(config):
            assets = None if wc.assets is None else _assets(wc)
            for prefix in routes_of(wc.routes, wc.name, catch_all):
                proxy = functools.partial(js.fetch, wc.name)
                found.append(WorkerRoute(wc.name, prefix, None, runtime.Env({}), assets, proxy))
    return found


def schedules(
    config: Config,
    workers: list[LoadedWorker],
    envs: dict[str, runtime.Env],
    js: WorkerdHost | None,
) -> list[Any]:
    """Cron triggers of Python workers, and of JavaScript ones (through the bridge)."""
    found = schedules_of(workers, envs)
    if js is not None:
        for wc in js_workers(config):
            for expr in wc.crons:
                found.append(
                    Schedule(
                        wc.name,
                        cron.parse(expr),
                        js.scheduled(wc.name),
                        runtime.Env({}),
                        wc.handler_timeout_s,
                    )
                )
    return found


def serving_workers(workers: list[LoadedWorker], js: WorkerdHost | None) -> set[str]:
    """The workers that answer HTTP, Python and JavaScript ones (``ocd.catchall``)."""
    return serving(workers, js.prepared.serving if js is not None else ())


def _assets(w: WorkerConfig) -> Assets:
    assert w.assets is not None
    return Assets(w.assets)


def _policy(w: WorkerConfig, c: ConsumerConfig) -> ConsumerPolicy:
    return ConsumerPolicy(
        queue=c.queue,
        account=w.account,
        max_batch_size=c.max_batch_size,
        max_batch_timeout_s=c.max_batch_timeout_s,
        max_retries=c.max_retries,
        dead_letter_queue=c.dead_letter_queue,
        max_concurrency=c.max_concurrency,
        retry_delay_s=c.retry_delay_s,
        handler_timeout_s=w.handler_timeout_s,
    )


def _bind_call(handler: Handler, env: runtime.Env) -> QueueCall:
    async def call(batch: runtime.MessageBatch, ctx: runtime.ExecutionContext) -> Any:
        return await handler(batch, env, ctx)

    return call
