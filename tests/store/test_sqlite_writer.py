"""The SQLite writer's choice of thread: small groups commit on the event loop, large ones
and every group after slow inline commits on the writer's own thread. And the WAL file: kept
under its limit, written full size before the first commit, recovered after a crash.

A real SQLite file; the writer's clock is a fake one that an operation can move forward,
which is how a slow disk shows up to the writer (time asleep in the commit).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sqlite3
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from ocd.errors import StoreError
from ocd.store import DeadLetter, KvEntry, KvNamespace, NewMessage, QueueRecord, SqliteStore
from ocd.store.sqlite import core as sqlite_core
from ocd.store.sqlite import writer as w
from ocd.store.sqlite.ops import Call, Tx
from ocd.store.sqlite.writer import Writer
from tests.helpers import eventually

T0 = 1_800_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Rig:
    writer: Writer
    clock: Clock
    committed: list[bool]  # per commit: did it run on the loop?


@pytest.fixture
async def rig(tmp_path):
    clock = Clock()
    committed: list[bool] = []
    wr = Writer(
        tmp_path / "w.sqlite",
        "full",
        lambda tx: None,
        lambda tx, ops: committed.append(tx.on_loop),
        monotonic=clock,
        asleep=clock,  # an operation that moves the clock on slept that long
    )
    await wr.connect(("PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL"))
    await wr.call(lambda conn: conn.execute("CREATE TABLE t (v INTEGER UNIQUE)"))
    wr.start()
    yield Rig(wr, clock, committed)
    await wr.close()


def insert(v: int, *, takes_s: float = 0.0, clock: Clock | None = None):
    """An operation inserting ``v`` that reports the thread it ran on; ``takes_s`` moves the
    writer's clock on as a slow disk would."""

    def fn(tx: Tx) -> int:
        tx.conn.execute("INSERT INTO t VALUES (?)", (v,))
        if clock is not None:
            clock.now += takes_s
        return threading.get_ident()

    return fn


async def rows(wr: Writer) -> list[int]:
    found = await wr.call(lambda conn: conn.execute("SELECT v FROM t ORDER BY v").fetchall())
    return [v for (v,) in found]


async def test_small_groups_commit_on_the_loop_and_large_ones_on_the_writer_thread(rig):
    loop_thread = threading.get_ident()
    assert await rig.writer.submit(Call(insert(1), most_rows=1)) == loop_thread
    assert await rig.writer.submit(Call(insert(2), most_rows=w.INLINE_ROWS + 1)) != loop_thread
    assert await rig.writer.submit(Call(insert(3))) != loop_thread  # size unknown: a purge, say
    assert rig.committed == [True, False, False]
    assert await rows(rig.writer) == [1, 2, 3]


async def test_slow_inline_commits_send_groups_to_the_thread_for_a_while(rig):
    clock, loop_thread = rig.clock, threading.get_ident()
    threads = []
    for v in range(w.INLINE_WINDOW):  # a disk whose every commit takes 20 ms
        threads.append(
            await rig.writer.submit(Call(insert(v, takes_s=0.02, clock=clock), most_rows=1))
        )
    # More than half of the window slow: the loop stalled that often, and no more.
    moved = w.INLINE_WINDOW // 2 + 1
    assert all(t == loop_thread for t in threads[:moved])
    assert all(t != loop_thread for t in threads[moved:])

    # Once that time is up the disk is judged afresh: fast now, so groups stay on the loop.
    clock.now += w.THREAD_AFTER_SLOW_S + 1
    for v in range(100, 100 + w.INLINE_WINDOW):
        assert await rig.writer.submit(Call(insert(v), most_rows=1)) == loop_thread
    assert len(await rows(rig.writer)) == 2 * w.INLINE_WINDOW


async def test_a_disk_still_slow_after_the_pause_sends_groups_back_to_the_thread(rig):
    clock, loop_thread = rig.clock, threading.get_ident()

    async def slow_commits(first: int, n: int) -> list[int]:
        return [
            await rig.writer.submit(Call(insert(v, takes_s=0.02, clock=clock), most_rows=1))
            for v in range(first, first + n)
        ]

    await slow_commits(0, w.INLINE_WINDOW)
    clock.now += w.THREAD_AFTER_SLOW_S + 1
    threads = await slow_commits(100, w.INLINE_WINDOW)
    moved = w.INLINE_WINDOW // 2 + 1  # the loop stalls this often per pause, no more
    assert all(t == loop_thread for t in threads[:moved])
    assert all(t != loop_thread for t in threads[moved:])


