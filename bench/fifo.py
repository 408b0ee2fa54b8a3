"""FIFO queue benchmarks (issue 14), each with its peer measured in the same run:

* fifo_e2e / pg_fifo_e2e -- e2e_batch's load on a standard queue, then the same on a FIFO
  queue with 1,000 message groups (message i in group i % 1000, sendBatch of 100 ->
  consumer batch 100 -> ackAll), alternating which goes first; messages/s of both and
  FIFO's over standard's.
* fifo_hot_group / pg_fifo_hot_group -- claims of other groups with one hot group of
  1,000,000 messages waiting behind its in-flight head, against the same claims on a queue
  without it: the store's own claim and settle (batches of 100) in this process, so that
  only the head-of-line scan is measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import Bench, Consumer, Setup

from ocd.store import Claim, DeadLetter, NewMessage, QueueSettings, Store, make_store

FIFO_GROUPS = 1000
HOT_FILL_BATCH = 1000
NO_DLQ = DeadLetter(None)


def fifo_setup(work: Path, queue: str, dsn: str | None) -> Setup:
    return Setup(work / "data", {"QUEUE": queue}, (Consumer(queue),), dsn=dsn)


# run.py's helpers, handed in: ``store(bench, label, postgres)`` (a DSN of a fresh database,
# or None for SQLite) and ``produce_and_consume(daemon, spec, pg)``
StoreOf = Callable[..., Any]
Produce = Callable[..., Any]


async def fifo_e2e_run(
    bench: Bench,
    name: str,
    run: int,
    sizes: Any,
    postgres: bool,
    store_of: StoreOf,
    produce: Produce,
) -> dict[str, Any]:
    """One standard and one FIFO e2e run (order alternating by run) and their ratio."""
    spec = {"mode": "batch", "total": sizes.e2e_total, "tasks": sizes.e2e_tasks}
    fifo_spec = {**spec, "groups": FIFO_GROUPS}
    out: dict[str, Any] = {}
    order = [("standard", "bench", spec), ("fifo", "bench.fifo", fifo_spec)]
    if run % 2 == 0:
        order.reverse()
    for kind, queue, s in order:
        label = f"{name}-{kind}"
        with bench.workdir(label) as work, store_of(bench, label, postgres) as dsn:
            async with bench.daemon(f"{label}-{run}", work, fifo_setup(work, queue, dsn)) as d:
                out[kind] = await produce(d, s, bench.pg if postgres else None)
    out["ratio"] = out["fifo"]["e2e_msg_s"] / out["standard"]["e2e_msg_s"]
    return out


def _messages(group: str, start: int, n: int, now: int) -> list[NewMessage]:
    return [
        NewMessage(
            f"{group}-{i}".ljust(32, "0")[:32], "json", b"{}", now, now, group, f"{group}-{i}"
        )
        for i in range(start, start + n)
    ]


async def _claim_rate(store: Store, hot: int, others: int) -> dict[str, float]:
    now = int(time.time() * 1000)
    q = await store.ensure_queue("hot.fifo", "local", QueueSettings(), now)
    fill_started = time.perf_counter()
    for start in range(0, hot, HOT_FILL_BATCH):
        await store.enqueue_fifo(q, _messages("hot", start, min(HOT_FILL_BATCH, hot - start), now))
    fill_s = time.perf_counter() - fill_started
    if hot:  # its head goes out and stays out: the million wait behind it
        held = await store.claim(q, Claim(1, now, now + 3_600_000, 10, NO_DLQ))
        assert len(held.deliveries) == 1
    per_group = others // FIFO_GROUPS
    for g in range(FIFO_GROUPS):
        await store.enqueue_fifo(q, _messages(f"g{g}", 0, per_group, now))
    total = per_group * FIFO_GROUPS
    done = 0
    claims = 0
    started = time.perf_counter()
    while done < total:
        t = int(time.time() * 1000)
        c = await store.claim(q, Claim(100, t, t + 60_000, 10, NO_DLQ))
        if not c.deliveries:
            raise RuntimeError(f"claims stalled after {done} of {total} messages")
        assert all(d.group != "hot" for d in c.deliveries)
        await store.settle(q, [d.seq for d in c.deliveries], [], [], NO_DLQ, t)
        done += len(c.deliveries)
        claims += 1
    elapsed = time.perf_counter() - started
    return {"claim_msg_s": total / elapsed, "claims": claims, "fill_s": round(fill_s, 1)}


async def fifo_hot_group_run(
    bench: Bench, name: str, run: int, sizes: Any, postgres: bool, store_of: StoreOf
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    order = [("without", 0), ("with", sizes.backlog_deep)]
    if run % 2 == 0:
        order.reverse()
    for kind, hot in order:
        label = f"{name}-{kind}"
        with bench.workdir(label) as work, store_of(bench, label, postgres) as dsn:
            if dsn is None:
                store = make_store("sqlite", data_dir=work / "data")
            else:
                store = make_store("postgres", dsn=dsn)
            await store.open(int(time.time() * 1000))
            try:
                out[kind] = await _claim_rate(store, hot, sizes.fifo_others)
            finally:
                await store.close()
    out["hot_messages"] = sizes.backlog_deep
    out["ratio"] = out["with"]["claim_msg_s"] / out["without"]["claim_msg_s"]
    return out
