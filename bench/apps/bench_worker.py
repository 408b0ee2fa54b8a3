"""The benchmark worker: produces inside the daemon and counts what its consumer receives.

Its state lives in module globals (one module instance per worker in the daemon process),
and ``bench/run.py`` reads it over HTTP:

* ``POST /produce {"mode": "batch"|"single"|"paced", "total": N, "tasks": T, ...}`` sends
  (``"reset": true`` first zeroes the consumer's counters: another block on one daemon)
  ``N`` messages from ``T`` concurrent tasks (``sendBatch`` of 100, single ``send`` calls, or
  one ``send`` every ``interval_ms`` carrying its send time) and answers when all are stored;
* ``GET /stats`` reports the counters, with ``perf_counter`` timestamps taken in the daemon;
* ``GET /latencies`` returns the send->handler latency of every timed message, in seconds.

The consumer's ``done_at`` is the moment it has counted ``target`` messages: ``total`` of
the last ``/produce``, or the ``TARGET`` var when the backlog is already there at start.
``last_batch_at`` is when the latest batch arrived: with several daemons on one PostgreSQL
database each counts only what it consumed, and the bench sums them (``perf_counter`` is
the machine's monotonic clock, so the daemons' timestamps compare).
"""

import asyncio
import os
import time
from urllib.parse import urlparse

from workers import Response, WorkerEntrypoint

BATCH = 100

STATE = {
    "consumed": 0,
    "batches": 0,
    "target": None,
    "first_batch_at": None,  # perf_counter when the first batch reached the handler
    "first_batch_size": 0,
    "last_batch_at": None,  # perf_counter when the latest batch reached the handler
    "done_at": None,  # perf_counter when ``consumed`` reached ``target``
    "done_count": None,  # ``consumed`` at that moment
    "produce_started_at": None,
    "produce_done_at": None,
    "sent": 0,
}
LATENCIES: list[float] = []
_PROFILE = None


def _start_profile():
    """``OCD_BENCH_PROFILE=path`` profiles the daemon's event loop thread with cProfile."""
    global _PROFILE
    if os.environ.get("OCD_BENCH_PROFILE") and _PROFILE is None:
        import cProfile

        _PROFILE = cProfile.Profile()
        _PROFILE.enable()


_start_profile()


async def _produce_batches(queue, next_index, total, groups=0):
    while (start := next_index()) is not None:
        end = min(start + BATCH, total)
        if groups:  # a FIFO queue: message i in group i % groups
            items = [
                {
                    "body": {"i": i},
                    "messageGroupId": f"g{i % groups}",
                    "messageDeduplicationId": str(i),
                }
                for i in range(start, end)
            ]
        else:
            items = [{"body": {"i": i}} for i in range(start, end)]
        await queue.sendBatch(items)
        STATE["sent"] += end - start


async def _produce_singles(queue, next_index, total):
    while (i := next_index()) is not None:
        await queue.send({"i": i})
        STATE["sent"] += 1


async def _produce_paced(queue, total, interval_s):
    """One message at a time, each carrying ``perf_counter()`` taken just before ``send``."""
    start = time.perf_counter()
    for i in range(total):
        await queue.send({"i": i, "t": time.perf_counter()})
        STATE["sent"] += 1
        delay = start + (i + 1) * interval_s - time.perf_counter()
        await asyncio.sleep(max(delay, 0))


def _counter(total, step):
    handed = 0

    def next_index():
        nonlocal handed
        if handed >= total:
            return None
        start = handed
        handed += step
        return start

    return next_index


async def produce(queue, spec):
    mode = spec["mode"]
    total = int(spec["total"])
    tasks = int(spec.get("tasks", 1))
    if spec.get("reset"):  # a new measured block on the same daemon
        STATE.update(consumed=0, batches=0, done_at=None, done_count=None, first_batch_at=None)
    STATE["target"] = total
    STATE["produce_started_at"] = time.perf_counter()
    if mode == "batch":
        next_index = _counter(total, BATCH)
        groups = int(spec.get("groups", 0))
        work = [_produce_batches(queue, next_index, total, groups) for _ in range(tasks)]
    elif mode == "single":
        next_index = _counter(total, 1)
        work = [_produce_singles(queue, next_index, total) for _ in range(tasks)]
    elif mode == "paced":
        work = [_produce_paced(queue, total, float(spec.get("interval_ms", 5)) / 1000)]
    else:
        raise ValueError(f"unknown mode {mode!r}")
    await asyncio.gather(*work)
    STATE["produce_done_at"] = time.perf_counter()
    return dict(STATE)


def _dump_profile(path):
    if _PROFILE is None:
        return False
    _PROFILE.disable()
    _PROFILE.dump_stats(path)
    _PROFILE.enable()
    return True


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        path = urlparse(request.url).path
        if path == "/stats":
            return Response.json({**STATE, "now": time.perf_counter()})
        if path == "/latencies":
            return Response.json(LATENCIES)
        if path == "/profile" and request.method == "POST":
            return Response.json({"dumped": _dump_profile(os.environ["OCD_BENCH_PROFILE"])})
        if path == "/produce" and request.method == "POST":
            spec = await request.json()
            queue = getattr(self.env, spec.get("binding", "QUEUE"))
            return Response.json(await produce(queue, spec))
        return Response("not found", status=404)

    async def queue(self, batch, env, ctx):
        now = time.perf_counter()
        if STATE["first_batch_at"] is None:
            STATE["first_batch_at"] = now
            STATE["first_batch_size"] = len(batch.messages)
        for m in batch.messages:
            sent = m.body.get("t")
            if sent is not None:
                LATENCIES.append(now - sent)
        STATE["consumed"] += len(batch.messages)
        STATE["batches"] += 1
        STATE["last_batch_at"] = now
        target = STATE["target"] or int(getattr(env, "TARGET", 0) or 0)
        if target and STATE["done_at"] is None and STATE["consumed"] >= target:
            STATE["done_at"] = time.perf_counter()
            STATE["done_count"] = STATE["consumed"]
        batch.ackAll()
