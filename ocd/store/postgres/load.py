"""Loading a backend-neutral Dump into a PostgreSQL database: one transaction, so a failed
copy leaves the target as it was."""

from __future__ import annotations

from collections import defaultdict

import asyncpg

from ocd.errors import StoreError
from ocd.store.dump import Copied, Dump
from ocd.store.postgres import sql
from ocd.store.postgres.errors import is_driver_error, translate
from ocd.store.postgres.store import PostgresStore
from ocd.store.rows import consumer_settings

_TABLES = "ocd_messages, ocd_counts, ocd_consumers, ocd_queues, ocd_meta"
_COLUMNS = (
    "seq",
    "queue",
    "id",
    "content_type",
    "body",
    "size",
    "sent_ms",
    "visible_ms",
    "attempts",
)


async def load(dsn: str, dump: Dump, now_ms: int, force: bool = False) -> Copied:
    """Copy ``dump`` into the database at ``dsn`` (migrated first). Refuses a target that
    holds queues or messages unless ``force``, which deletes them first."""
    target = PostgresStore(dsn)
    await target.open(now_ms)  # creates or migrates the schema
    await target.close()
    try:
        conn = await asyncpg.connect(dsn)
    except Exception as e:
        if not is_driver_error(e):
            raise
        raise translate(e, target.where, "connect") from e
    try:
        async with conn.transaction():
            held = await conn.fetchval(
                "SELECT (SELECT count(*) FROM ocd_queues) + (SELECT count(*) FROM ocd_messages)"
            )
            if held and not force:
                raise StoreError(
                    f"{target.where} already holds ocd queues or messages; refusing to copy "
                    "into it (--force deletes them first)",
                    target.where,
                    "migrate-store",
                )
            if held or force:
                await conn.execute(f"TRUNCATE {_TABLES} RESTART IDENTITY")
            keys: dict[str, int] = {}
            for q in dump.queues:
                s = q.settings
                keys[q.queue_id] = await conn.fetchval(
                    "INSERT INTO ocd_queues (account, name, queue_id, created_ms, modified_ms,"
                    " delivery_delay_s, retention_s, paused, purged_ms)"
                    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING key",
                    q.account,
                    q.name,
                    q.queue_id,
                    q.created_ms,
                    q.modified_ms,
                    s.delivery_delay_s,
                    s.message_retention_period_s,
                    s.delivery_paused,
                    q.purged_ms,
                )
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
                await conn.execute(
                    "INSERT INTO ocd_meta (key, value) VALUES ($1, $2) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    name,
                    value,
                )
            counts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
            copied = 0
            for chunk in dump.messages:
                records = []
                for m in chunk:
                    key = keys[m.queue_id]
                    records.append(
                        (
                            m.seq,
                            key,
                            m.id,
                            m.content_type,
                            m.body,
                            len(m.body),
                            m.sent_ms,
                            m.visible_ms,
                            m.attempts,
                        )
                    )
                    counts[key][0] += 1
                    counts[key][1] += len(m.body)
                await conn.copy_records_to_table("ocd_messages", records=records, columns=_COLUMNS)
                copied += len(records)
            # new messages continue after the copied ones' seqs
            await conn.execute(
                "SELECT setval(pg_get_serial_sequence('ocd_messages', 'seq'),"
                " greatest((SELECT max(seq) FROM ocd_messages), 1))"
            )
            for key, (n, size) in counts.items():
                await conn.execute(
                    "INSERT INTO ocd_counts (queue, shard, count, bytes) VALUES ($1, 0, $2, $3)",
                    key,
                    n,
                    size,
                )
    except StoreError:
        raise
    except Exception as e:
        if not is_driver_error(e):
            raise
        raise translate(e, target.where, "migrate-store") from e
    finally:
        await conn.close()
    return Copied(len(dump.queues), len(dump.consumers), copied)
