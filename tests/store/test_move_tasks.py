"""Conformance of bulk move tasks as the store keeps them (every backend): a task's row, its
chunks moving messages and recording progress in one transaction, one active redrive per
source, state changes only from the states expected, and adoption after a restart."""

from __future__ import annotations

import dataclasses

import pytest

from ocd.errors import StoreConflict
from ocd.store import BrowseCursor, BrowseQuery, Claim, DeadLetter, MoveTaskRow, NewMessage
from tests.store.conftest import T0

NO_DLQ = DeadLetter(None)


def sent(n, prefix="m"):
    return [
        NewMessage(f"{prefix}{i:031d}", "text", f"{prefix}{i}".encode(), T0 + i, T0 + i)
        for i in range(n)
    ]


def task(tid, source, dest, total=0, **kw):
    return MoveTaskRow(
        tid, source.account, source.queue_id, source.name,
        dest.queue_id if dest else None, dest.name if dest else None, total, T0, **kw,
    )  # fmt: skip


async def test_a_move_chunk_moves_messages_and_records_progress_and_cursor(store):
    src = await store.ensure_queue("jobs", "local", None, T0)
    dlq = await store.ensure_queue("jobs-dlq", "local", None, T0)
    await store.enqueue(dlq, sent(5))
    rows = await store.browse(dlq, T0 + 10, BrowseQuery(limit=10))
    await store.create_move_task(
        task("t1", dlq, src, 5, rate=7, bound=BrowseCursor(rows[-1].sent_ms, rows[-1].seq)), T0
    )
    after = await store.move_task_chunk(
        "t1", dlq, src, [r.seq for r in rows[:3]], BrowseCursor(rows[2].sent_ms, rows[2].seq), T0
    )
    assert after is not None
    assert (after.done, after.state, after.rate) == (3, "running", 7)
    assert after.cursor == BrowseCursor(rows[2].sent_ms, rows[2].seq)
    assert after.bound == BrowseCursor(rows[-1].sent_ms, rows[-1].seq)
    assert after.node == store.node_id
    moved = (await store.claim(src, Claim(10, T0 + 10, T0 + 1000, 5, NO_DLQ))).deliveries
    assert sorted(d.id for d in moved) == [m.id for m in sent(3)]
    assert all(d.attempts == 1 for d in moved)  # reset by the move, this claim counted
    assert (await store.backlog(dlq)).count == 2
    # seqs no longer in the source are skipped, not counted
    again = await store.move_task_chunk("t1", dlq, src, [rows[0].seq], None, T0)
    assert again is not None and again.done == 3 and again.cursor == after.cursor
    [listed] = await store.move_tasks()
    assert listed == again


async def test_a_delete_task_chunk_deletes(store):
    q = await store.ensure_queue("jobs", "local", None, T0)
    await store.enqueue(q, sent(4))
    rows = await store.browse(q, T0 + 10, BrowseQuery(limit=10))
    await store.create_move_task(task("d1", q, None, 4), T0)
    after = await store.move_task_chunk("d1", q, None, [r.seq for r in rows[:2]], None, T0)
    assert after is not None and after.done == 2 and after.destination is None
    assert (await store.backlog(q)).count == 2


async def test_one_active_redrive_per_source_queue(store):
    src = await store.ensure_queue("jobs", "local", None, T0)
    dlq = await store.ensure_queue("jobs-dlq", "local", None, T0)
    await store.create_move_task(task("a", dlq, src), T0)
    with pytest.raises(StoreConflict):
        await store.create_move_task(task("b", dlq, src), T0)
    await store.create_move_task(task("del", dlq, None), T0)  # deletes are not redrives
    assert await store.set_move_task_state("a", "cancelling", T0) is not None
    with pytest.raises(StoreConflict):  # cancelling is still active
        await store.create_move_task(task("b", dlq, src), T0)
    done = await store.set_move_task_state("a", "cancelled", T0 + 5)
    assert done is not None and (done.state, done.finished_ms) == ("cancelled", T0 + 5)
    await store.create_move_task(task("b", dlq, src), T0 + 6)
    assert {t.task_id for t in await store.move_tasks()} == {"a", "b", "del"}


async def test_a_state_changes_only_from_the_states_expected(store):
    src = await store.ensure_queue("jobs", "local", None, T0)
    dlq = await store.ensure_queue("jobs-dlq", "local", None, T0)
    await store.create_move_task(task("a", dlq, src), T0)
    failed = await store.set_move_task_state("a", "failed", T0 + 1, "the queue went away")
    assert failed is not None and failed.error == "the queue went away"
    assert await store.set_move_task_state("a", "cancelling", T0 + 2) is None  # finished
    [row] = await store.move_tasks()
    assert (row.state, row.finished_ms) == ("failed", T0 + 1)
    assert await store.set_move_task_state("nope", "cancelled", T0) is None
    assert await store.move_task_chunk("nope", dlq, src, [], None, T0) is None


async def test_a_chunk_reports_a_cancel_asked_for_meanwhile(store):
    src = await store.ensure_queue("jobs", "local", None, T0)
    dlq = await store.ensure_queue("jobs-dlq", "local", None, T0)
    await store.create_move_task(task("a", dlq, src), T0)
    await store.set_move_task_state("a", "cancelling", T0)
    after = await store.move_task_chunk("a", dlq, src, [], None, T0)
    assert after is not None and after.state == "cancelling"


async def test_finished_tasks_are_forgotten_after_their_keeping_time(store):
    src = await store.ensure_queue("jobs", "local", None, T0)
    dlq = await store.ensure_queue("jobs-dlq", "local", None, T0)
    await store.create_move_task(task("old", dlq, src), T0)
    await store.set_move_task_state("old", "completed", T0)
    later = T0 + 15 * 86_400_000
    await store.create_move_task(
        dataclasses.replace(task("new", dlq, src), started_ms=later), later
    )
    assert [t.task_id for t in await store.move_tasks()] == ["new"]


async def test_active_tasks_are_adopted_by_the_next_owner_after_a_restart(open_store, tmp_path):
    first = await open_store()
    src = await first.ensure_queue("jobs", "local", None, T0)
    dlq = await first.ensure_queue("jobs-dlq", "local", None, T0)
    await first.create_move_task(task("live", dlq, src, 3), T0)
    await first.create_move_task(task("over", dlq, None, 3), T0)
    await first.set_move_task_state("over", "completed", T0)
    assert await first.adopt_move_tasks() == []  # its own tasks
    await first.close()
    second = await open_store(T0 + 1000)
    adopted = await second.adopt_move_tasks()
    assert [(t.task_id, t.node) for t in adopted] == [("live", second.node_id)]
    assert await second.adopt_move_tasks() == []  # once
    assert {t.task_id: t.state for t in await second.move_tasks()} == {
        "live": "running",
        "over": "completed",
    }
