"""What only the PostgreSQL backend does: several nodes on one database, node heartbeats,
migrations that nodes starting together run once, pinned query plans, and outages.

Each test has a database of its own on the session's throw-away server (``pg_dsn``)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import asyncpg
import pytest

from ocd.dsn import redact_dsn
from ocd.errors import QueueNotFound, StoreCorrupt, StoreUnavailable
from ocd.store import Claim, DeadLetter, LeaseKind, NewMessage, QueueSettings, Retry
from ocd.store.postgres import PostgresStore
from ocd.store.postgres import fifo_sql as pg_fifo_sql
from ocd.store.postgres import sql as pg_sql
from tests import pg
from tests.helpers import eventually

T0 = 1_800_000_000_000
NO_DLQ = DeadLetter(None)


def msgs(n, at=T0, prefix="m"):
    return [NewMessage(f"{prefix}{i:031d}", "json", b'"x"', at, at) for i in range(n)]


@pytest.fixture
async def nodes(pg_dsn):
    """``await nodes(n)`` -> n open stores (nodes) on the test's database."""
    opened: list[PostgresStore] = []

    async def make(n: int = 2, **options) -> list[PostgresStore]:
        made = [PostgresStore(pg_dsn, **options) for _ in range(n)]
        await asyncio.gather(*(s.open(T0) for s in made))
        opened.extend(made)
        return made

    yield make
    for s in opened:
        await s.close()


async def test_a_queue_created_on_one_node_is_seen_and_usable_on_another(nodes):
    a, b = await nodes(2)
    q = await a.create_queue("jobs", "local", QueueSettings(), T0)
    await eventually(lambda: b.queue("jobs") is not None, timeout=3)
    await b.enqueue(b.queue("jobs"), msgs(2))
    assert (await a.backlog(q)).count == 2
    await a.update_queue(q, QueueSettings(delivery_paused=True), T0 + 1)
    await eventually(lambda: b.queue("jobs").settings.delivery_paused, timeout=3)


async def test_claims_on_two_nodes_racing_sends_take_every_message_once(nodes):
    """The log's cursor never passes a message whose send had not committed when a claim
    read the run: sends (and retries) from both nodes race claims on both, and every
    message is delivered, exactly once once acked, with nothing left behind."""
    a, b = await nodes(2)
    q = await a.create_queue("race", "local", QueueSettings(), T0)
    await eventually(lambda: b.queue("race") is not None, timeout=3)
    sent: set[str] = set()
    got: list[str] = []
    sending = True

    async def send(node: PostgresStore, tag: str) -> None:
        for i in range(30):
            batch = msgs(20, prefix=f"{tag}{i:03d}-")
            await node.enqueue(q, batch)
            sent.update(m.id for m in batch)

    async def consume(node: PostgresStore) -> None:
        retried: set[str] = set()
        while True:
            c = await node.claim(q, Claim(25, T0, T0 + 600_000, 10, NO_DLQ))
            if not c.deliveries:
                if not sending and (await node.ready(q, T0, 1)).count == 0:
                    return
                await asyncio.sleep(0)
                continue
            acks = [d.seq for d in c.deliveries if d.id in retried or hash(d.id) % 7]
            again = [Retry(d.seq, T0) for d in c.deliveries if d.seq not in set(acks)]
            retried.update(d.id for d in c.deliveries if d.seq not in set(acks))
            got.extend(d.id for d in c.deliveries if d.seq in set(acks))
            await node.settle(q, acks, again, [], NO_DLQ, T0)

    consumers = [asyncio.create_task(consume(n)) for n in (a, b, a, b)]
    await asyncio.gather(send(a, "a"), send(b, "b"), send(a, "c"))
    sending = False
    await asyncio.wait_for(asyncio.gather(*consumers), 60)
    assert len(got) == len(set(got)) == len(sent) == 1800
    assert set(got) == sent
    assert (await a.backlog(q)).count == 0
    async with a._db("read") as c:
        assert await c.fetchval("SELECT count(*) FROM ocd_leases") == 0
        assert await c.fetchval("SELECT count(*) FROM ocd_held") == 0


