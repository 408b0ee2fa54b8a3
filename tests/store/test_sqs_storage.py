"""What the SQS endpoint stores beside ocd's own data, on every backend: a message's
attributes blob (kept wherever the message goes) and a queue's tags and SQS attributes."""

from __future__ import annotations

import pytest

from ocd.store import Claim, DeadLetter, NewMessage, QueueSettings
from tests.store.conftest import T0

NO_DLQ = DeadLetter(None)
ATTRS = b'{"a":{"DataType":"String","StringValue":"x"}}'


def with_attrs(n: int, prefix: str = "m", group: str | None = None) -> list[NewMessage]:
    return [
        NewMessage(
            f"{prefix}{i:031d}",
            "text",
            b"hi",
            T0,
            T0,
            group,
            None if group is None else f"{prefix}{i}",
            ATTRS if i % 2 == 0 else None,
        )
        for i in range(n)
    ]


async def test_message_attributes_come_back_with_claims_peeks_and_dead_letter_moves(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    dlq = await store.ensure_queue("jobs-dlq", "local", None, T0)
    await store.enqueue(q, with_attrs(3))
    assert [d.attrs for d in await store.peek(q, T0, 10)] == [ATTRS, None, ATTRS]
    got = (await store.claim(q, Claim(10, T0, T0 + 1000, 5, NO_DLQ))).deliveries
    assert [d.attrs for d in got] == [ATTRS, None, ATTRS]
    await store.settle(q, [], [], [got[0].seq], DeadLetter(dlq), T0)
    (moved,) = (await store.claim(dlq, Claim(10, T0, T0 + 1000, 5, NO_DLQ))).deliveries
    assert (moved.id, moved.attrs) == (got[0].id, ATTRS)
    # attributes do not count as backlog bytes
    assert (await store.backlog(q)).bytes == 4


async def test_message_attributes_of_a_fifo_queue_come_back_in_order(store):
    q = await store.ensure_queue("jobs.fifo", "local", QueueSettings(), T0)
    await store.enqueue_fifo(q, with_attrs(4, group="g"))
    got = (await store.claim(q, Claim(10, T0, T0 + 1000, 5, NO_DLQ))).deliveries
    assert [d.attrs for d in got] == [ATTRS, None, ATTRS, None]
    assert [d.attrs for d in await store.peek(q, T0 + 2000, 10)] == [ATTRS, None, ATTRS, None]


async def test_message_attributes_survive_a_reopen(open_store):
    s = await open_store()
    q = await s.ensure_queue("jobs", "local", None, T0)
    await s.enqueue(q, with_attrs(1))
    await s.close()
    s2 = await open_store()
    q2 = s2.queue("jobs")
    assert q2 is not None
    (d,) = (await s2.claim(q2, Claim(10, T0, T0 + 1000, 5, NO_DLQ))).deliveries
    assert d.attrs == ATTRS


async def test_migrate_store_copies_message_attributes(tmp_path, pg_dsn):
    from ocd.store import SqliteStore
    from ocd.store.postgres import PostgresStore
    from ocd.store.transfer import sqlite_to_postgres

    s = SqliteStore(tmp_path / "data")
    await s.open(T0)
    q = await s.ensure_queue("jobs", "local", None, T0)
    await s.enqueue(q, with_attrs(2))
    await s.close()
    await sqlite_to_postgres(tmp_path / "data", pg_dsn, T0, force=False)
    pg = PostgresStore(pg_dsn)
    await pg.open(T0)
    try:
        jobs = pg.queue("jobs")
        assert jobs is not None
        got = (await pg.claim(jobs, Claim(10, T0, T0 + 1000, 5, NO_DLQ))).deliveries
        assert [d.attrs for d in got] == [ATTRS, None]
    finally:
        await pg.close()


async def test_queue_extras_are_kept_replaced_and_go_with_the_queue(open_store):
    from ocd.errors import QueueNotFound
    from ocd.store import QueueExtras

    s = await open_store()
    q = await s.ensure_queue("jobs", "local", None, T0)
    assert await s.queue_extras(q) == QueueExtras()
    extras = QueueExtras({"Policy": '{"Version":"2012-10-17"}'}, {"team": "ops", "é": "ü"})
    await s.set_queue_extras(q, extras)
    await s.close()
    s = await open_store()
    q = s.queue("jobs")
    assert q is not None and await s.queue_extras(q) == extras
    await s.set_queue_extras(q, QueueExtras(tags={"team": "dev"}))
    assert await s.queue_extras(q) == QueueExtras({}, {"team": "dev"})
    await s.delete_queue(q)
    with pytest.raises(QueueNotFound):
        await s.set_queue_extras(q, extras)
    again = await s.ensure_queue("jobs", "local", None, T0)
    assert await s.queue_extras(again) == QueueExtras()  # a new queue of the name starts empty


async def test_migrate_store_copies_queue_extras(tmp_path, pg_dsn):
    from ocd.store import QueueExtras, SqliteStore
    from ocd.store.postgres import PostgresStore
    from ocd.store.transfer import sqlite_to_postgres

    s = SqliteStore(tmp_path / "data")
    await s.open(T0)
    q = await s.ensure_queue("jobs", "local", None, T0)
    await s.ensure_queue("plain", "local", None, T0)
    extras = QueueExtras({"ReceiveMessageWaitTimeSeconds": "5"}, {"a": "b"})
    await s.set_queue_extras(q, extras)
    await s.close()
    await sqlite_to_postgres(tmp_path / "data", pg_dsn, T0, force=False)
    pg = PostgresStore(pg_dsn)
    await pg.open(T0)
    try:
        assert await pg.queue_extras(pg.queue("jobs")) == extras
        assert await pg.queue_extras(pg.queue("plain")) == QueueExtras()
    finally:
        await pg.close()
