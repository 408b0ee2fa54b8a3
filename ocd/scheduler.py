"""Cron triggers: call each worker's ``scheduled(controller, env, ctx)`` when its schedules
come due, durably and once across every node.

Each pass looks at every schedule's latest due minute at or before now. A tick newer than the
last one claimed is claimed in the store (``claim_cron_tick``) and, if this node won it, run.
So a node that was down while ticks came due runs the schedule once when it is back (for
the latest of them, not once per tick), and of several nodes exactly one runs each tick. A
schedule seen for the first time starts from now: its past ticks are recorded, not run.

A run that raises or times out is logged (``cron_failed``) and counted in
``ocd_cron_runs{outcome}``; it is not retried (Cloudflare does not retry cron runs either).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import runtime
from ocd import cron
from ocd.clock import Clock
from ocd.errors import HandlerThrew, StoreError
from ocd.loader import Handler
from ocd.metrics import Metrics
from ocd.store import Coordination, Lifecycle

log = logging.getLogger(__name__)

MAX_NAP_S = 30.0  # the loop looks again at least this often (a clock that jumps, reloads)


@dataclass(frozen=True, slots=True)
class Schedule:
    worker: str
    cron: cron.Cron
    handler: Handler
    env: runtime.Env
    timeout_s: float

    @property
    def key(self) -> str:
        """The schedule's name in the store: its worker and its expression."""
        return f"{self.worker}|{self.cron.expr}"


@dataclass(frozen=True, slots=True)
class Run:
    worker: str
    cron: str
    scheduled_ms: int
    outcome: str  # "ok", "exception" or "timeout"


class SchedulerStore(Lifecycle, Coordination, Protocol):
    """What the scheduler uses of the store: cron ticks, claimed for this node (``node_id``)."""


class Scheduler:
    def __init__(
        self,
        store: SchedulerStore,
        clock: Clock,
        metrics: Metrics,
        schedules: Sequence[Schedule] = (),
    ) -> None:
        self.store = store
        self.clock = clock
        self.metrics = metrics
        self.schedules: list[Schedule] = list(schedules)
        self._last: dict[str, int] | None = None  # schedule key -> last claimed tick
        self._running: set[asyncio.Task[Run]] = set()
        self._changed = asyncio.Event()

    def set_schedules(self, schedules: Sequence[Schedule]) -> None:
        """Swap the schedules (a reload); runs under way finish."""
        self.schedules = list(schedules)
        self._changed.set()

    async def run(self) -> None:
        """The loop: a pass, then a nap until the next tick is due (or the schedules change)."""
        while True:
            try:
                await self.run_due()
            except StoreError as e:  # the database is away: the next pass tries again
                log.warning("cron pass failed: %s", e, extra={"event": "cron_pass_failed"})
            now = self.clock()
            upcoming = [s.cron.next_after(now) for s in self.schedules]
            nap = min([(t - now) / 1000 for t in upcoming] + [MAX_NAP_S])
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), max(nap, 0.05))

    async def run_due(self) -> list[asyncio.Task[Run]]:
        """One pass: claim and start every schedule whose latest tick has not run yet;
        returns the runs started (``idle()`` waits for them)."""
        now = self.clock()
        if self._last is None:
            self._last = await self.store.cron_last_ticks()
        started: list[asyncio.Task[Run]] = []
        for s in self.schedules:
            due = s.cron.latest_at_or_before(now)
            last = self._last.get(s.key)
            if due is None or (last is not None and due <= last):
                continue
            claimed = await self.store.claim_cron_tick(s.key, due, self.store.node_id)
            self._last[s.key] = max(due, last or due)
            if not claimed:
                continue  # another node has it, or it ran already
            if last is None:  # first seen: start from now, without running the past
                continue
            started.append(self._start(s, due))
        return started

    def _start(self, s: Schedule, due_ms: int) -> asyncio.Task[Run]:
        task = asyncio.create_task(self.execute(s, due_ms), name=f"ocd-cron-{s.key}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return task

    async def trigger(self, expr: str | None, worker: str | None = None) -> list[Run]:
        """Run schedules now, by hand (``POST /__ocd/scheduled``): the workers with a
        scheduled() handler, narrowed to ``worker`` and to those listing ``expr`` if any do.
        Nothing is recorded in the store."""
        candidates = [s for s in self.schedules if worker is None or s.worker == worker]
        if expr is not None and any(s.cron.expr == expr for s in candidates):
            candidates = [s for s in candidates if s.cron.expr == expr]
        by_worker: dict[str, Schedule] = {}
        for s in candidates:
            by_worker.setdefault(s.worker, s)
        now = self.clock()
        return list(
            await asyncio.gather(
                *(
                    self.execute(s, now, expr if expr is not None else s.cron.expr)
                    for s in by_worker.values()
                )
            )
        )

    async def execute(self, s: Schedule, scheduled_ms: int, expr: str | None = None) -> Run:
        """Call the handler with its controller, under the worker's handler timeout; its
        ``waitUntil`` work is part of the run."""
        shown = expr if expr is not None else s.cron.expr
        controller = runtime.ScheduledController(shown, scheduled_ms)
        ctx = runtime.ExecutionContext()
        started = time.monotonic()
        outcome = "ok"
        try:
            async with asyncio.timeout(s.timeout_s):
                await s.handler(controller, s.env, ctx)
                if ctx.tasks:
                    await asyncio.gather(*ctx.tasks)
        except TimeoutError:
            outcome = "timeout"
            log.error(
                "worker %s: scheduled() for %r timed out after %.0f s",
                s.worker,
                shown,
                s.timeout_s,
                extra={"event": "cron_failed", "worker": s.worker, "cron": shown},
            )
        except HandlerThrew as e:  # its stack is logged already, in the worker's own files
            outcome = "exception"
            log.error(
                "worker %s: scheduled() for %r threw %s",
                s.worker,
                shown,
                e.summary,
                extra={
                    "event": "cron_failed",
                    "worker": s.worker,
                    "cron": shown,
                    "error": e.summary,
                },
            )
        except Exception:
            outcome = "exception"
            log.exception(
                "worker %s: scheduled() for %r raised",
                s.worker,
                shown,
                extra={"event": "cron_failed", "worker": s.worker, "cron": shown},
            )
        self.metrics.cron_runs.labels(s.worker, shown, outcome).inc()
        if outcome == "ok":
            log.info(
                "worker %s: cron %r ran (%.0f ms)",
                s.worker,
                shown,
                (time.monotonic() - started) * 1000,
                extra={"event": "cron_ran", "worker": s.worker, "cron": shown},
            )
        return Run(s.worker, shown, scheduled_ms, outcome)

    async def idle(self, timeout_s: float | None = None) -> None:
        """Wait for the runs under way (shutdown, tests)."""
        if self._running:
            await asyncio.wait(set(self._running), timeout=timeout_s)

    def cancel(self) -> None:
        for task in self._running:
            task.cancel()


def schedules_of(workers: Sequence[Any], envs: dict[str, runtime.Env]) -> list[Schedule]:
    """Every (worker, cron) of loaded workers that have a scheduled() handler."""
    out: list[Schedule] = []
    for w in workers:
        if w.scheduled is None:
            continue
        for expr in w.config.crons:
            out.append(
                Schedule(
                    w.config.name,
                    cron.parse(expr),
                    w.scheduled,
                    envs[w.config.name],
                    w.config.handler_timeout_s,
                )
            )
    return out