async def test_a_send_to_a_queue_deleted_on_another_node_is_queue_not_found(nodes):
    a, b = await nodes(2)
    await a.create_queue("jobs", "local", QueueSettings(), T0)
    await eventually(lambda: b.queue("jobs") is not None, timeout=3)
    stale = b.queue("jobs")
    await a.delete_queue(a.queue("jobs"))
    with pytest.raises(QueueNotFound):  # before b's catalogue heard of it: the database says
        await b.enqueue(stale, msgs(1))
    await eventually(lambda: b.queue("jobs") is None, timeout=3)


async def test_a_send_on_one_node_wakes_a_watcher_on_another(nodes):
    a, b = await nodes(2)
    q = await a.create_queue("jobs", "local", QueueSettings(), T0)
    await eventually(lambda: b.queue("jobs") is not None, timeout=3)
    woken = b.watch(b.queue("jobs"))
    await a.enqueue(q, msgs(1))
    await asyncio.wait_for(woken.wait(), 3)


async def test_claims_from_two_nodes_never_share_a_message(nodes):
    a, b = await nodes(2)
    q = await a.create_queue("jobs", "local", QueueSettings(), T0)
    await a.enqueue(q, msgs(300))
    claims = await asyncio.gather(
        *(s.claim(q, Claim(10, T0, T0 + 60_000, 4, NO_DLQ)) for s in (a, b) for _ in range(20))
    )
    ids = [d.id for c in claims for d in c.deliveries]
    assert len(ids) == len(set(ids)) == 300


async def test_max_batches_is_a_limit_for_the_whole_deployment(nodes):
    a, b = await nodes(2)
    q = await a.create_queue("jobs", "local", QueueSettings(), T0)
    await a.enqueue(q, msgs(10))
    got = await asyncio.gather(
        *(s.claim(q, Claim(2, T0, T0 + 60_000, 4, NO_DLQ, max_batches=1)) for s in (a, b, a, b))
    )
    assert sorted(len(c.deliveries) for c in got) == [0, 0, 0, 2]


async def test_a_pull_lease_from_one_node_is_acked_on_another(nodes):
    a, b = await nodes(2)
    q = await a.create_queue("jobs", "local", QueueSettings(), T0)
    await a.enqueue(q, msgs(1))
    [d] = (await a.claim(q, Claim(1, T0, T0 + 30_000, 4, NO_DLQ, LeaseKind.PULL))).deliveries
    assert await a.secret("lease") == await b.secret("lease")
    settled = await b.settle(q, [d.seq], [], [], NO_DLQ, T0)
    assert settled.acked == 1 and (await a.backlog(q)).count == 0


async def test_an_ack_drops_a_lease_once_none_of_its_messages_is_left(pg_dsn, nodes):
    """A batch's lease row goes with its last message (``ocd_ack``): acks naming every seq
    of its run, in any order and twice over, drop it at once; acks leaving one keep it until
    that one is acked; a message retried meanwhile (held apart) does not keep it, and its
    held row goes when it is acked in turn."""
    [a] = await nodes(1)
    q = await a.create_queue("jobs", "local", QueueSettings(), T0)
    await a.enqueue(q, msgs(10))
    lease = Claim(4, T0, T0 + 60_000, 4, NO_DLQ)
    first = (await a.claim(q, lease)).deliveries
    second = (await a.claim(q, lease)).deliveries
    third = (await a.claim(q, Claim(2, T0, T0 + 60_000, 4, NO_DLQ))).deliveries
    conn = await asyncpg.connect(pg_dsn)
    try:

        async def rows() -> tuple[int, int]:
            return tuple(
                await conn.fetchrow(
                    "SELECT (SELECT count(*) FROM ocd_leases), (SELECT count(*) FROM ocd_held)"
                )
            )

        assert await rows() == (3, 0)
        await a.settle(q, [d.seq for d in first[:3]], [], [], NO_DLQ, T0)
        assert await rows() == (3, 0)
        await a.settle(q, [first[3].seq], [], [], NO_DLQ, T0)
        assert await rows() == (2, 0)
        seqs = [d.seq for d in reversed(second)]
        assert (await a.settle(q, seqs + seqs[:2], [], [], NO_DLQ, T0)).acked == 4
        assert await rows() == (1, 0)
        held, left = third
        await a.settle(q, [], [Retry(held.seq, T0 + 1000)], [], NO_DLQ, T0)
        assert await rows() == (1, 1)
        await a.settle(q, [left.seq], [], [], NO_DLQ, T0)
        assert await rows() == (0, 1)
        [back] = (await a.claim(q, Claim(4, T0 + 1000, T0 + 60_000, 4, NO_DLQ))).deliveries
        assert back.id == held.id
        await a.settle(q, [back.seq], [], [], NO_DLQ, T0 + 1000)
        assert await rows() == (0, 0) and (await a.backlog(q)).count == 0
    finally:
        await conn.close()


