"""Opening a database a released ocd left behind loses nothing.

The fixtures in ``tests/data/upgrade/release/`` were written by ``upgrade_release.py`` with
the code of the release before the store's log layout (commit 3ff76e5, schema 7 on SQLite,
8 on PostgreSQL), and then left as kill -9 leaves them: a SQLite file and a ``pg_dump`` of a
PostgreSQL database, with messages waiting, delayed, retrying, under push and pull leases,
FIFO groups and deduplication windows, a pull consumer, a move task and SQS extras. Each
test opens them with today's code, whatever layout it migrates to, and checks that every
message is still there with its body, attempts, due time and order, and every other
thing the release kept.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ocd.store import BrowseQuery, Claim, DeadLetter, Delivery, NewMessage, SqliteStore, Store
from tests import pg
from tests.store import upgrade_release as release

RELEASE = Path(__file__).parent.parent / "data" / "upgrade" / "release"
T0 = release.T0
MINUTE = release.MINUTE
NO_DLQ = DeadLetter(None)


@pytest.fixture(params=["sqlite", "postgres"])
async def upgraded(request, tmp_path) -> AsyncIterator[Store]:
    """The release's database, opened by today's code a second after it was killed."""
    if request.param == "sqlite":
        data = tmp_path / "data"
        data.mkdir(mode=0o700)
        shutil.copy(RELEASE / "scheduler.sqlite", data / "scheduler.sqlite")
        store: Store = SqliteStore(data)
    else:
        cluster: pg.Cluster = request.getfixturevalue("pg_cluster")
        dsn = request.getfixturevalue("pg_dsn")
        psql = str(cluster.bin_dir / "psql") if cluster.bin_dir else "psql"
        dump = str(RELEASE / "postgres.sql")
        subprocess.run(
            [psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-f", dump],
            check=True, capture_output=True, timeout=60, env=pg._client_env(),
        )  # fmt: skip
        from ocd.store.postgres import PostgresStore

        # the release's node has been silent since the dump was taken: its PUSH leases come
        # back as a node of a shared database finds it gone
        store = PostgresStore(dsn, node_heartbeat_s=1)
    await store.open(T0 + 1_000)
    yield store
    await store.close()


async def take(store: Store, name: str, now_ms: int) -> list[Delivery]:
    """Claim what is ready at ``now_ms`` and ack it."""
    q = store.queue(name)
    assert q is not None
    got = (await store.claim(q, Claim(50, now_ms, now_ms + MINUTE, 10, NO_DLQ))).deliveries
    await store.settle(q, [d.seq for d in got], [], [], NO_DLQ, now_ms)
    return got


def ids(deliveries: list[Delivery]) -> list[str]:
    return [d.id for d in deliveries]


@pytest.mark.timeout(120)
async def test_every_message_comes_back_with_its_body_attempts_and_time(upgraded):
    s = upgraded
    jobs = s.queue("jobs")
    assert jobs is not None
    assert (await s.backlog(jobs)).count == 10

    now = T0 + 1_000
    first = await take(s, "jobs", now)
    by_id = {d.id: d for d in first}
    waiting = [m[0] for m in release.WAITING]
    # ready now: the waiting ones in send order, the one retried twice, and the one a push
    # consumer held when the release was killed (its spent attempt kept)
    assert set(by_id) == {*waiting, release.TWICE[0], release.PUSH_LEASED[0]}
    assert [i for i in ids(first) if i in waiting] == waiting
    assert [by_id[i].attempts for i in waiting] == [1] * 5
    assert by_id[release.TWICE[0]].attempts == 3
    assert by_id[release.PUSH_LEASED[0]].attempts == 2
    for m in (*release.WAITING, release.TWICE, release.PUSH_LEASED):
        d = by_id[m[0]]
        assert (d.content_type, d.body, d.attrs) == (m[1], m[2], release.ATTRS)
    assert by_id[release.PUSH_LEASED[0]].sent_ms == T0 - 3 * MINUTE
    assert by_id[release.PUSH_LEASED[0]].first_received_ms == T0  # its first receive stays
    assert by_id[waiting[0]].first_received_ms == now

    # the pull lease lapses at its deadline, the retry and the delay fall due at theirs
    assert await take(s, "jobs", release.LEASE_UNTIL - 1) == []
    [pulled] = await take(s, "jobs", release.LEASE_UNTIL + 1)
    assert (pulled.id, pulled.attempts, pulled.body) == (
        release.PULL_LEASED[0], 2, release.PULL_LEASED[2],
    )  # fmt: skip
    assert await take(s, "jobs", release.RETRYING[3] - 1) == []
    [retried] = await take(s, "jobs", release.RETRYING[3] + 1)
    assert (retried.id, retried.attempts) == (release.RETRYING[0], 2)
    assert await take(s, "jobs", release.DELAYED[3] - 1) == []
    [delayed] = await take(s, "jobs", release.DELAYED[3] + 1)
    assert (delayed.id, delayed.attempts, delayed.body) == (
        release.DELAYED[0], 1, release.DELAYED[2],
    )  # fmt: skip

    dlq = s.queue("jobs-dlq")
    assert dlq is not None and (await s.backlog(dlq)).count == 1


@pytest.mark.timeout(120)
async def test_fifo_groups_keep_their_order_hold_back_and_dedup_windows(upgraded):
    s = upgraded
    orders = s.queue("orders.fifo")
    assert orders is not None and orders.settings.content_based_deduplication
    f = [m[0] for m in release.FIFO]
    # a's head was leased by the killed node: a's run is ready again, in order; b waits
    # behind its retrying head; c was only waiting
    now = T0 + 1_000
    got = await take(s, "orders.fifo", now)
    assert sorted(ids(got)) == sorted([f[0], f[2], f[3], f[5]])
    order = ids(got)
    assert order.index(f[0]) < order.index(f[2]) and order.index(f[3]) < order.index(f[5])
    assert {d.id: d.group for d in got} == {f[0]: "a", f[2]: "a", f[3]: "c", f[5]: "c"}

    later = release.T0 + 10 * MINUTE + 1
    assert ids(await take(s, "orders.fifo", later)) == [f[1], f[4]]

    # the deduplication window of the release's sends is still open
    _, [sent] = await s.enqueue_fifo(
        orders, [NewMessage("9" * 32, "text", b"again", T0 + 2_000, T0 + 2_000, "c", "dedup-c1")]
    )
    assert (sent.id, sent.duplicate) == (f[3], True)


@pytest.mark.timeout(120)
async def test_queues_consumers_extras_tasks_and_ticks_carry_over(upgraded):
    s = upgraded
    names = {(q.account, q.name) for q in s.queues()}
    assert names == {
        ("local", "jobs"), ("local", "jobs-dlq"), ("local", "orders.fifo"), ("acme", "paused"),
    }  # fmt: skip
    jobs = s.queue("jobs")
    assert jobs is not None
    assert jobs.settings.message_retention_period_s == 7 * 86_400
    paused = s.queue("paused", "acme")
    assert paused is not None
    assert (paused.settings.delivery_delay_s, paused.settings.delivery_paused) == (30, True)

    consumer = s.pull_consumer(jobs)
    assert consumer is not None
    assert (
        consumer.consumer_id, consumer.dead_letter_queue, consumer.batch_size,
        consumer.max_retries, consumer.visibility_timeout_ms, consumer.retry_delay_s,
    ) == (release.CONSUMER_ID, "jobs-dlq", 7, 2, 45_000, 3)  # fmt: skip
    extras = await s.queue_extras(jobs)
    assert (extras.tags, extras.sqs_attrs) == (release.TAGS, release.SQS_ATTRS)

    [task] = [t for t in await s.move_tasks() if t.task_id == release.TASK_ID]
    assert (task.source, task.destination, task.state, task.total) == (
        "jobs-dlq", "jobs", "running", 1,
    )  # fmt: skip
    assert (await s.cron_last_ticks())[release.CRON] == T0
    assert await s.clock_mark() >= T0


@pytest.mark.timeout(120)
async def test_upgraded_messages_browse_in_send_order_and_the_oldest_is_kept(upgraded):
    s = upgraded
    jobs = s.queue("jobs")
    assert jobs is not None
    rows = await s.browse(jobs, T0 + 1_000, BrowseQuery(limit=100))
    assert len(rows) == 10
    keys = [(r.sent_ms, r.seq) for r in rows]
    assert keys == sorted(keys)
    newest = await s.browse(jobs, T0 + 1_000, BrowseQuery(limit=100, newest_first=True))
    assert [(r.sent_ms, r.seq) for r in newest] == keys[::-1]
    assert (await s.backlog(jobs)).oldest_ms == keys[0][0]
