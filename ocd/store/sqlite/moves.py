"""The SQLite backend's MoveTasks facet: redrives and bulk move tasks."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence

from ocd.errors import (
    QueueNotFound,
    StoreConflict,
)
from ocd.store.rows import (
    move_task_from_row,
    move_task_row,
)
from ocd.store.sqlite import fifo, removal, sql
from ocd.store.sqlite.core import SqliteCore
from ocd.store.sqlite.errors import translate
from ocd.store.sqlite.ops import (
    Call,
    Tx,
    chunks,
    fetch_all,
    marks,
    read_all,
    read_one,
)
from ocd.store.values import (
    MOVE_ACTIVE,
    MOVE_FINISHED,
    MOVE_TASK_KEPT_MS,
    BrowseCursor,
    DeadLetter,
    MoveTaskRow,
    QueueRecord,
)


class SqliteMoves(SqliteCore):
    # One process owns the data (``guard``) and gives its own tasks its node id: the tasks
    # of its predecessor, adopted at start, are the only ones it ever finds.
    orphans_appear = False

    async def move_messages(
        self, source: QueueRecord, dest: QueueRecord, seqs: Sequence[int], now_ms: int
    ) -> int:
        def move(tx: Tx) -> int:
            return self._move(tx, source, dest, seqs, now_ms)

        result: int = await self._submit(Call(move, most_rows=len(seqs)))
        return result

    def _move(
        self, tx: Tx, source: QueueRecord, dest: QueueRecord, seqs: Sequence[int], now_ms: int
    ) -> int:
        if not self.catalogue.knows(dest.key):  # a move must never turn into a delete
            raise QueueNotFound(dest.name)
        groups: set[str] = set()
        if source.fifo:  # the groups the moved messages leave
            for chunk in chunks(seqs):
                groups.update(
                    r[1]
                    for r in fetch_all(
                        tx.conn,
                        sql.FIFO_INFO.format(marks=marks(len(chunk))),
                        (source.key, *chunk),
                    )
                    if r[1] is not None
                )
        moved, _ = removal.dead_letter(
            self.catalogue, tx, source, seqs, DeadLetter(dest), now_ms, groups
        )
        fifo.refresh(tx, source.key, groups)
        return moved

    async def create_move_task(self, task: MoveTaskRow, now_ms: int) -> None:
        row = move_task_row(dataclasses.replace(task, node=self.node_id))

        def insert(tx: Tx) -> None:
            if not fetch_all(tx.conn, sql.INSERT_MOVE_TASK, row):
                raise StoreConflict(
                    f"a redrive of {task.source} is running", "move_task", self.where, "create"
                )
            tx.conn.execute(sql.FORGET_MOVE_TASKS, (now_ms - MOVE_TASK_KEPT_MS,))

        await self._submit(Call(insert))

    async def move_tasks(self) -> list[MoveTaskRow]:
        assert self._r is not None
        try:
            rows = await read_all(self._r, sql.SELECT_MOVE_TASKS, ())
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
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
        def chunk(tx: Tx) -> MoveTaskRow | None:
            if dest is None:
                n = removal.delete(tx, source, seqs)
            else:
                n = self._move(tx, source, dest, seqs, now_ms) if seqs else 0
            c = cursor or (None, None)
            rows = fetch_all(tx.conn, sql.MOVE_TASK_PROGRESS, (n, c[0], c[1], task_id))
            return move_task_from_row(rows[0]) if rows else None

        result: MoveTaskRow | None = await self._submit(Call(chunk, most_rows=len(seqs)))
        return result

    async def set_move_task_state(
        self,
        task_id: str,
        state: str,
        now_ms: int,
        error: str | None = None,
        expect: Sequence[str] = MOVE_ACTIVE,
    ) -> MoveTaskRow | None:
        finished = now_ms if state in MOVE_FINISHED else None
        statement = sql.SET_MOVE_TASK_STATE.format(marks=marks(len(expect)))

        def change(tx: Tx) -> MoveTaskRow | None:
            rows = fetch_all(tx.conn, statement, (state, error, finished, task_id, *expect))
            return move_task_from_row(rows[0]) if rows else None

        result: MoveTaskRow | None = await self._submit(Call(change))
        return result

    async def adopt_move_tasks(self) -> list[MoveTaskRow]:
        assert self._r is not None
        try:  # a read first: asked every few seconds, this must not cost a commit each time
            (orphans,) = await read_one(self._r, sql.COUNT_ORPHAN_MOVE_TASKS, (self.node_id,))
        except sqlite3.Error as e:
            raise translate(e, self.where, "read") from e
        if not orphans:
            return []

        def adopt(tx: Tx) -> list[MoveTaskRow]:
            rows = fetch_all(tx.conn, sql.ADOPT_MOVE_TASKS, (self.node_id, self.node_id))
            return [move_task_from_row(r) for r in rows]

        result: list[MoveTaskRow] = await self._submit(Call(adopt))
        return result
