"""A database as a released ocd left it, for the upgrade tests (``test_upgrade.py``).

Run once with the release's code to write the fixture both backends open in
``tests/data/upgrade/``::

    git worktree add /tmp/release <commit>
    PYTHONPATH=/tmp/release .venv/bin/python tests/store/upgrade_release.py sqlite DIR
    PYTHONPATH=/tmp/release .venv/bin/python tests/store/upgrade_release.py postgres DSN

It uses only the store's public operations of that release, at the fixed clock ``T0``, and
leaves every state a user's database can be in: messages waiting, delayed, retrying later,
leased by a push consumer and by a pull consumer, with spent attempts; FIFO groups with a
leased head, a retrying head and deduplication windows; a pull consumer, a move task, SQS
tags and attributes, a paused queue, a cron tick and the lease-signing key. The names below
are what the tests check after an upgrade.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

T0 = 1_800_000_000_000
MINUTE = 60_000

WAITING = [(f"{i:032x}", "json", b'{"n": %d}' % i) for i in range(1, 6)]
DELAYED = ("d" * 32, "text", b"in an hour", T0 + 60 * MINUTE)
RETRYING = ("e" * 32, "text", b"retried", T0 + 10 * MINUTE)  # claimed once, retried
PUSH_LEASED = ("a" * 32, "bytes", b"\x00\x01 push")  # under a PUSH lease until T0 + 5 min
PULL_LEASED = ("b" * 32, "json", b'{"pull": true}')  # under a PULL lease until T0 + 5 min
TWICE = ("c" * 32, "text", b"twice")  # claimed and retried twice, ready now
ATTRS = b'{"sqs": "attributes"}'
LEASE_UNTIL = T0 + 5 * MINUTE

# orders.fifo: group "a" has its head leased (push); group "b" its head retrying at
# T0 + 10 min; group "c" only waits. (id, group, dedup id)
FIFO = [
    ("f1".ljust(32, "0"), "a", "dedup-a1"),
    ("f2".ljust(32, "0"), "b", "dedup-b1"),
    ("f3".ljust(32, "0"), "a", "dedup-a2"),
    ("f4".ljust(32, "0"), "c", "dedup-c1"),
    ("f5".ljust(32, "0"), "b", "dedup-b2"),
    ("f6".ljust(32, "0"), "c", "dedup-c2"),
]
CONSUMER_ID = "9" * 32
TASK_ID = "7" * 32
TAGS = {"team": "billing"}
SQS_ATTRS = {"ReceiveMessageWaitTimeSeconds": "5"}
CRON = "*/5 * * * *"


async def write(store: object) -> None:
    from ocd.store import (
        Claim,
        DeadLetter,
        LeaseKind,
        MoveTaskRow,
        NewMessage,
        PullConsumer,
        QueueExtras,
        QueueSettings,
        Retry,
    )

    s = store
    no_dlq = DeadLetter(None)
    jobs = await s.ensure_queue(  # type: ignore[attr-defined]
        "jobs", "local", QueueSettings(message_retention_period_s=7 * 86_400), T0
    )
    dlq = await s.ensure_queue("jobs-dlq", "local", None, T0)  # type: ignore[attr-defined]
    await s.ensure_queue(  # type: ignore[attr-defined]
        "paused", "acme", QueueSettings(delivery_delay_s=30, delivery_paused=True), T0
    )
    await s.put_pull_consumer(  # type: ignore[attr-defined]
        jobs, PullConsumer(jobs.key, CONSUMER_ID, T0, "jobs-dlq", 7, 2, 45_000, 3)
    )
    await s.set_queue_extras(jobs, QueueExtras(SQS_ATTRS, TAGS))  # type: ignore[attr-defined]

    def msg(m: tuple[str, str, bytes], sent: int, visible: int = T0) -> NewMessage:
        return NewMessage(m[0], m[1], m[2], sent, visible, attrs=ATTRS)

    # the ones claimed first, so that the claims take them and nothing else
    await s.enqueue(jobs, [msg(TWICE, T0 - 5 * MINUTE)])  # type: ignore[attr-defined]
    for _ in range(2):
        [d] = (await s.claim(jobs, Claim(1, T0, LEASE_UNTIL, 10, no_dlq))).deliveries  # type: ignore[attr-defined]
        await s.settle(jobs, [], [Retry(d.seq, T0)], [], no_dlq, T0)  # type: ignore[attr-defined]
    # TWICE is now behind nothing: leave it ready, attempts 2; it is claimed last below.
    await s.enqueue(jobs, [msg(RETRYING, T0 - 4 * MINUTE)])  # type: ignore[attr-defined]
    await s.enqueue(jobs, [msg(PUSH_LEASED, T0 - 3 * MINUTE)])  # type: ignore[attr-defined]
    await s.enqueue(jobs, [msg(PULL_LEASED, T0 - 2 * MINUTE)])  # type: ignore[attr-defined]
    claim = Claim(3, T0, LEASE_UNTIL, 10, no_dlq)
    got = (await s.claim(jobs, claim)).deliveries  # type: ignore[attr-defined]
    by_id = {d.id: d for d in got}
    assert set(by_id) == {TWICE[0], RETRYING[0], PUSH_LEASED[0]}, by_id
    # TWICE and PUSH_LEASED under this push lease: TWICE is handed back (attempt refunded)
    await s.release(jobs, [by_id[TWICE[0]].seq], T0)  # type: ignore[attr-defined]
    await s.settle(  # type: ignore[attr-defined]
        jobs, [], [Retry(by_id[RETRYING[0]].seq, RETRYING[3])], [], no_dlq, T0
    )
    pulled = (await s.claim(jobs, Claim(2, T0, LEASE_UNTIL, 10, no_dlq, LeaseKind.PULL))).deliveries  # type: ignore[attr-defined]
    pull_ids = {d.id for d in pulled}
    assert PULL_LEASED[0] in pull_ids, pull_ids
    await s.release(  # type: ignore[attr-defined]
        jobs, [d.seq for d in pulled if d.id != PULL_LEASED[0]], T0, LeaseKind.PULL
    )
    await s.enqueue(jobs, [msg(m, T0 + i) for i, m in enumerate(WAITING)])  # type: ignore[attr-defined]
    await s.enqueue(jobs, [msg(DELAYED[:3], T0, DELAYED[3])])  # type: ignore[attr-defined]
    await s.enqueue(dlq, [NewMessage("0" * 32, "text", b"dead", T0 - MINUTE, T0)])  # type: ignore[attr-defined]

    orders = await s.ensure_queue(  # type: ignore[attr-defined]
        "orders.fifo", "local", QueueSettings(content_based_deduplication=True), T0
    )
    await s.enqueue_fifo(  # type: ignore[attr-defined]
        orders,
        [
            NewMessage(mid, "text", f"{mid[:2]}".encode(), T0 + i, T0, grp, dd)
            for i, (mid, grp, dd) in enumerate(FIFO)
        ],
    )
    leased = (await s.claim(orders, Claim(6, T0, LEASE_UNTIL, 10, no_dlq))).deliveries  # type: ignore[attr-defined]
    by_id = {d.id: d for d in leased}
    assert set(by_id) == {m[0] for m in FIFO}, by_id
    # a's head stays leased; b's head is retried (its group's later message under the
    # lease comes back with it); everything else is handed back
    keep = {FIFO[0][0], FIFO[1][0], FIFO[4][0]}
    await s.release(orders, [d.seq for d in leased if d.id not in keep], T0)  # type: ignore[attr-defined]
    await s.settle(  # type: ignore[attr-defined]
        orders, [], [Retry(by_id[FIFO[1][0]].seq, T0 + 10 * MINUTE)], [], no_dlq, T0
    )

    await s.create_move_task(  # type: ignore[attr-defined]
        MoveTaskRow(
            TASK_ID, "local", dlq.queue_id, "jobs-dlq", jobs.queue_id, "jobs", 1, T0,
            spec="{}", node=s.node_id,  # type: ignore[attr-defined]
        ),
        T0,
    )  # fmt: skip
    await s.claim_cron_tick(CRON, T0, s.node_id)  # type: ignore[attr-defined]
    await s.secret("lease-signing-key")  # type: ignore[attr-defined]
    await s.save_clock_mark(T0)  # type: ignore[attr-defined]


async def main(backend: str, where: str) -> None:
    if backend == "sqlite":
        from ocd.store import SqliteStore

        store: object = SqliteStore(Path(where))
    else:
        from ocd.store.postgres import PostgresStore

        store = PostgresStore(where)
    await store.open(T0)  # type: ignore[attr-defined]
    try:
        await write(store)
    finally:
        # a crash, not a clean stop: a clean close hands PUSH leases back, and the release
        # under test must be opened with them still held
        if backend == "sqlite":
            await _crash_sqlite(store)
        else:
            await _crash_postgres(store)


async def _crash_sqlite(store: object) -> None:
    # Close the connections without the clean-close steps (returning leases), then drop
    # the lock file: what kill -9 leaves, with every commit checkpointed.
    import sqlite3

    path = store.path  # type: ignore[attr-defined]
    await store._close_connections()  # type: ignore[attr-defined]
    store._unlock()  # type: ignore[attr-defined]
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


async def _crash_postgres(store: object) -> None:
    for t in store.background():  # type: ignore[attr-defined]
        t.cancel()
    pool = store._pool  # type: ignore[attr-defined]
    if pool is not None:
        pool.terminate()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
