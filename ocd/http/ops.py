"""Operator endpoints under ``/__ocd/``: health, readiness, Prometheus metrics and the
status report that ``ocd status`` shows."""

from __future__ import annotations

import ipaddress
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from ocd import cron
from ocd.counts import queue_counts
from ocd.http.browsers import Guard
from ocd.http.view import DaemonView

OpsSource = DaemonView  # the ops endpoints read the daemon's view as it is


class OpsRoutes:
    """``guard`` keeps web pages out of status, metrics and scheduled runs (a page in the
    user's browser is a loopback client too): ``ocd.http.browsers``."""

    def __init__(self, source: OpsSource, guard: Guard | None = None) -> None:
        self.source = source
        self.guard = guard

    def add_to(self, router: web.UrlDispatcher) -> None:
        router.add_get("/__ocd/healthz", self.healthz)
        router.add_get("/__ocd/readyz", self.readyz)
        router.add_get("/__ocd/metrics", self.metrics)
        router.add_get("/__ocd/status", self.status)
        router.add_post("/__ocd/scheduled", self.scheduled)

    async def healthz(self, request: web.Request) -> web.Response:
        """The process is alive and its event loop answers."""
        return web.json_response({"ok": True})

    async def readyz(self, request: web.Request) -> web.Response:
        """Ready: database open and answering, workers loaded (JavaScript ones: workerd
        running); 503 while starting, reloading or draining, while the database cannot be
        reached, or while workerd is down."""
        state = self.source.state
        store = self.source.store
        full = store.full()
        database = "ok" if store.available() else "unavailable"
        if full is not None:
            database = "full"
        workerd = self.source.workerd_state
        ready = state == "ready" and database == "ok" and workerd != "down"
        body: dict[str, Any] = {"ready": ready, "state": state, "database": database}
        if workerd is not None:
            body["workerd"] = workerd
        if database == "full":
            body["reason"] = full
        elif database == "unavailable":
            body["reason"] = f"the queue database cannot be reached ({store.where})"
        elif state != "ready":
            body["reason"] = f"ocd is {state}"
        elif workerd == "down":
            body["reason"] = "workerd, which runs the JavaScript workers, is restarting"
        return web.json_response(body, status=200 if ready else 503)

    async def status(self, request: web.Request) -> web.Response:
        refused = self._refusal(request)
        if refused is not None:
            return web.json_response({"error": refused}, status=403)
        if not self._allowed(request):
            return web.json_response({"error": "only served on loopback"}, status=403)
        return web.json_response(await self.report())

    async def metrics(self, request: web.Request) -> web.Response:
        refused = self._refusal(request)
        if refused is not None:
            return web.Response(status=403, text=refused + "\n")
        if not self._allowed(request):
            return web.Response(status=403, text="only served on loopback\n")
        src = self.source
        body = await src.metrics.render(src.store, src.clock())
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def scheduled(self, request: web.Request) -> web.Response:
        """Run scheduled() handlers now, as ``wrangler dev --test-scheduled`` does:
        ``?cron=*/5+*+*+*+*`` (optional) and ``?worker=NAME`` (optional); loopback only."""
        refused = self._refusal(request)
        if refused is not None:
            return web.json_response({"error": refused}, status=403)
        if not _loopback(request):
            return web.json_response({"error": "only served on loopback"}, status=403)
        expr = request.query.get("cron")
        if expr is not None:
            try:
                cron.parse(expr)
            except cron.CronError as e:
                return web.json_response({"error": f"cron {expr!r}: {e}"}, status=400)
        runs = await self.source.scheduler.trigger(expr, request.query.get("worker"))
        if not runs:
            what = "no worker with cron triggers and a scheduled() handler"
            worker = request.query.get("worker")
            return web.json_response(
                {"error": what + (f" is named {worker!r}" if worker else "")}, status=404
            )
        body = {
            "ran": [
                {
                    "worker": r.worker,
                    "cron": r.cron,
                    "scheduledTime": r.scheduled_ms,
                    "outcome": r.outcome,
                }
                for r in runs
            ]
        }
        failed = any(r.outcome != "ok" for r in runs)
        return web.json_response(body, status=500 if failed else 200)

    def _refusal(self, request: web.Request) -> str | None:
        return None if self.guard is None else self.guard.refusal(request)

    def _allowed(self, request: web.Request) -> bool:
        """Status and metrics name every account's queues: with accounts configured (and so
        possibly a public listener) they answer only on loopback."""
        if not self.source.config.accounts:
            return True
        return _loopback(request)

    async def report(self) -> dict[str, Any]:
        """What ``ocd status`` shows: workers, queues with their counts, consumers."""
        src = self.source
        store = src.store
        now = src.clock()
        stats = await store.queue_stats(now)
        dlqs = {c.dead_letter_queue for w in src.workers for c in w.config.consumers} - {None}
        queues = []
        for q in store.queues():
            b = await store.backlog(q)
            c = queue_counts(b.count, stats.get(q.key))
            queues.append(
                {
                    "account": q.account,
                    "name": q.name,
                    "backlog": c.backlog,
                    "inflight": c.in_flight,
                    "delayed": c.delayed,
                    "paused": q.settings.delivery_paused,
                    "dead_letter_queue": q.name in dlqs,
                    # never negative, even for a send by a node whose clock is ahead
                    "oldest_age_s": round(max(0, now - b.oldest_ms) / 1000, 3)
                    if b.oldest_ms
                    else 0,
                }
            )
        consumers = [
            {
                "account": key[0],
                "queue": key[1],
                "worker": d.worker,
                "inflight_batches": d.inflight,
                "last_batch": d.last_outcome,
            }
            for key, d in sorted(src.dispatchers.items())
        ]
        report: dict[str, Any] = {
            "state": src.state,
            "workers": [w.name for w in src.config.workers],  # Python and JavaScript
            "bindings": [
                {"worker": w.name, "kind": b.kind, "name": b.name, "target": b.target}
                for w in src.config.workers
                for b in w.bindings()
            ],
            "queues": queues,
            "consumers": consumers,
        }
        if src.workerd_state is not None:
            report["workerd"] = src.workerd_state
        return report


def _loopback(request: web.Request) -> bool:
    try:
        return ipaddress.ip_address(request.remote or "").is_loopback
    except ValueError:
        return False
