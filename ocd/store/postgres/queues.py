"""CatalogueReads and QueueAdmin on PostgreSQL: the in-memory catalogue's reads, misses
looked up in the database, and queue and pull-consumer administration.
"""

from __future__ import annotations

import dataclasses
import secrets

from ocd.errors import QueueNotFound, StoreConflict
from ocd.store.catalogue import FromCatalogue
from ocd.store.postgres import fifo, sql
from ocd.store.postgres.core import PostgresCore, _rowcount
from ocd.store.rows import (
    consumer_settings,
    extras_from_row,
    extras_row,
    queue_from_row,
    settings_row,
)
from ocd.store.values import PullConsumer, QueueExtras, QueueRecord, QueueSettings


class PostgresQueues(FromCatalogue, PostgresCore):
    # ---------------------------------------------------------------- catalogue

    def known_empty(self, queue: QueueRecord) -> bool:
        return False  # another node may have sent since this node's counts were read

    async def lookup(self, name: str, account: str = "local") -> QueueRecord | None:
        found = self.catalogue.queue(name, account)
        if found is None:
            async with self._db("read queue") as c:
                row = await c.fetchrow(sql.SELECT_QUEUE, account, name)
            if row is not None:
                found = queue_from_row(row)
                self.catalogue.remember(found)
                self._catalogue_dirty.set()  # its consumer too, and anything else missed
        return found

    async def lookup_by_id(self, queue_id: str) -> QueueRecord | None:
        found = self.catalogue.queue_by_id(queue_id)
        if found is None and len(queue_id) == 32:
            async with self._db("read queue") as c:
                row = await c.fetchrow(sql.SELECT_QUEUES + " WHERE queue_id = $1", queue_id)
            if row is not None:
                found = queue_from_row(row)
                self.catalogue.remember(found)
                self._catalogue_dirty.set()
        return found

    # ---------------------------------------------------------------- administration

    async def create_queue(
        self, name: str, account: str, settings: QueueSettings, now_ms: int
    ) -> QueueRecord:
        async with self._db("create queue") as c, c.transaction():
            await self._durable(c)
            row = await c.fetchrow(
                sql.INSERT_QUEUE,
                account,
                name,
                secrets.token_hex(16),
                now_ms,
                now_ms,
                *settings_row(settings),
            )
            if row is None:
                raise StoreConflict(
                    f"a queue named {name} already exists", "queue_name", self.where, "create"
                )
            await c.execute(sql.NOTIFY, sql.CATALOGUE_CHANNEL)
        record = queue_from_row(row)
        self.catalogue.remember(record)
        return record

    async def ensure_queue(
        self, name: str, account: str, settings: QueueSettings | None, now_ms: int
    ) -> QueueRecord:
        existing = self.queue(name, account)
        if existing is None:
            try:
                return await self.create_queue(name, account, settings or QueueSettings(), now_ms)
            except StoreConflict:
                async with self._db("read queue") as c:
                    row = await c.fetchrow(sql.SELECT_QUEUE, account, name)
                if row is None:
                    raise
                existing = queue_from_row(row)
                self.catalogue.remember(existing)
        if settings is None or settings == existing.settings:
            return existing
        return await self.update_queue(existing, settings, now_ms)

    async def update_queue(
        self, queue: QueueRecord, settings: QueueSettings, now_ms: int, new_name: str | None = None
    ) -> QueueRecord:
        name = new_name or queue.name
        try:
            async with self._db("update queue") as c, c.transaction():
                await self._durable(c)
                row = await c.fetchrow(
                    sql.UPDATE_QUEUE, name, now_ms, *settings_row(settings), queue.key
                )
                if row is None:
                    raise QueueNotFound(queue.name)
                await c.execute(sql.NOTIFY, sql.CATALOGUE_CHANNEL)
                await c.execute(sql.NOTIFY, sql.queue_channel(queue.key))
        except StoreConflict as e:
            raise StoreConflict(
                f"a queue named {name} already exists", "queue_name", self.where, "rename"
            ) from e
        record = queue_from_row(row)
        self.catalogue.remember(record)
        self.catalogue.notify(queue.key)
        return record

    async def delete_queue(self, queue: QueueRecord) -> None:
        async with self._db("delete queue") as c, c.transaction():
            await self._durable(c)
            # The locks every writer of the queue takes, in their order (the FIFO lock; the
            # cursor, then the tail row; the queue's row last), so that the deletion waits
            # for them, and they for it, without a cycle.
            if queue.fifo:
                await fifo.lock(c, queue.key)
            await c.execute(sql.LOCK_CURSOR, queue.key)
            await c.execute(sql.LOCK_TAIL, queue.key)
            await c.execute(sql.DELETE_QUEUE, queue.key)
            rows = sql.DELETE_FIFO_QUEUE_ROWS if queue.fifo else sql.DELETE_QUEUE_ROWS
            await c.execute(rows, queue.key)
            await c.execute(sql.NOTIFY, sql.CATALOGUE_CHANNEL)
            await c.execute(sql.NOTIFY, sql.queue_channel(queue.key))
        self.catalogue.forget(queue)

    async def put_pull_consumer(self, queue: QueueRecord, consumer: PullConsumer) -> PullConsumer:
        async with self._db("write", queue) as c, c.transaction():
            await self._durable(c)
            row = await c.fetchrow(
                sql.UPSERT_CONSUMER,
                queue.key,
                consumer.consumer_id,
                consumer.created_ms,
                consumer.dead_letter_queue,
                consumer_settings(consumer),
            )
            await c.execute(sql.NOTIFY, sql.CATALOGUE_CHANNEL)
        _key, cid, created = row
        stored = dataclasses.replace(
            consumer, queue_key=queue.key, consumer_id=cid, created_ms=created
        )
        self.catalogue.put_consumer(stored)
        return stored

    async def delete_pull_consumer(self, queue: QueueRecord) -> bool:
        async with self._db("delete consumer") as c, c.transaction():
            await self._durable(c)
            status = await c.execute(sql.DELETE_CONSUMER, queue.key)
            await c.execute(sql.NOTIFY, sql.CATALOGUE_CHANNEL)
        self.catalogue.drop_consumer(queue)
        return bool(status != "DELETE 0")

    # ---------------------------------------------------------------- SQS queue extras

    async def queue_extras(self, queue: QueueRecord) -> QueueExtras:
        async with self._db("read") as c:
            row = await c.fetchrow(sql.QUEUE_EXTRAS, queue.key)
        return QueueExtras() if row is None else extras_from_row(row[0], row[1])

    async def set_queue_extras(self, queue: QueueRecord, extras: QueueExtras) -> None:
        async with self._db("write", queue) as c, c.transaction():
            await self._durable(c)
            status = await c.execute(sql.SET_QUEUE_EXTRAS, queue.key, *extras_row(extras))
        if _rowcount(status) == 0:
            raise QueueNotFound(queue.name)
