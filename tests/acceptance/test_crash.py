"""kill -9 during a steady send/consume load loses nothing that a send confirmed."""

from __future__ import annotations

import asyncio
import collections

from tests.acceptance.conftest import produce, recorder_config, records
from tests.helpers import eventually

BATCH, CONCURRENCY = 10, 2
CONSUMER = f"""
[[workers.queues.consumers]]
queue = "jobs"
max_batch_size = {BATCH}
max_batch_timeout = 0
max_concurrency = {CONCURRENCY}
"""


async def test_kill_9_under_load_loses_no_confirmed_message(tmp_path, ocd_processes):
    cfg = recorder_config(tmp_path, CONSUMER)
    first = ocd_processes(cfg)
    port = first.wait_started()

    confirmed: set[int] = set()
    stop = asyncio.Event()
    producers = [
        asyncio.create_task(produce(port, confirmed, stop, start=k * 10_000_000)) for k in range(4)
    ]
    # Steady load: wait until plenty was sent and consumed, then kill mid-stream.
    await eventually(lambda: len(confirmed) >= 2000 and len(records(tmp_path)) >= 500, 60)
    first.kill9()
    stop.set()
    await asyncio.gather(*producers)
    before = records(tmp_path)
    assert before, "nothing was consumed before the kill"

    second = ocd_processes(cfg)
    second.wait_started()

    def delivered() -> set[int]:
        return {r["body"]["n"] for r in records(tmp_path)}

    await eventually(lambda: confirmed <= delivered(), 60)

    # Beyond the at-least-once redelivery of batches in flight at the kill, nothing is
    # delivered twice; a redelivery counts the crashed attempt.
    seen: dict[str, list[dict]] = collections.defaultdict(list)
    for r in records(tmp_path):
        seen[r["id"]].append(r)
    dupes = {k: v for k, v in seen.items() if len(v) > 1}
    assert len(dupes) <= BATCH * CONCURRENCY, f"{len(dupes)} messages delivered twice"
    for rows in dupes.values():
        assert len(rows) == 2
        assert rows[0]["pid"] == first.proc.pid and rows[1]["pid"] == second.proc.pid
        assert rows[1]["attempts"] == rows[0]["attempts"] + 1
    assert second.stop() == 0
