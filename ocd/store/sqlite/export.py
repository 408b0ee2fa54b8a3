"""Everything in a stopped SQLite node's ``scheduler.sqlite``, as a backend-neutral Dump."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from ocd.errors import StoreError
from ocd.store.dump import Dump, StoredDedup, StoredMessage
from ocd.store.rows import extras_from_row
from ocd.store.sqlite import sql
from ocd.store.sqlite.store import DB_NAME, SqliteStore

CHUNK = 2000


@contextlib.asynccontextmanager
async def export(data_dir: Path, now_ms: int) -> AsyncIterator[Dump]:
    """Open the store (refused while a daemon runs on it: the lock), which also migrates it
    and returns its push leases, then read it out in send order."""
    if not (data_dir / DB_NAME).is_file():
        raise StoreError(f"no ocd database at {data_dir / DB_NAME}")
    store = SqliteStore(data_dir)
    await store.open(now_ms)
    try:
        queues = store.queues()
        by_key = {q.key: q for q in queues}
        consumers = []
        for q in queues:
            c = store.pull_consumer(q)
            if c is not None:
                consumers.append((by_key[c.queue_key].queue_id, c))
        conn = sqlite3.connect(f"file:{store.path}?mode=ro", uri=True)
        try:
            secrets = {  # the database's identity stays with it (the high-water mark's)
                k: bytes(v)
                for k, v in conn.execute("SELECT key, value FROM meta")
                if k != sql.DATABASE_ID_KEY
            }
            (count,) = conn.execute("SELECT count(*) FROM message_states").fetchone()
            sequences = dict(conn.execute("SELECT queue_id, fifo_seq FROM queues"))
            dedup = [
                StoredDedup(*r)
                for r in conn.execute(
                    "SELECT q.queue_id, d.scope, d.dedup, d.expires_ms, d.message_id, d.fseq "
                    "FROM fifo_dedup d JOIN queues q ON q.key = d.queue WHERE d.expires_ms > ?",
                    (now_ms,),
                )
            ]
            extras = {
                qid: extras_from_row(a, t)
                for qid, a, t in conn.execute(
                    "SELECT queue_id, sqs_attrs, tags FROM queues "
                    "WHERE sqs_attrs IS NOT NULL OR tags IS NOT NULL"
                )
            }
            yield Dump(queues, consumers, secrets, count, _messages(conn), sequences, dedup, extras)
        finally:
            conn.close()
    finally:
        await store.close()


def _messages(conn: sqlite3.Connection) -> Iterator[list[StoredMessage]]:
    after = 0
    while True:
        rows = conn.execute(
            "SELECT m.seq, q.queue_id, m.id, m.content_type, m.body, m.sent_ms, m.visible_ms, "
            "m.attempts, m.grp, m.dedup, m.fseq, m.attrs, m.first_received_ms "
            "FROM message_states m "
            "JOIN queues q ON q.key = m.queue "
            "WHERE m.seq > ? ORDER BY m.seq LIMIT ?",
            (after, CHUNK),
        ).fetchall()
        if not rows:
            return
        after = rows[-1][0]
        yield [
            StoredMessage(
                r[0],
                r[1],
                r[2],
                r[3],
                bytes(r[4]),
                r[5],
                r[6],
                r[7],
                r[8],
                r[9],
                r[10],
                None if r[11] is None else bytes(r[11]),
                r[12],
            )
            for r in rows
        ]
