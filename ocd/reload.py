"""Reload (SIGHUP, ``ocd dev``'s watcher, the dashboard): re-read the config and every
worker module, judge them, and apply what changed to the running daemon.

A config that fails validation, that weakens security against where the sockets are bound
(``ocd.posture``), or whose workers fail to load (workerd included) is rejected whole and
the running one stays. Settings that only a restart applies are logged, not applied.
Removed consumers and a replaced workerd finish their batches before they stop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from ocd import loader
from ocd.catchall import catch_all
from ocd.config import Config, load_config
from ocd.errors import ConfigError, WorkerLoadError, WorkerLoadErrors
from ocd.http.cloudflare.context import ApiContext
from ocd.js.host import WorkerdHost, js_workers, prepare
from ocd.js.workerd import WorkerdFailed
from ocd.loader import LoadedWorker
from ocd.posture import weakenings
from ocd.wiring import ConsumerPlan, consumer_plan, routes, schedules, serving_workers

if TYPE_CHECKING:
    from ocd.daemon import Daemon

log = logging.getLogger(__name__)

# Read once, at start: a change is logged and waits for a restart.
RESTART_SERVER = (
    "host",
    "port",
    "data_dir",
    "durability",
    "disk_reserve_bytes",
    "header_timeout_s",  # the listeners' settings
    "body_timeout_s",
    "keepalive_timeout_s",
    "max_connections",
)
RESTART_STORE = ("backend", "dsn", "pool_size", "node_heartbeat_s")


async def run(daemon: Daemon) -> bool:
    """Reload ``daemon``; returns whether the new configuration was applied."""
    if daemon.state != "ready":
        log.warning("reload ignored while %s", daemon.state, extra={"event": "reload_ignored"})
        return False
    daemon.state = "reloading"
    daemon.notifier.reloading()
    try:
        try:
            config = load_config(daemon.config.path, port=daemon.config.port_override)
            weaker = weakenings(daemon.config, config, daemon.listeners.bound)
            if weaker:  # judged against where the sockets are bound, not where it says
                raise ConfigError(weaker)
            workers = loader.load_workers(config.workers, fresh=True)
            js, js_change = await _next_js(daemon, config)
            try:
                chosen = catch_all(config, serving_workers(workers, js))
            except ConfigError:
                if js is not None and js is not daemon.js:
                    await js.stop()
                raise
        except (ConfigError, WorkerLoadErrors) as e:
            log.error(
                "reload rejected, the running configuration stays:\n%s",
                e,
                extra={"event": "reload_rejected"},
            )
            daemon.last_reload = {"at_ms": daemon.clock(), "applied": False, "error": str(e)}
            return False
        old_js, daemon.js = daemon.js, js
        daemon.catch_all = chosen
        summary = await _apply(daemon, config, workers)
        if old_js is not None and old_js is not js:
            _retire_js(daemon, old_js)
        if js_change:
            summary = f"{summary}; {js_change}" if summary else js_change
        daemon.last_reload = {"at_ms": daemon.clock(), "applied": True, "summary": summary}
        if daemon.ui is not None:
            daemon.ui.reconfigure()
        log.info(
            "reload applied: %s",
            summary or "nothing changed",
            extra={"event": "reload_applied", "changes": summary},
        )
        return True
    finally:
        if not daemon.stopped:
            daemon.state = "ready"
            daemon.notifier.ready(daemon.status_line())


async def _apply(daemon: Daemon, config: Config, workers: list[LoadedWorker]) -> str:
    """Put ``config`` and ``workers`` in place; returns what changed, for the log."""
    _warn_restart_only(daemon.config, config)
    daemon.config = config
    daemon.listeners.reconfigure(config)  # SQS keys added, revoked or rotated
    # What the new config names is protected before its queues are made.
    daemon.admin.configure(config)
    await daemon.admin.ensure_config_queues(config.queues)
    envs = daemon.envs_of(workers)
    changes = _apply_consumers(daemon, consumer_plan(config, workers, envs, daemon.js))
    changes += _worker_changes(daemon.workers, workers)
    daemon.workers = workers
    daemon.envs = envs
    daemon.scheduler.set_schedules(schedules(config, workers, envs, daemon.js))
    if daemon.router is not None:
        daemon.router.set_routes(routes(config, workers, envs, daemon.js, daemon.catch_all))
    if daemon.api is not None:
        fresh = ApiContext.from_config(
            config, daemon.store, daemon.producer, daemon.api.pull, daemon.admin, daemon.clock
        )
        daemon.api.accounts = fresh.accounts
        daemon.api.producers = fresh.producers
        daemon.api.workers = fresh.workers
    return "; ".join(changes)


def _warn_restart_only(old: Config, new: Config) -> None:
    for setting in RESTART_SERVER:
        if getattr(old.server, setting) != getattr(new.server, setting):
            name = setting.removesuffix("_bytes")  # the config file's name for it
            log.warning(
                "server.%s changed: it takes effect at the next restart",
                name,
                extra={"event": "reload_needs_restart", "key": f"server.{name}"},
            )
    for setting in RESTART_STORE:
        if getattr(old.store, setting) != getattr(new.store, setting):
            log.warning(
                "store.%s changed: it takes effect at the next restart",
                setting,
                extra={"event": "reload_needs_restart", "key": f"store.{setting}"},
            )


def _apply_consumers(daemon: Daemon, plan: ConsumerPlan) -> list[str]:
    """Stop the dispatchers the plan drops (their batches finish), start the new ones,
    reconfigure the rest."""
    changes: list[str] = []
    for key in daemon.dispatchers.keys() - plan.keys():
        d = daemon.dispatchers.pop(key)
        d.stop_claiming()
        daemon.retire(
            asyncio.create_task(d.drain(d.policy.handler_timeout_s), name=f"ocd-retire-{key}")
        )
        changes.append(f"consumer of {key[1]} removed")
    for key, (worker, policy, kind) in plan.items():
        current = daemon.dispatchers.get(key)
        if current is None:
            daemon.start_dispatcher(key, worker, policy, kind)
            changes.append(f"consumer of {key[1]} added ({worker})")
        else:
            if current.policy != policy or current.worker != worker:
                changes.append(f"consumer of {key[1]} updated")
            current.reconfigure(worker, policy, kind)
    return changes


def _worker_changes(old: list[LoadedWorker], new: list[LoadedWorker]) -> list[str]:
    before = {w.config.name for w in old}
    after = {w.config.name for w in new}
    return (
        [f"worker {n} added" for n in sorted(after - before)]
        + [f"worker {n} removed" for n in sorted(before - after)]
        + [f"worker {n} reloaded" for n in sorted(before & after)]
    )


async def _next_js(daemon: Daemon, config: Config) -> tuple[WorkerdHost | None, str | None]:
    """The host the new config's JavaScript workers run on, and what changed: the running
    one when bundles and generated config are the same, else a new workerd, already
    listening (old batches finish on the old one, which then stops)."""
    prepared = await asyncio.to_thread(prepare, config)
    if prepared is None:
        return None, "workerd stopped (no JavaScript workers)" if daemon.js else None
    if daemon.js is not None and daemon.js.prepared.fingerprint == prepared.fingerprint:
        return daemon.js, None
    host = daemon.workerd(config, prepared)
    try:
        await host.start()
    except WorkerdFailed as e:
        await host.stop()
        w = js_workers(config)[0]
        raise WorkerLoadErrors(
            [WorkerLoadError(w.name, w.source, w.key_path, f"workerd refused it:\n{e}")]
        ) from e
    return host, "JavaScript workers rebundled, running on a new workerd"


def _retire_js(daemon: Daemon, old: WorkerdHost) -> None:
    """Stop a replaced workerd once the batches in flight now (some may be on it) are done,
    within the longest handler timeout."""
    inflight = {t for d in daemon.dispatchers.values() for t in d.inflight_tasks}
    wait_s = max((w.handler_timeout_s for w in daemon.config.workers), default=900.0)

    async def retire() -> None:
        if inflight:
            await asyncio.wait(inflight, timeout=wait_s)
        await old.stop()

    daemon.retire(asyncio.create_task(retire(), name="ocd-workerd-retire"))
