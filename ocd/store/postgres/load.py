"""Loading a backend-neutral Dump into a PostgreSQL database: one transaction, so a failed
copy leaves the target as it was."""

from __future__ import annotations

from collections import defaultdict

import asyncpg

from ocd.errors import StoreError
from ocd.store.dump import Copied, Dump
from ocd.store.postgres import fifo_sql, sql
from ocd.store.postgres.errors import translating
from ocd.store.postgres.store import PostgresStore
from ocd.store.rows import consumer_settings, extras_row


async def load(dsn: str, dump: Dump, now_ms: int, force: bool = False) -> Copied:
    """Copy ``dump`` into the database at ``dsn`` (migrated first). Refuses a target that
    holds queues or messages unless ``force``, which deletes them first."""
    target = PostgresStore(dsn)
    await target.open(now_ms)  # creates or migrates the schema
    await target.close()
    with translating(target.where, "connect"):
        conn = await asyncpg.connect(dsn)
    try:
        with translating(target.where, "migrate-store"):
            async with conn.transaction():
                held = await conn.fetchval(sql.HOLDS_DATA)
                if held and not force:
                    raise StoreError(
                        f"{target.where} already holds ocd queues or messages; refusing to copy "
                        "into it (--force deletes them first)",
                        target.where,
                        "migrate-store",
                    )
                if held or force:
                    await conn.execute(sql.WIPE)
                keys = await _copy_catalogue(conn, dump)
                copied = await _copy_messages(conn, dump, keys)
    finally:
        await conn.close()
    return Copied(len(dump.queues), len(dump.consumers), copied)


async def _copy_catalogue(conn: asyncpg.Connection, dump: Dump) -> dict[str, int]:
    """Queues, consumers and secrets; returns each queue's new key by queue_id."""
    keys: dict[str, int] = {}
    for q in dump.queues:
        s = q.settings
        keys[q.queue_id] = await conn.fetchval(
            sql.COPY_QUEUE,
            q.account,
            q.name,
            q.queue_id,
            q.created_ms,
            q.modified_ms,
            s.delivery_delay_s,
            s.message_retention_period_s,
            s.delivery_paused,
            q.purged_ms,
            s.content_based_deduplication,
            s.deduplication_scope,
            dump.fifo_sequences.get(q.queue_id, 0),
        )
    for queue_id, extras in dump.extras.items():
        await conn.execute(sql.SET_QUEUE_EXTRAS, keys[queue_id], *extras_row(extras))
    for queue_id, c in dump.consumers:
        await conn.execute(
            sql.UPSERT_CONSUMER,
            keys[queue_id],
            c.consumer_id,
            c.created_ms,
            c.dead_letter_queue,
            consumer_settings(c),
        )
    for name, value in dump.secrets.items():
        await conn.execute(sql.COPY_META, name, value)
    return keys


async def _copy_messages(conn: asyncpg.Connection, dump: Dump, keys: dict[str, int]) -> int:
    """Every message, and the backlog counts. Messages that wait (delayed, retrying, leased)
    and FIFO ones keep their seqs, so pull lease ids issued before stay valid; standard
    messages ready now are numbered anew into their queues' bands, in the order they became
    visible."""
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    copied = 0
    for chunk in dump.messages:
        records = []
        for m in chunk:
            key = keys[m.queue_id]
            size = len(m.body)
            records.append(
                (
                    -m.seq if m.group is None and m.visible_ms <= m.sent_ms else m.seq,
                    key,
                    m.id,
                    m.content_type,
                    m.body,
                    size,
                    m.sent_ms,
                    m.visible_ms,
                    m.attempts,
                    m.group,
                    m.dedup,
                    m.sequence,
                    m.attrs,
                    m.first_received_ms,
                )
            )
            counts[key][0] += 1
            counts[key][1] += size
        await conn.copy_records_to_table("ocd_messages", records=records, columns=sql.COPY_COLUMNS)
        copied += len(records)
    await conn.execute(sql.SERIAL_AFTER_COPY)
    await conn.execute(sql.QUEUE_KEYS_AFTER_COPY)
    await conn.execute(sql.TAILS_AFTER_COPY)
    await conn.execute(sql.HOLD_COPIED)
    await conn.execute(sql.RELOG)
    await conn.execute(sql.RELABEL)
    await conn.execute(sql.ORDER_COPIED)
    for key, (n, size) in counts.items():
        await conn.execute(sql.COPY_COUNTS, key, n, size)
    for q in dump.queues:  # FIFO groups from their messages; ids still in their window
        if q.fifo:
            await conn.execute(fifo_sql.GROUPS_REBUILD, keys[q.queue_id])
    await conn.copy_records_to_table(
        "ocd_dedup",
        records=[(keys[d.queue_id], *d[1:]) for d in dump.dedup],
        columns=sql.DEDUP_COLUMNS,
    )
    return copied