async def test_single_very_slow_commits_among_fast_ones_keep_groups_on_the_loop(rig):
    """A shared host's occasional fsync of tens of milliseconds is not a slow disk."""
    clock, loop_thread = rig.clock, threading.get_ident()
    for v in range(4 * w.INLINE_WINDOW):
        takes_s = 0.1 if v % 3 == 0 else 0.0  # a third of the commits take 100 ms
        thread = await rig.writer.submit(Call(insert(v, takes_s=takes_s, clock=clock), most_rows=1))
        assert thread == loop_thread, f"commit {v} went to the writer's thread"


@pytest.mark.parametrize("size", [1, None], ids=["on-the-loop", "on-the-thread"])
async def test_a_failing_operation_fails_alone_and_its_group_commits(rig, size):
    def broken(tx: Tx) -> None:
        raise RuntimeError("a bug in an operation")

    results = await asyncio.gather(
        rig.writer.submit(Call(insert(1), most_rows=size)),
        rig.writer.submit(Call(insert(1), most_rows=size)),  # UNIQUE: fails inside SQLite
        rig.writer.submit(Call(broken, most_rows=size)),
        rig.writer.submit(Call(insert(2), most_rows=size)),
        return_exceptions=True,
    )
    assert isinstance(results[0], int) and isinstance(results[3], int)
    assert isinstance(results[1], StoreError) and "UNIQUE" in str(results[1])
    assert isinstance(results[2], StoreError) and "a bug" in str(results[2])
    assert await rows(rig.writer) == [1, 2]
    assert await rig.writer.submit(Call(insert(3), most_rows=size)) is not None  # still writing


async def test_a_group_on_the_loop_is_durable_when_its_caller_hears_back(rig, tmp_path):
    await rig.writer.submit(Call(insert(7), most_rows=1))
    assert rig.committed == [True]
    # Another connection (another process would do the same) sees the committed row.
    with sqlite3.connect(tmp_path / "w.sqlite") as other:
        assert other.execute("SELECT v FROM t").fetchall() == [(7,)]


@pytest.mark.parametrize("size", [1, None], ids=["on-the-loop", "on-the-thread"])
async def test_an_operation_that_raises_a_bug_fails_alone_and_the_writer_goes_on(rig, size):
    def broken(tx: Tx) -> None:
        raise KeyError("a bug in an operation")

    results = await asyncio.gather(
        rig.writer.submit(Call(insert(1), most_rows=size)),
        rig.writer.submit(Call(broken, most_rows=size)),  # the group's only failure
        rig.writer.submit(Call(insert(2), most_rows=size)),
        return_exceptions=True,
    )
    assert isinstance(results[0], int) and isinstance(results[2], int)
    assert isinstance(results[1], StoreError) and "a bug" in str(results[1])
    assert await rig.writer.submit(Call(insert(3), most_rows=size)) is not None
    assert await rows(rig.writer) == [1, 2, 3]


async def submit_after(wr: Writer, turns: int, op: Call) -> object:
    for _ in range(turns):
        await asyncio.sleep(0)
    return await wr.submit(op)


async def test_sends_arriving_over_several_loop_turns_share_one_commit(rig):
    # As requests parsed one after another by a busy loop: one more each turn.
    await asyncio.gather(
        *(submit_after(rig.writer, t, Call(insert(t), most_rows=1)) for t in range(6))
    )
    assert len(rig.committed) == 1  # one commit, one fsync, for all six
    assert await rows(rig.writer) == [0, 1, 2, 3, 4, 5]


async def test_a_send_waits_for_company_at_most_gather_s(rig):
    # A send every loop turn without end, and a loop turn takes 1 ms.
    async def send(turns: int) -> object:
        for _ in range(turns):
            await asyncio.sleep(0)
        rig.clock.now += 0.001
        return await rig.writer.submit(Call(insert(turns), most_rows=1))

    await asyncio.gather(*(send(t) for t in range(20)))
    # Groups of about GATHER_S / 1 ms + 1 sends, not one group of 20 (which has no deadline).
    assert w.GATHER_S <= 0.003
    assert len(rig.committed) >= 5


async def test_claims_and_acks_are_not_held_back_for_company(rig):
    # Nothing of theirs is fsynced, so there is nothing to share: each goes at once.
    ops = [Call(insert(t), durable=False, most_rows=1) for t in range(6)]
    await asyncio.gather(*(submit_after(rig.writer, t, op) for t, op in enumerate(ops)))
    assert len(rig.committed) >= 3


async def test_the_wal_file_stays_bounded_while_sends_keep_coming(tmp_path):
    limit = 256 * 1024
    store = SqliteStore(tmp_path / "data", wal_limit_bytes=limit)
    await store.open(T0)
    wal = tmp_path / "data" / "scheduler.sqlite-wal"
    try:
        q = await store.ensure_queue("jobs", "local", None, T0)
        grew: list[int] = []
        sends = 0

        async def came_back_under_the_limit() -> bool:
            nonlocal sends
            # One send of 100 KB per check, with no pause between them: the checkpoint
            # beside the writer cannot catch up, as under steady production load.
            body = b"x" * 1000
            sent = [NewMessage(f"{sends}-{i}", "json", body, T0, T0) for i in range(100)]
            await store.enqueue(q, sent)
            sends += 1
            size = wal.stat().st_size
            if size > limit:
                grew.append(size)
            return bool(grew) and size <= limit

        await eventually(came_back_under_the_limit, timeout=30, interval=0)
        assert (await store.backlog(q)).count == 100 * sends  # nothing lost on the way
    finally:
        await store.close()


