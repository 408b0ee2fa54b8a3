"""When a message was first received (``Delivery.first_received_ms``, SQS's
``ApproximateFirstReceiveTimestamp``), on every backend: set by the first claim of any kind,
kept through retries, releases and later claims, cleared by a move to another queue; and
the schema migration that added it, from the version before on each backend."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg

from ocd.store import (
    Claim,
    DeadLetter,
    LeaseKind,
    NewMessage,
    QueueSettings,
    Retry,
    SqliteStore,
    Store,
)
from ocd.store.postgres import PostgresStore
from ocd.store.postgres import sql as pg_sql
from ocd.store.sqlite import sql as sqlite_sql
from tests.store.conftest import T0

NO_DLQ = DeadLetter(None)
V_BEFORE = 6  # the schema version before first_received_ms


def msgs(n: int, prefix: str = "m", group: str | None = None) -> list[NewMessage]:
    return [
        NewMessage(
            f"{prefix}{i:031d}", "text", b"x", T0, T0, group, f"{prefix}{i}" if group else None
        )
        for i in range(n)
    ]


async def test_the_first_claim_of_any_kind_sets_it_and_later_ones_keep_it(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, msgs(3))
    assert [d.first_received_ms for d in await store.peek(q, T0, 10)] == [None] * 3
    (a,) = (
        await store.claim(q, Claim(1, T0 + 10, T0 + 1000, 9, NO_DLQ, LeaseKind.PULL))
    ).deliveries
    (b,) = (
        await store.claim(q, Claim(1, T0 + 20, T0 + 1000, 9, NO_DLQ, LeaseKind.PUSH))
    ).deliveries
    assert (a.first_received_ms, b.first_received_ms) == (T0 + 10, T0 + 20)
    # a retry (or a visibility change, which is one) and a release keep it ...
    await store.settle(q, [], [Retry(a.seq, T0 + 30)], [], NO_DLQ, T0 + 25)
    await store.release(q, [b.seq], T0 + 25)
    again = (await store.claim(q, Claim(10, T0 + 40, T0 + 1000, 9, NO_DLQ))).deliveries
    assert {d.id: (d.attempts, d.first_received_ms) for d in again} == {
        a.id: (2, T0 + 10),
        b.id: (1, T0 + 20),
        msgs(3)[2].id: (1, T0 + 40),
    }
    # ... and so does a lease that lapsed
    later = (await store.claim(q, Claim(10, T0 + 2000, T0 + 3000, 9, NO_DLQ))).deliveries
    assert {d.first_received_ms for d in later} == {T0 + 10, T0 + 20, T0 + 40}


async def test_a_dead_letter_move_and_a_redrive_start_it_again(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    dlq = await store.ensure_queue("jobs-dlq", "local", None, T0)
    await store.enqueue(q, msgs(2))
    a, b = (await store.claim(q, Claim(2, T0 + 10, T0 + 1000, 9, NO_DLQ))).deliveries
    await store.settle(q, [], [], [a.seq], DeadLetter(dlq), T0 + 20)
    # exhausted at claim: moved by the claim that found it spent
    claimed = await store.claim(q, Claim(1, T0 + 1000, T0 + 2000, 1, DeadLetter(dlq)))
    assert claimed.exhausted == [b.id]
    got = (await store.claim(dlq, Claim(10, T0 + 3000, T0 + 4000, 9, NO_DLQ))).deliveries
    assert {(d.id, d.attempts, d.first_received_ms) for d in got} == {
        (a.id, 1, T0 + 3000),
        (b.id, 1, T0 + 3000),
    }
    # a redrive back to the source queue starts it again there
    assert await store.move_messages(dlq, q, [d.seq for d in got], T0 + 4000) == 2
    back = (await store.claim(q, Claim(10, T0 + 5000, T0 + 6000, 9, NO_DLQ))).deliveries
    assert {d.first_received_ms for d in back} == {T0 + 5000}


async def test_a_fifo_claim_sets_and_keeps_it_and_a_dead_letter_move_clears_it(store):
    q = await store.ensure_queue("jobs.fifo", "local", QueueSettings(), T0)
    dlq = await store.ensure_queue("jobs-dlq.fifo", "local", QueueSettings(), T0)
    await store.enqueue_fifo(q, msgs(2, group="g"))
    a, b = (await store.claim(q, Claim(2, T0 + 10, T0 + 1000, 9, NO_DLQ))).deliveries
    assert (a.first_received_ms, b.first_received_ms) == (T0 + 10, T0 + 10)
    await store.release(q, [a.seq, b.seq], T0 + 20)
    a2, b2 = (await store.claim(q, Claim(2, T0 + 30, T0 + 1000, 9, NO_DLQ))).deliveries
    assert (a2.id, a2.first_received_ms, b2.first_received_ms) == (a.id, T0 + 10, T0 + 10)
    await store.settle(q, [b2.seq], [], [a2.seq], DeadLetter(dlq), T0 + 40)
    (moved,) = (await store.claim(dlq, Claim(10, T0 + 50, T0 + 1000, 9, NO_DLQ))).deliveries
    assert (moved.id, moved.first_received_ms) == (a.id, T0 + 50)


async def test_it_survives_a_reopen(open_store):
    s = await open_store()
    q = await s.ensure_queue("jobs", "local", None, T0)
    await s.enqueue(q, msgs(1))
    (d,) = (await s.claim(q, Claim(1, T0 + 10, T0 + 20, 9, NO_DLQ, LeaseKind.PULL))).deliveries
    assert d.first_received_ms == T0 + 10
    await s.close()
    s2 = await open_store()
    q2 = s2.queue("jobs")
    assert q2 is not None
    (again,) = (await s2.claim(q2, Claim(1, T0 + 30, T0 + 40, 9, NO_DLQ))).deliveries
    assert (again.attempts, again.first_received_ms) == (2, T0 + 10)


# ------------------------------------------------------------------ the migration


async def _claims_after_migration(s: Store) -> None:
    """What a database migrated from ``V_BEFORE`` holds: a message never received, one
    received before the migration (its first receive unknown: the next claim's time) and a
    FIFO message; each claim sets the time from then on."""
    q, fifo = s.queue("jobs"), s.queue("jobs.fifo")
    assert q is not None and fifo is not None
    got = (await s.claim(q, Claim(10, T0 + 100, T0 + 200, 9, NO_DLQ))).deliveries
    assert {(d.id, d.attempts, d.first_received_ms) for d in got} == {
        ("new", 1, T0 + 100),
        ("seen", 2, T0 + 100),
    }
    (f,) = (await s.claim(fifo, Claim(10, T0 + 100, T0 + 200, 9, NO_DLQ))).deliveries
    assert (f.id, f.group, f.sequence, f.first_received_ms) == ("f", "g", 1, T0 + 100)
    again = (await s.claim(q, Claim(10, T0 + 300, T0 + 400, 9, NO_DLQ))).deliveries
    assert {d.first_received_ms for d in again} == {T0 + 100}


async def test_a_sqlite_database_of_the_version_before_is_migrated(tmp_path: Path):
    con = sqlite3.connect(tmp_path / "scheduler.sqlite", isolation_level=None)
    for version, script in enumerate(sqlite_sql.MIGRATIONS[:V_BEFORE], 1):
        con.executescript(
            f"BEGIN;\n{script}\nPRAGMA user_version={version};\n"
            f"PRAGMA application_id={sqlite_sql.APPLICATION_ID};\nCOMMIT;"
        )
    queue = (
        "INSERT INTO queues (account, name, queue_id, created_ms, modified_ms, "
        "delivery_delay_s, retention_s, paused) VALUES ('local', ?, ?, ?, ?, 0, 345600, 0)"
    )
    con.execute(queue, ("jobs", "a" * 32, T0, T0))
    con.execute(queue, ("jobs.fifo", "b" * 32, T0, T0))
    con.execute("UPDATE queues SET fifo_seq = 1 WHERE name = 'jobs.fifo'")
    message = (
        "INSERT INTO messages (queue, id, content_type, body, size, sent_ms, visible_ms, "
        "attempts, grp, dedup, fseq) VALUES (?, ?, 'text', x'78', 1, ?, ?, ?, ?, ?, ?)"
    )
    con.execute(message, (1, "new", T0, T0, 0, None, None, None))
    con.execute(message, (1, "seen", T0, T0 + 50, 1, None, None, None))
    con.execute(message, (2, "f", T0, T0, 0, "g", "d", 1))
    con.execute("INSERT INTO fifo_groups (queue, grp, ready_ms) VALUES (2, 'g', ?)", (T0,))
    con.close()
    s = SqliteStore(tmp_path)
    await s.open(T0)
    try:
        await _claims_after_migration(s)
    finally:
        await s.close()
    con = sqlite3.connect(tmp_path / "scheduler.sqlite")
    assert con.execute("PRAGMA user_version").fetchone() == (len(sqlite_sql.MIGRATIONS),)
    con.close()


async def test_a_postgres_database_of_the_version_before_is_migrated(pg_dsn):
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.execute(pg_sql.SCHEMA_TABLE)
        await conn.execute("INSERT INTO ocd_schema (version) VALUES ($1)", V_BEFORE)
        for script in pg_sql.MIGRATIONS[:V_BEFORE]:
            await conn.execute(script)
        queue = (
            "INSERT INTO ocd_queues (account, name, queue_id, created_ms, modified_ms, "
            "delivery_delay_s, retention_s, paused, fifo_seq) "
            "VALUES ('local', $1, $2, $3, $3, 0, 345600, false, $4) RETURNING key"
        )
        jobs = await conn.fetchval(queue, "jobs", "a" * 32, T0, 0)
        fifo = await conn.fetchval(queue, "jobs.fifo", "b" * 32, T0, 1)
        message = (
            "INSERT INTO ocd_messages (queue, id, content_type, body, size, sent_ms, "
            "visible_ms, attempts, grp, dedup, fseq) "
            "VALUES ($1, $2, 'text', 'x', 1, $3, $4, $5, $6, $7, $8)"
        )
        await conn.execute(message, jobs, "new", T0, T0, 0, None, None, None)
        await conn.execute(message, jobs, "seen", T0, T0 + 50, 1, None, None, None)
        await conn.execute(message, fifo, "f", T0, T0, 0, "g", "d", 1)
        await conn.execute(
            "INSERT INTO ocd_groups (queue, grp, ready_ms) VALUES ($1, 'g', $2)", fifo, T0
        )
    finally:
        await conn.close()
    s = PostgresStore(pg_dsn)
    await s.open(T0)
    try:
        await _claims_after_migration(s)
    finally:
        await s.close()
    conn = await asyncpg.connect(pg_dsn)
    try:
        assert await conn.fetchval(pg_sql.SCHEMA_VERSION) == len(pg_sql.MIGRATIONS)
    finally:
        await conn.close()


async def test_migrate_store_copies_it(tmp_path: Path, pg_dsn):
    from ocd.store.transfer import sqlite_to_postgres

    s = SqliteStore(tmp_path / "data")
    await s.open(T0)
    q = await s.ensure_queue("jobs", "local", None, T0)
    await s.enqueue(q, msgs(2))
    await s.claim(q, Claim(1, T0 + 10, T0 + 20, 9, NO_DLQ, LeaseKind.PULL))
    await s.close()
    await sqlite_to_postgres(tmp_path / "data", pg_dsn, T0 + 30, force=False)
    pg = PostgresStore(pg_dsn)
    await pg.open(T0 + 30)
    try:
        jobs = pg.queue("jobs")
        assert jobs is not None
        got = (await pg.claim(jobs, Claim(10, T0 + 40, T0 + 50, 9, NO_DLQ))).deliveries
        assert sorted((d.attempts, d.first_received_ms) for d in got) == [
            (1, T0 + 40),
            (2, T0 + 10),
        ]
    finally:
        await pg.close()
