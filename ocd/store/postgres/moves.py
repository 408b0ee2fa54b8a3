"""MoveTasks on PostgreSQL: moving messages between queues, and bulk move tasks (redrives
and deletes) that survive a restart and are adopted from nodes that went away.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import asyncpg

from ocd.errors import QueueNotFound, StoreConflict
from ocd.store.postgres import fifo, fifo_sql, sql
from ocd.store.postgres.core import PostgresCore
from ocd.store.rows import move_task_from_row, move_task_row
from ocd.store.values import (
    MOVE_ACTIVE,
    MOVE_FINISHED,
    MOVE_TASK_KEPT_MS,
    BrowseCursor,
    DeadLetter,
    MoveTaskRow,
    QueueRecord,
)


class PostgresMoves(PostgresCore):
    orphans_appear = True

    # ---------------------------------------------------------------- moving messages

    async def move_messages(
        self, source: QueueRecord, dest: QueueRecord, seqs: Sequence[int], now_ms: int
    ) -> int:
        async with self._db("write", source) as c, c.transaction():
            await self._durable(c)
            moved = await self._move(c, source, dest, seqs, now_ms)
        self.catalogue.notify(dest.key)
        return moved

    async def _move(
        self,
        c: asyncpg.Connection,
        source: QueueRecord,
        dest: QueueRecord,
        seqs: Sequence[int],
        now_ms: int,
    ) -> int:
        if not self.catalogue.knows(dest.key):  # a move must never turn into a delete
            raise QueueNotFound(dest.name)
        groups: list[str] = []
        if source.fifo or dest.fifo:
            await fifo.lock(c, *[q.key for q in (source, dest) if q.fifo])
        if source.fifo:  # the groups the moved messages leave
            groups = [r[1] for r in await c.fetch(fifo_sql.FIFO_INFO, source.key, list(seqs))]
        moved, _ = await self._dead_letter(c, source, seqs, DeadLetter(dest), now_ms)
        if source.fifo:
            await fifo.refresh(c, source.key, groups)
        return moved

    # ---------------------------------------------------------------- bulk move tasks

    async def create_move_task(self, task: MoveTaskRow, now_ms: int) -> None:
        row = move_task_row(dataclasses.replace(task, node=self.node_id))
        async with self._db("create move task") as c, c.transaction():
            await self._durable(c)
            if await c.fetchrow(sql.INSERT_MOVE_TASK, *row) is None:
                raise StoreConflict(
                    f"a redrive of {task.source} is running", "move_task", self.where, "create"
                )
            await c.execute(sql.FORGET_MOVE_TASKS, now_ms - MOVE_TASK_KEPT_MS)

    async def move_tasks(self) -> list[MoveTaskRow]:
        async with self._db("read move tasks") as c:
            rows = await c.fetch(sql.SELECT_MOVE_TASKS)
        return [move_task_from_row(r) for r in rows]

    async def move_task_chunk(
        self,
        task_id: str,
        source: QueueRecord,
        dest: QueueRecord | None,
        seqs: Sequence[int],
        cursor: BrowseCursor | None,
        now_ms: int,
    ) -> MoveTaskRow | None:
        async with self._db("write", source) as c, c.transaction():
            await self._durable(c)
            if not seqs:
                n = 0
            elif dest is None:
                n = await self._delete(c, source, seqs)
            else:
                n = await self._move(c, source, dest, seqs, now_ms)
            at = cursor or (None, None)
            row = await c.fetchrow(sql.MOVE_TASK_PROGRESS, n, at[0], at[1], task_id)
        if dest is not None and n:
            self.catalogue.notify(dest.key)
        return None if row is None else move_task_from_row(row)

    async def set_move_task_state(
        self,
        task_id: str,
        state: str,
        now_ms: int,
        error: str | None = None,
        expect: Sequence[str] = MOVE_ACTIVE,
    ) -> MoveTaskRow | None:
        finished = now_ms if state in MOVE_FINISHED else None
        async with self._db("change move task") as c, c.transaction():
            await self._durable(c)
            row = await c.fetchrow(
                sql.SET_MOVE_TASK_STATE, state, error, finished, task_id, list(expect)
            )
        return None if row is None else move_task_from_row(row)

    async def adopt_move_tasks(self) -> list[MoveTaskRow]:
        async with self._db("read move tasks") as c:  # asked every few seconds: read first
            if not await c.fetchval(sql.COUNT_ORPHAN_MOVE_TASKS, self.node_id):
                return []
        async with self._db("adopt move tasks") as c, c.transaction():
            await self._durable(c)
            rows = await c.fetch(sql.ADOPT_MOVE_TASKS, self.node_id)
        return [move_task_from_row(r) for r in rows]