async def count(store: SqliteStore, queue: str) -> int:
    q = store.queue(queue)
    assert q is not None
    return (await store.backlog(q)).count


async def test_an_empty_wal_is_written_full_size_so_that_commits_overwrite_it(tmp_path):
    limit = 2**20
    store = SqliteStore(tmp_path / "data", wal_limit_bytes=limit)
    await store.open(T0)
    wal = tmp_path / "data" / "scheduler.sqlite-wal"
    try:
        assert wal.stat().st_size == limit  # before any send
        q = await store.ensure_queue("jobs", "local", None, T0)
        for n in range(20):
            await store.enqueue(q, [NewMessage(f"{n}", "json", b"{}", T0, T0)])
        assert wal.stat().st_size == limit  # written over, not appended to
    finally:
        await store.close()
    again = SqliteStore(tmp_path / "data", wal_limit_bytes=limit)
    await again.open(T0)
    try:
        assert await count(again, "jobs") == 20
    finally:
        await again.close()


async def test_a_wal_left_by_a_crash_is_recovered_not_overwritten(tmp_path, monkeypatch):
    monkeypatch.setattr(sqlite_core, "CHECKPOINT_EVERY_S", 3600)  # all sends stay in the WAL
    store = SqliteStore(tmp_path / "data")
    await store.open(T0)
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    try:
        q = await store.ensure_queue("jobs", "local", None, T0)
        await store.enqueue(q, [NewMessage(f"{n}", "json", b"{}", T0, T0) for n in range(5)])
        # The files as a kill -9 leaves them: the sends are in the WAL only.
        for name in ("scheduler.sqlite", "scheduler.sqlite-wal"):
            shutil.copyfile(tmp_path / "data" / name, crashed / name)
    finally:
        await store.close()
    assert (crashed / "scheduler.sqlite-wal").stat().st_size > 0
    recovered = SqliteStore(crashed)
    await recovered.open(T0)
    try:
        assert await count(recovered, "jobs") == 5
    finally:
        await recovered.close()


async def test_a_look_at_a_queue_answers_the_same_on_the_loop_and_after_a_slow_disk(tmp_path):
    """A dispatcher's look (``ready``) reads on the event loop while the writer commits there,
    and through the read connection's thread once the disk has been judged slow; the answer
    is the same either way."""
    store = SqliteStore(tmp_path / "data")
    await store.open(T0)
    try:
        q = await store.ensure_queue("jobs", "local", None, T0)
        await store.enqueue(q, [NewMessage(f"m{i}", "json", b"{}", T0, T0) for i in range(3)])
        await store.enqueue(q, [NewMessage("later", "json", b"{}", T0, T0 + 60_000)])
        on_loop = await store.ready(q, T0 + 1, 10)
        assert store._writer is not None
        store._writer._threaded_until = float("inf")  # as after slow inline commits
        assert await store.ready(q, T0 + 1, 10) == on_loop
        assert (on_loop.count, on_loop.first_ready_ms, on_loop.next_visible_ms) == (
            3,
            T0,
            T0 + 60_000,
        )
    finally:
        await store.close()


async def test_single_sends_sharing_a_commit_keep_their_order_around_a_delayed_one(tmp_path):
    """Sends to one queue in one group commit are inserted together; a delayed send among
    them is held, and the others come out in the order they were sent."""
    from ocd.store import Claim, DeadLetter

    store = SqliteStore(tmp_path / "data")
    await store.open(T0)
    try:
        q = await store.ensure_queue("jobs", "local", None, T0)
        other = await store.ensure_queue("other", "local", None, T0)
        sends = [(q, NewMessage(f"a{i}", "json", b"{}", T0, T0)) for i in range(5)]
        sends += [(q, NewMessage("later", "json", b"{}", T0, T0 + 60_000))]
        sends += [(other, NewMessage("elsewhere", "json", b"{}", T0, T0))]
        sends += [(q, NewMessage(f"b{i}", "json", b"{}", T0 + 1, T0 + 1)) for i in range(3)]
        await asyncio.gather(*(store.enqueue(queue, [m]) for queue, m in sends))
        assert store._writer is not None and store._writer.commits < len(sends)  # grouped
        got = await store.claim(q, Claim(100, T0 + 10, T0 + 30_000, 5, DeadLetter(None)))
        assert [d.id for d in got.deliveries] == [f"a{i}" for i in range(5)] + [
            f"b{i}" for i in range(3)
        ]
        assert (await store.backlog(q)).count == 9
        got = await store.claim(other, Claim(100, T0 + 10, T0 + 30_000, 5, DeadLetter(None)))
        assert [d.id for d in got.deliveries] == ["elsewhere"]
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def idle_store(path, monkeypatch) -> AsyncIterator[tuple[SqliteStore, QueueRecord]]:
    """A store with one message sent whose checkpoint loop has copied it and waits; rounds
    every 10 ms, not every half second."""
    monkeypatch.setattr(sqlite_core, "CHECKPOINT_EVERY_S", 0.01)
    store = SqliteStore(path)
    await store.open(T0)
    try:
        q = await store.ensure_queue("jobs", "local", None, T0)
        await store.enqueue(q, [NewMessage("a", "json", b"{}", T0, T0)])
        await eventually(lambda: store.checkpoint_idle, 10)
        yield store, q
    finally:
        await store.close()