_HOLDER = textwrap.dedent(
    """
    import asyncio, sys, time
    from ocd.store import Claim, DeadLetter, NewMessage, QueueSettings
    from ocd.store.postgres import PostgresStore

    async def main():
        s = PostgresStore(sys.argv[1], node_heartbeat_s=1)
        now = int(time.time() * 1000)
        await s.open(now)
        q = await s.ensure_queue("jobs", "local", None, now)
        await s.enqueue(q, [NewMessage(f"{i:032x}", "json", b"1", now, now) for i in range(3)])
        c = await s.claim(q, Claim(2, now, now + 900_000, 4, DeadLetter(None)))
        print(len(c.deliveries), flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


async def test_push_leases_of_a_killed_node_come_back_after_its_heartbeat_lapses(pg_dsn, nodes):
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, pg_dsn], stdout=subprocess.PIPE, text=True
    )
    try:
        line = await asyncio.wait_for(asyncio.to_thread(holder.stdout.readline), 30)
        assert line.strip() == "2"
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        [b] = await nodes(1, node_heartbeat_s=1)
        q = b.queue("jobs")

        async def ready() -> bool:
            return (await b.ready(q, int(time.time() * 1000), 10)).count == 3

        started = time.monotonic()
        await eventually(ready, timeout=15)
        # long before the 900 s lease would have lapsed
        assert time.monotonic() - started < 60
        again = (await b.claim(q, Claim(3, int(time.time() * 1000), T0 * 2, 4, NO_DLQ))).deliveries
        assert sorted(d.attempts for d in again) == [1, 2, 2]  # the lost batch's attempt stays
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.stdout.close()


async def test_nodes_starting_together_on_an_empty_database_migrate_once(pg_dsn, nodes):
    await nodes(4)
    conn = await asyncpg.connect(pg_dsn)
    try:
        rows = await conn.fetch("SELECT version FROM ocd_schema")
        assert [r[0] for r in rows] == [len(pg_sql.MIGRATIONS)]
        assert await conn.fetchval("SELECT count(*) FROM ocd_nodes") == 4
    finally:
        await conn.close()


async def test_a_database_with_a_newer_schema_is_refused(pg_dsn):
    s = PostgresStore(pg_dsn)
    await s.open(T0)
    await s.close()
    conn = await asyncpg.connect(pg_dsn)
    await conn.execute("UPDATE ocd_schema SET version = 99")
    await conn.close()
    with pytest.raises(StoreCorrupt, match="newer than this ocd"):
        await PostgresStore(pg_dsn).open(T0)


async def test_an_unreachable_database_is_a_clear_unavailable_error_without_the_password():
    dsn = f"postgresql://ocd:hunter2@127.0.0.1:{pg.free_port()}/ocd"
    with pytest.raises(StoreUnavailable) as e:
        await PostgresStore(dsn).open(T0)
    assert "hunter2" not in str(e.value) and "ocd:***@127.0.0.1" in str(e.value)
    assert redact_dsn("host=db password=s3cret dbname=ocd") == "host=db password=*** dbname=ocd"


async def test_sends_fail_retryably_while_the_database_is_down_and_recover_by_themselves():
    reason = pg.why_unavailable()
    if reason is not None:
        pytest.skip(reason)
    cluster = pg.start_cluster()  # a server of its own: this test stops it
    try:
        s = PostgresStore(cluster.dsn)
        await s.open(T0)
        q = await s.create_queue("jobs", "local", QueueSettings(), T0)
        await s.enqueue(q, msgs(3))
        await asyncio.to_thread(cluster.stop_immediate)
        with pytest.raises(StoreUnavailable):
            await s.enqueue(q, msgs(1, prefix="lost"))
        with pytest.raises(StoreUnavailable):
            await s.claim(q, Claim(1, T0, T0 + 1000, 4, NO_DLQ))
        assert not s.available()
        await asyncio.to_thread(cluster.start)

        async def sent() -> bool:
            try:
                await s.enqueue(q, msgs(1, prefix="back"))
            except StoreUnavailable:
                return False
            return True

        await eventually(sent, timeout=20)
        await eventually(s.available, timeout=5)
        assert (await s.backlog(q)).count >= 4  # the three acknowledged ones are all there
        await s.close()
    finally:
        cluster.stop()


# ------------------------------------------------------------------ query plans

Q1 = 1 << 40  # the first seq of queue 1's ready band
F = 3  # the deep FIFO queue's key

# Statements that read ocd_messages. The standard queues' claim, re-append and release are
# functions (migrations/0010_log.sql), whose statements EXPLAIN does not show: they read
# messages by primary key only (a run from the cursor, seqs named).

_BROWSE = (1, T0, 100, -1, -1, 0, 1 << 62, 0, 10)  # from the start, any send time

HOT = {
    "READY": (pg_sql.READY, (1, T0, 10)),
    "FIFO_PUSH_LEASES_HELD": (pg_sql.FIFO_PUSH_LEASES_HELD, (F, T0)),
    "DELETE_SEQS": (pg_sql.DELETE_SEQS, (1, [Q1, Q1 + 1, Q1 + 2], 0)),
    "REMOVED": (pg_sql.REMOVED, (1, [Q1, Q1 + 1])),
    "HOLD": (pg_sql.HOLD, (1, [Q1, Q1 + 1], T0, [T0, T0])),
    "RETRY": (pg_sql.RETRY, (F, [1, 2], [T0, T0])),
    "RELEASE_SEQS": (pg_sql.RELEASE_SEQS, (F, T0, 1, [1, 2])),
    "PEEK": (pg_sql.PEEK, (F, T0, 10)),
    "PEEK_LOG": (pg_sql.PEEK_LOG, (1, T0, 10)),
    "BACKLOG": (pg_sql.BACKLOG, (1,)),
    "NOT_READY": (pg_sql.NOT_READY, (F, T0)),
    "RELEASE_ANY": (pg_fifo_sql.RELEASE_ANY, (F, T0, [1, 2])),
    "FIFO_INFO": (pg_fifo_sql.FIFO_INFO, (F, [1, 2])),
    "NOT_READY_LOG": (pg_sql.NOT_READY_LOG, (1, T0)),
    "EXPIRE_LOG": (pg_sql.EXPIRE_LOG, (1, T0 - 49_990, 5000, 0)),
    "EXPIRABLE": (pg_sql.EXPIRABLE, (T0 + 4 * 86_400_000 - 49_990,)),
    # and the rarer ones that read a queue's messages: no index starts with the queue for all
    # of them (migrations/0015_late.sql). Search, a standard queue's purge and a FIFO queue's
    # deletion read most of the deep queue, most of the table, where a scan is a fair plan.
    "BROWSE": (pg_sql.browse(False, "any"), _BROWSE),
    "BROWSE_NEWEST": (pg_sql.browse(True, "ready"), _BROWSE),
    "BROWSE_IN_ORDER": (pg_sql.browse_in_order(False, "any"), _BROWSE),
    "BROWSE_IN_ORDER_NEWEST": (pg_sql.browse_in_order(True, "ready"), _BROWSE),
    "BROWSE_FIFO": (pg_sql.browse(False, "any"), (F, *_BROWSE[1:])),
    "FIFO_SEARCH_WINDOW": (pg_sql.FIFO_SEARCH_WINDOW, (F, 200)),
    "FIFO_EXPIRE": (pg_fifo_sql.FIFO_EXPIRE, (F, T0 - 10, 5000, 0)),
    "LAST_SEQ": (pg_sql.LAST_SEQ, (F,)),
    "PURGE_CHUNK": (pg_sql.PURGE_CHUNK, (F, 100, 5000, 0)),
    "DELETE_QUEUE_ROWS": (pg_sql.DELETE_QUEUE_ROWS, (2,)),
}


def _scans(plan: dict) -> list[str]:
    """Every node of a JSON plan that reads ocd_messages or a FIFO queue's order rows
    (ocd_fifo_order), as 'Node Type'."""
    found = []
    if plan.get("Relation Name") in ("ocd_messages", "ocd_fifo_order"):
        found.append(plan["Node Type"])
    for child in plan.get("Plans", []):
        found += _scans(child)
    return found


@pytest.fixture(params=["analysed", "never analysed"])
async def deep_queue(request, pg_dsn):
    """A database with a 50,000-message queue (and a small one beside it), with statistics
    or without (a new database that filled faster than autovacuum), and a connection set up
    as ocd's pool sessions are."""
    s = PostgresStore(pg_dsn)
    await s.open(T0)
    q1 = await s.create_queue("deep", "local", QueueSettings(), T0)
    q2 = await s.create_queue("dlq", "local", QueueSettings(), T0)
    q3 = await s.create_queue("deep.fifo", "local", QueueSettings(), T0)
    assert (q1.key, q2.key, q3.key) == (1, 2, F)
    for i in range(0, 50_000, 5000):
        batch = [NewMessage(f"{j:032x}", "json", b"1", T0 - j, T0 - j) for j in range(i, i + 5000)]
        await s.enqueue(q1, batch)
    for i in range(0, 20_000, 1000):  # and a deep FIFO queue: two groups
        batch = [
            NewMessage(f"{j:032x}", "json", b"1", T0, T0, "ab"[j % 2], str(j))
            for j in range(i, i + 1000)
        ]
        await s.enqueue(q3, batch)
    await s.close()
    settings = {"plan_cache_mode": "force_custom_plan", "enable_bitmapscan": "off"}
    conn = await asyncpg.connect(pg_dsn, server_settings=settings)
    if request.param == "analysed":
        await conn.execute("ANALYZE")
    yield conn
    await conn.close()


@pytest.mark.parametrize("name", sorted(HOT))
async def test_hot_statement_never_scans_the_whole_table(deep_queue, name):
    query, params = HOT[name]
    # Run it prepared more than five times first: the trap was a switch to a generic plan.
    stmt = await deep_queue.prepare("EXPLAIN (FORMAT JSON) " + query)
    for _ in range(7):
        [[plan_json]] = await stmt.fetch(*params)

    scans = _scans(json.loads(plan_json)[0]["Plan"])
    assert scans, (name, plan_json)
    # an index walked in order or a lookup by key: no whole-table scan, no bitmap of every
    # ready row to sort
    assert set(scans) <= {"Index Scan", "Index Only Scan", "ModifyTable"}, (name, scans)


async def test_pool_sessions_plan_every_execution_for_its_parameters(nodes):
    [s] = await nodes(1)
    async with s._db("read") as c:  # the pool's own session settings
        assert await c.fetchval("SHOW plan_cache_mode") == "force_custom_plan"
        assert await c.fetchval("SHOW synchronous_commit") == "off"
        assert await c.fetchval("SHOW enable_bitmapscan") == "off"


async def test_a_cron_tick_claimed_by_two_nodes_at_once_runs_on_one(nodes):
    a, b = await nodes(2)
    for minute in range(5):
        due = T0 + minute * 60_000
        won = await asyncio.gather(
            a.claim_cron_tick("app|* * * * *", due, a.node_id),
            b.claim_cron_tick("app|* * * * *", due, b.node_id),
        )
        assert sorted(won) == [False, True]
    assert await a.cron_last_ticks() == await b.cron_last_ticks() == {"app|* * * * *": T0 + 240_000}


async def test_every_node_reads_the_same_kv_namespace_at_once(nodes):
    from ocd.store import KvEntry, KvNamespace

    a, b = await nodes(2)
    ns = KvNamespace("local", "shared")
    await a.kv_put(ns, "k", KvEntry(b"from a"))
    assert (await b.kv_get(ns, "k", T0)).value == b"from a"
    await b.kv_delete(ns, "k")
    assert await a.kv_get(ns, "k", T0) is None
    await b.kv_put(ns, "gone", KvEntry(b"", T0 + 60_000))
    assert await a.kv_expire(T0 + 60_000) == 1
    assert (await b.kv_list(ns, T0, "", None, 10)).keys == []


def _nodes_of(plan: dict, relation: str) -> list[dict]:
    found = [plan] if plan.get("Relation Name") == relation else []
    for child in plan.get("Plans", []):
        found += _nodes_of(child, relation)
    return found


async def test_a_reap_with_no_silent_node_does_not_walk_the_fifo_order_rows(deep_queue):
    """Every node reaps on each heartbeat; the FIFO queues' order rows have no index on their
    owner (claims would stop being HOT), so a reap that found no silent node must not read
    them at all."""
    tx = deep_queue.transaction()
    await tx.start()
    try:
        [[plan_json]] = await deep_queue.fetch(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + pg_sql.REAP_NODES, 60.0, T0, "me"
        )
    finally:
        await tx.rollback()
    nodes = _nodes_of(json.loads(plan_json)[0]["Plan"], "ocd_fifo_order")
    walks = [n for n in nodes if n["Node Type"] != "ModifyTable"]
    assert walks and all(w["Actual Loops"] == 0 for w in walks), plan_json


async def test_fifo_state_rows_and_deduplication_ids_go_with_their_messages_and_queue(nodes):
    """A FIFO message's order row is deleted with it by whatever statement deletes it, and a
    deleted queue leaves neither order rows nor deduplication ids behind (they have no
    foreign key)."""
    [a] = await nodes(1)
    q = await a.create_queue("jobs.fifo", "local", QueueSettings(), T0)
    sent = [NewMessage(f"f{i:031d}", "json", b"1", T0, T0, f"g{i % 3}", f"d{i}") for i in range(30)]
    await a.enqueue_fifo(q, sent)

    async def rows(table: str) -> int:
        async with a._db("read") as c:
            return await c.fetchval(f"SELECT count(*) FROM {table} WHERE queue = $1", q.key)

    assert await rows("ocd_fifo_order") == await rows("ocd_messages") == 30
    claimed = await a.claim(q, Claim(10, T0, T0 + 60_000, 4, NO_DLQ))
    await a.settle(q, [d.seq for d in claimed.deliveries], [], [], NO_DLQ, T0)
    assert await rows("ocd_fifo_order") == await rows("ocd_messages") == 20
    await a.delete_messages(q, [d.seq for d in (await a.peek(q, T0, 5))])
    assert await rows("ocd_fifo_order") == await rows("ocd_messages") == 15
    assert await rows("ocd_dedup") == 30
    await a.delete_queue(q)
    assert (await rows("ocd_fifo_order"), await rows("ocd_dedup")) == (0, 0)


@pytest.fixture(params=["analysed", "never analysed"])
async def many_groups(request, pg_dsn):
    """A FIFO queue of 3,000 groups, 4 messages each, half of its first messages acked (dead
    rows behind the heads, as a busy queue has), and a session set up as ocd's pool sessions
    are."""
    s = PostgresStore(pg_dsn)
    await s.open(T0)
    q = await s.create_queue("many.fifo", "local", QueueSettings(), T0)
    for r in range(4):
        batch = [
            NewMessage(f"{r}-{g:030d}", "json", b"1", T0, T0, f"g{g}", f"{r}-{g}")
            for g in range(3000)
        ]
        await s.enqueue_fifo(q, batch)
    for _ in range(15):
        got = await s.claim(q, Claim(100, T0, T0 + 60_000, 4, NO_DLQ))
        await s.settle(q, [d.seq for d in got.deliveries], [], [], NO_DLQ, T0)
    await s.close()
    settings = {"plan_cache_mode": "force_custom_plan", "enable_bitmapscan": "off"}
    conn = await asyncpg.connect(pg_dsn, server_settings=settings)
    if request.param == "analysed":
        await conn.execute("ANALYZE")
    yield conn, q.key
    await conn.close()


def _plan_nodes(plan: dict) -> list[dict]:
    return [plan, *(n for child in plan.get("Plans", []) for n in _plan_nodes(child))]


async def test_fifo_claims_and_acks_read_order_and_group_rows_by_key(many_groups):
    """A FIFO claim and ack join a batch's keys to the queue's order and group rows: probes
    by key (a few pages a message), never a hash, merge or bitmap of all the queue's rows,
    whether the tables have statistics or not."""
    conn, key = many_groups

    async def claim_and_ack() -> None:
        rows = await conn.fetch(
            "SELECT seq FROM ocd_fifo_claim($1, $2, 100, $3, 7, 1::smallint, 'me')",
            key,
            T0,
            T0 + 60_000,
        )
        assert len(rows) == 100
        await conn.fetchval(pg_fifo_sql.FIFO_ACK, key, [r["seq"] for r in rows], 0)

    _assert_probes_by_key(
        await _nested_plans(conn, claim_and_ack), {"ocd_fifo_order", "ocd_groups", "ocd_messages"}
    )


async def test_a_standard_ack_reads_messages_held_rows_and_leases_by_key(deep_queue):
    """``ocd_ack`` keeps one plan a session, made without the acked seqs: it must still
    read the messages, held rows and leases by key, whether the tables have statistics or
    not."""

    async def ack() -> None:
        await deep_queue.fetchval(pg_sql.ACK, 1, [Q1 + 10, Q1 + 11, Q1 + 12], 0)

    _assert_probes_by_key(
        await _nested_plans(deep_queue, ack), {"ocd_messages", "ocd_held", "ocd_leases"}
    )


async def _nested_plans(conn: asyncpg.Connection, work) -> list[list[dict]]:
    """The plans of every statement ``work()`` runs on ``conn`` seven times (past the five
    custom plans a cached plan starts with), those inside functions included (auto_explain,
    heard as notices), in a transaction rolled back; each as its list of nodes."""
    plans: list[dict] = []

    def heard(_conn: object, message: asyncpg.PostgresLogMessage) -> None:
        text = message.message
        if "{" in text:
            plans.append(json.loads(text[text.index("{") :])["Plan"])

    await conn.execute(
        "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; "
        "SET auto_explain.log_nested_statements = on; SET auto_explain.log_format = json; "
        "SET client_min_messages = log"
    )
    conn.add_log_listener(heard)
    tx = conn.transaction()
    await tx.start()
    try:
        for _ in range(7):
            await work()
    finally:
        await tx.rollback()
        conn.remove_log_listener(heard)
        await conn.execute(
            "SET client_min_messages = notice; SET auto_explain.log_min_duration = -1"
        )
    return [_plan_nodes(p) for p in plans]


def _assert_probes_by_key(plans: list[list[dict]], tables: set[str]) -> None:
    """The statements on ocd's tables (not asyncpg's look-ups of types) read ``tables`` (at
    least) and read every table by key: no hash, merge, sequential or bitmap scan."""
    ours = [
        nodes
        for nodes in plans
        if any(n.get("Relation Name", "").startswith("ocd_") for n in nodes)
    ]
    touched = {n.get("Relation Name") for nodes in ours for n in nodes}
    assert tables <= touched, touched
    wide = [
        (n["Node Type"], n.get("Relation Name"))
        for nodes in ours
        for n in nodes
        if n["Node Type"] in ("Hash Join", "Merge Join", "Seq Scan", "Bitmap Heap Scan")
        and n.get("Relation Name") != "gone"  # the statement's deleted rows, in memory
    ]
    assert not wide, wide


@pytest.mark.parametrize("name", ["jobs", "jobs.fifo"])
async def test_sends_racing_a_queue_deletion_leave_no_message_behind(nodes, name):
    """A message row has no foreign key to its queue: every send holds a lock the deletion
    waits for. Sends on two nodes race the queue's deletion on one of them: each either
    stored its messages before the deletion (which then deleted them) or failed with
    QueueNotFound, and nothing of the queue is left in any table."""
    a, b = await nodes(2)
    q = await a.create_queue(name, "local", QueueSettings(), T0)
    await eventually(lambda: b.queue(name) is not None, timeout=3)
    fifo = q.fifo
    refused = stored = 0

    async def send(node: PostgresStore, tag: str) -> None:
        nonlocal refused, stored
        queue = node.queue(name)
        for i in range(1000):  # until the queue is gone
            batch = [
                NewMessage(f"{tag}{i:03d}{j:026d}", "json", b"1", T0, T0 + 60_000 * (j % 2))
                if not fifo
                else NewMessage(
                    f"{tag}{i:03d}{j:026d}", "json", b"1", T0, T0, f"g{j}", f"{tag}{i}.{j}"
                )
                for j in range(10)
            ]
            try:
                await node.enqueue(queue, batch)
            except QueueNotFound:
                refused += 1
                return
            stored += 1

    async def delete() -> None:
        await eventually(lambda: stored >= 6, timeout=10)  # while the senders are at it
        await a.delete_queue(a.queue(name))

    await asyncio.gather(send(a, "a"), send(b, "b"), send(b, "c"), delete())
    assert refused == 3  # every sender was refused in the end
    async with a._db("read") as c:
        for table in ("ocd_messages", "ocd_fifo_order", "ocd_held", "ocd_dedup", "ocd_leases"):
            assert await c.fetchval(f"SELECT count(*) FROM {table} WHERE queue = $1", q.key) == 0
