"""The SQLite backend's CatalogueReads and QueueAdmin facets: queues and pull consumers,
read from the shared catalogue, written through the writer."""

from __future__ import annotations

import dataclasses
import secrets
import sqlite3

from ocd.errors import (
    QueueNotFound,
    StoreConflict,
)
from ocd.store.catalogue import FromCatalogue
from ocd.store.rows import (
    consumer_settings,
    extras_from_row,
    extras_row,
    queue_from_row,
    settings_row,
)
from ocd.store.sqlite import fifo, layout, sql
from ocd.store.sqlite.core import SqliteCore
from ocd.store.sqlite.errors import translate
from ocd.store.sqlite.ops import (
    Call,
    Tx,
    fetch_all,
    fetch_one,
    read_all,
)
from ocd.store.values import PullConsumer, QueueExtras, QueueRecord, QueueSettings


class SqliteQueues(FromCatalogue, SqliteCore):
    async def lookup(self, name: str, account: str = "local") -> QueueRecord | None:
        return self.catalogue.queue(name, account)  # one node: the catalogue is the truth

    async def lookup_by_id(self, queue_id: str) -> QueueRecord | None:
        return self.catalogue.queue_by_id(queue_id)

    def known_empty(self, queue: QueueRecord) -> bool:
        return self.catalogue.count(queue.key) <= 0  # every change is this node's

    async def create_queue(
        self, name: str, account: str, settings: QueueSettings, now_ms: int
    ) -> QueueRecord:
        def insert(tx: Tx) -> QueueRecord:
            row = (account, name, secrets.token_hex(16), now_ms, now_ms, *settings_row(settings))
            if not fetch_all(tx.conn, sql.INSERT_QUEUE + " RETURNING key", row):
                raise StoreConflict(
                    f"a queue named {name} already exists", "queue_name", self.where, "create"
                )
            return queue_from_row(fetch_one(tx.conn, sql.SELECT_QUEUE, (account, name)))

        record: QueueRecord = await self._submit(Call(insert))
        self.catalogue.remember(record)
        return record

    async def ensure_queue(
        self, name: str, account: str, settings: QueueSettings | None, now_ms: int
    ) -> QueueRecord:
        existing = self.queue(name, account)
        if existing is not None and (settings is None or settings == existing.settings):
            return existing
        if existing is not None:
            assert settings is not None
            return await self.update_queue(existing, settings, now_ms)
        s = settings or QueueSettings()

        def insert(tx: Tx) -> QueueRecord:
            # Two creates of one name may share a group: the second finds the first's row.
            tx.conn.execute(
                sql.INSERT_QUEUE,
                (account, name, secrets.token_hex(16), now_ms, now_ms, *settings_row(s)),
            )
            return queue_from_row(fetch_one(tx.conn, sql.SELECT_QUEUE, (account, name)))

        record: QueueRecord = await self._submit(Call(insert))
        self.catalogue.remember(record)
        return record

    async def update_queue(
        self, queue: QueueRecord, settings: QueueSettings, now_ms: int, new_name: str | None = None
    ) -> QueueRecord:
        name = new_name or queue.name

        def update(tx: Tx) -> None:
            try:
                cur = tx.conn.execute(
                    sql.UPDATE_QUEUE, (name, now_ms, *settings_row(settings), queue.key)
                )
            except sqlite3.IntegrityError:
                raise StoreConflict(
                    f"a queue named {name} already exists", "queue_name", self.where, "rename"
                ) from None
            if cur.rowcount == 0:
                raise QueueNotFound(queue.name)
            tx.notify.add(queue.key)

        await self._submit(Call(update))
        # From the record as it is now, not the caller's copy: a purge or another update
        # may have landed meanwhile.
        current = self.catalogue.by_key(queue.key) or queue
        record = dataclasses.replace(current, name=name, modified_ms=now_ms, settings=settings)
        self.catalogue.remember(record)
        return record

    async def delete_queue(self, queue: QueueRecord) -> None:
        def delete(tx: Tx) -> None:
            tx.conn.execute(sql.DELETE_QUEUE_MESSAGES, (queue.key,))
            fifo.purge(tx, queue.key)
            # Its cursor row stays: a queue that gets its key later never reuses a seq.
            layout.clear(tx, queue.key)
            tx.conn.execute(sql.DELETE_CONSUMER, (queue.key,))
            tx.conn.execute(sql.DELETE_QUEUE, (queue.key,))

        await self._submit(Call(delete))
        self.catalogue.forget(queue)

    async def put_pull_consumer(self, queue: QueueRecord, consumer: PullConsumer) -> PullConsumer:
        """Create the queue's pull consumer, or update its settings (id and creation stay)."""

        def put(tx: Tx) -> PullConsumer:
            rows = fetch_all(
                tx.conn,
                sql.UPSERT_CONSUMER,
                (
                    queue.key,
                    consumer.consumer_id,
                    consumer.created_ms,
                    consumer.dead_letter_queue,
                    consumer_settings(consumer),
                ),
            )
            _key, cid, created = rows[0]
            return dataclasses.replace(
                consumer, queue_key=queue.key, consumer_id=cid, created_ms=created
            )

        stored: PullConsumer = await self._submit(Call(put))
        self.catalogue.put_consumer(stored)
        return stored

    async def delete_pull_consumer(self, queue: QueueRecord) -> bool:
        def delete(tx: Tx) -> int:
            cur = tx.conn.execute(sql.DELETE_CONSUMER, (queue.key,))
            return max(cur.rowcount, 0)

        deleted: int = await self._submit(Call(delete))
        self.catalogue.drop_consumer(queue)
        return deleted > 0

    async def queue_extras(self, queue: QueueRecord) -> QueueExtras:
        assert self._r is not None
        try:
            rows = await read_all(self._r, sql.QUEUE_EXTRAS, (queue.key,))
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        return extras_from_row(*rows[0]) if rows else QueueExtras()

    async def set_queue_extras(self, queue: QueueRecord, extras: QueueExtras) -> None:
        def put(tx: Tx) -> None:
            cur = tx.conn.execute(sql.SET_QUEUE_EXTRAS, (*extras_row(extras), queue.key))
            if cur.rowcount == 0:
                raise QueueNotFound(queue.name)

        await self._submit(Call(put))