def assert_wal_copied(path) -> None:
    """Everything committed was copied into the database file."""
    con = sqlite3.connect(path / "scheduler.sqlite")
    try:
        busy, frames, copied = con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    finally:
        con.close()
    assert busy == 0 and frames == copied


async def test_an_idle_store_stops_checkpointing_until_something_is_committed(
    tmp_path, monkeypatch
):
    """The checkpoint loop copies what was committed, then waits for the next commit
    instead of waking every round (an idle daemon's wake-ups cost a hop to two threads
    each), and checkpoints again after it."""
    async with idle_store(tmp_path / "data", monkeypatch) as (store, q):
        rounds = store.checkpoint_rounds
        await store.enqueue(q, [NewMessage("b", "json", b"{}", T0, T0)])
        await eventually(lambda: store.checkpoint_rounds > rounds, 10)
        await eventually(lambda: store.checkpoint_idle, 10)
        assert_wal_copied(tmp_path / "data")  # before the loop stopped
    assert await count_after_reopen(tmp_path / "data") == 2


async def test_the_clock_mark_of_an_idle_store_wakes_the_checkpoint_loop_once_a_minute(
    tmp_path, monkeypatch
):
    """An idle daemon saves its clock's mark every MARK_EVERY_S: those one-page commits wake
    the waiting checkpoint loop only every QUIET_COMMITS, and then it copies them all."""
    async with idle_store(tmp_path / "data", monkeypatch) as (store, q):
        rounds = store.checkpoint_rounds
        for i in range(1, sqlite_core.QUIET_COMMITS):
            await store.save_clock_mark(T0 + 2_000 * i)
        assert store.checkpoint_idle and store.checkpoint_rounds == rounds
        assert await store.clock_mark() == T0 + 2_000 * (sqlite_core.QUIET_COMMITS - 1)
        await store.save_clock_mark(T0 + 2_000 * sqlite_core.QUIET_COMMITS)
        await eventually(lambda: store.checkpoint_rounds > rounds, 10)
        await eventually(lambda: store.checkpoint_idle, 10)
        assert_wal_copied(tmp_path / "data")
        # a send wakes it at once, whatever the quiet commits before it
        await store.save_clock_mark(T0 + 90_000)
        rounds = store.checkpoint_rounds
        await store.enqueue(q, [NewMessage("b", "json", b"{}", T0, T0)])
        await eventually(lambda: store.checkpoint_rounds > rounds, 10)


async def test_the_sweeps_of_an_idle_store_leave_the_checkpoint_loop_waiting(tmp_path, monkeypatch):
    """The retention sweep runs every few seconds on an idle daemon: with nothing to
    expire it commits nothing that needs a checkpoint; an expired KV key it deletes does."""
    ns = KvNamespace("local", "ns")
    async with idle_store(tmp_path / "data", monkeypatch) as (store, q):
        await store.kv_put(ns, "later", KvEntry(b"x", T0 + 60_000))
        await eventually(lambda: store.checkpoint_idle, 10)
        rounds = store.checkpoint_rounds
        for _ in range(5):
            assert await store.expire(T0 + 1_000) == []
            assert await store.kv_expire(T0 + 1_000) == 0
            # a commit that changes no row (an ack of nothing) adds nothing to copy
            await store.settle(q, [], [], [], DeadLetter(None), T0 + 1_000)
        assert store.checkpoint_idle and store.checkpoint_rounds == rounds
        assert await store.kv_expire(T0 + 60_000) == 1
        await eventually(lambda: store.checkpoint_rounds > rounds, 10)
        assert await store.kv_get(ns, "later", T0) is None


async def count_after_reopen(data) -> int:
    store = SqliteStore(data)
    await store.open(T0)
    try:
        return await count(store, "jobs")
    finally:
        await store.close()
