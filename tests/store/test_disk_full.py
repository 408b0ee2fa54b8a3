"""The store on a full disk: sends refused up front, claims and acks going on, results that
tell the truth. SQLite on a real small tmpfs (skipped, saying why, where none can be
mounted); the ``full()`` contract on both backends."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ocd.errors import StoreFull
from ocd.store import Claim, DeadLetter, LeaseKind, NewMessage, SqliteStore, Store
from ocd.store.sqlite import core as sqlite_core
from tests.acceptance.disk import CannotMount, fill, small_filesystem
from tests.helpers import eventually
from tests.store.conftest import T0

BODY = b"x" * 20_000


async def test_a_store_with_room_is_not_full(store: Store):
    assert store.full() is None


@pytest.fixture
def volume(tmp_path: Path):
    try:
        with small_filesystem(tmp_path / "volume", 24) as v:
            yield v
    except CannotMount as e:
        pytest.skip(str(e))


async def backlog_on_disk(data: Path, **options: int) -> int:
    """The backlog of queue "jobs" as a store opened anew on ``data`` reads it."""
    again = SqliteStore(data, **options)
    await again.open(T0)
    try:
        q = again.queue("jobs")
        assert q is not None
        return again.backlog_count(q)
    finally:
        await again.close()


async def fill_store(store: SqliteStore, queue: object) -> int:
    sent = 0
    while True:
        batch = [NewMessage(f"m{sent + i}", "json", BODY, T0, T0) for i in range(10)]
        try:
            await store.enqueue(queue, batch)  # type: ignore[arg-type]
        except StoreFull:
            return sent
        sent += 10


async def test_on_a_full_disk_sends_are_refused_without_a_write_and_claims_and_acks_go_on(
    volume: Path,
):
    store = SqliteStore(volume / "data", disk_reserve_bytes=4 * 2**20)
    await store.open(T0)
    try:
        q = await store.ensure_queue("jobs", "local", None, T0)
        assert (volume / "data" / "scheduler.sqlite.reserve").exists()
        sent = await fill_store(store, q)
        reason = store.full()
        assert reason is not None and str(volume / "data") in reason
        assert not (volume / "data" / "scheduler.sqlite.reserve").exists()  # released
        commits = store.commits
        with pytest.raises(StoreFull, match="the disk is full"):
            await store.enqueue(q, [NewMessage("late", "json", b"{}", T0, T0)])
        assert store.commits == commits  # refused up front, not tried
        drained = 0
        while True:
            claimed = await store.claim(
                q, Claim(50, T0, T0 + 60_000, 5, DeadLetter(None), LeaseKind.PULL)
            )
            if not claimed.deliveries:
                break
            settled = await store.settle(
                q, [d.seq for d in claimed.deliveries], [], [], DeadLetter(None), T0
            )
            assert settled.acked == len(claimed.deliveries)
            drained += settled.acked
        assert drained == sent  # every accepted send, and nothing refused, came out
        assert store.backlog_count(q) == 0
    finally:
        await store.close()


async def test_a_commit_is_reported_committed_even_when_the_bookkeeping_after_it_fails(
    tmp_path: Path,
):
    store = SqliteStore(tmp_path / "data", disk_reserve_bytes=0)
    await store.open(T0)

    def broken(operations: int, on_loop: bool) -> None:
        raise RuntimeError("a bug after COMMIT")

    try:
        q = await store.ensure_queue("jobs", "local", None, T0)
        store.on_commit = broken
        await store.enqueue(q, [NewMessage("a", "json", b"{}", T0, T0)])  # does not raise
        claimed = await store.claim(
            q, Claim(10, T0, T0 + 60_000, 5, DeadLetter(None), LeaseKind.PULL)
        )
        assert [d.id for d in claimed.deliveries] == ["a"]  # committed, and said so
    finally:
        store.on_commit = None
        await store.close()
    assert await backlog_on_disk(tmp_path / "data", disk_reserve_bytes=0) == 1  # the send


async def test_an_ack_that_meets_the_full_disk_first_is_done_in_the_reserves_room(volume: Path):
    # A consumer's ack alone in its commit is the first write to find no space (the disk
    # was filled from outside): the reserve is released and the ack goes through, instead
    # of failing the consumer, whose messages would wait out their lease.
    data = volume / "data"
    store = SqliteStore(data, disk_reserve_bytes=4 * 2**20, wal_limit_bytes=64 * 2**10)
    await store.open(T0)
    try:
        q = await store.ensure_queue("jobs", "local", None, T0)
        for i in range(0, 2_000, 500):
            await store.enqueue(
                q, [NewMessage(f"m{i + j}", "json", b"{}", T0, T0) for j in range(500)]
            )
        claimed = await store.claim(
            q, Claim(2_000, T0, T0 + 60_000, 5, DeadLetter(None), LeaseKind.PULL)
        )
        seqs = [d.seq for d in claimed.deliveries]
        assert len(seqs) == 2_000
        # Every commit copied into the database file: the ack's WAL starts over at its
        # 64 KiB, and this ack of 2,000 rows needs more than that.
        with sqlite3.connect(data / "scheduler.sqlite") as c:
            busy, frames, copied = c.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert busy == 0 and frames == copied
        fill(volume / "filler")
        assert store.full() is None  # nothing has met the full disk yet
        settled = await store.settle(q, seqs, [], [], DeadLetter(None), T0)
        assert settled.acked == 2_000
        assert store.full() is not None  # and sends are refused from now on
        assert not (data / "scheduler.sqlite.reserve").exists()
        with pytest.raises(StoreFull, match="the disk is full"):
            await store.enqueue(q, [NewMessage("late", "json", b"{}", T0, T0)])
    finally:
        await store.close()
    reopened = await backlog_on_disk(data, disk_reserve_bytes=4 * 2**20, wal_limit_bytes=2**16)
    assert reopened == 0  # the ack is on disk


async def test_an_idle_store_takes_sends_again_once_room_is_freed_with_nothing_committed(
    volume: Path, monkeypatch: pytest.MonkeyPatch
):
    """The checkpoint loop waits for a commit while there is nothing to checkpoint; a disk
    that fills wakes it, so that it looks for room again although nothing can commit."""
    monkeypatch.setattr(sqlite_core, "CHECKPOINT_EVERY_S", 0.01)
    store = SqliteStore(volume / "data", disk_reserve_bytes=4 * 2**20)
    await store.open(T0)
    try:
        q = await store.ensure_queue("jobs", "local", None, T0)
        await eventually(lambda: store.checkpoint_idle, 10)
        filler = volume / "filler"
        fill(filler)
        big = [NewMessage(f"m{i}", "json", BODY, T0, T0) for i in range(100)]  # 2 MB
        with pytest.raises(StoreFull):  # the first write meets the full disk: no commit
            await store.enqueue(q, big)
        assert store.full() is not None
        filler.unlink()  # the operator frees space; no send, claim or ack comes meanwhile
        await eventually(lambda: store.full() is None, 10)
        await store.enqueue(q, [NewMessage("again", "json", b"{}", T0, T0)])
    finally:
        await store.close()
