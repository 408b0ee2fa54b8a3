"""Backups of a live database, restores, and refusing to run on a damaged file."""

from __future__ import annotations

import asyncio

import pytest

from ocd.errors import SchemaError, StoreError, StoreLockedError
from ocd.store import Claim, DeadLetter, NewMessage, SqliteStore
from ocd.store.sqlite.backup import backup, restore

T0 = 1_800_000_000_000


def one(prefix: str, i: int) -> list[NewMessage]:
    return [NewMessage(f"{prefix}{i:028d}", "json", b"1", T0, T0)]


async def test_backup_under_load_then_restore(tmp_path):
    live = SqliteStore(tmp_path / "live")
    await live.open(T0)
    q = await live.ensure_queue("jobs", "local", None, T0)
    for i in range(200):
        await live.enqueue(q, one("pre-", i))
    acked = (await live.claim(q, Claim(50, T0, T0 + 1000, 4, DeadLetter(None)))).deliveries
    await live.settle(q, [d.seq for d in acked], [], [], DeadLetter(None), T0)
    acked_ids = {d.id for d in acked}

    stop = asyncio.Event()

    async def load() -> int:  # sends keep committing while the backup runs
        n = 0
        while not stop.is_set():
            await live.enqueue(q, one("during", n))
            n += 1
        return n

    producer = asyncio.create_task(load())
    await asyncio.sleep(0)
    size = await asyncio.to_thread(backup, tmp_path / "live", tmp_path / "snap.sqlite")
    stop.set()
    during = await producer
    assert size > 0 and during > 0
    await live.close()

    restore(tmp_path / "snap.sqlite", tmp_path / "restored")
    s = SqliteStore(tmp_path / "restored")
    await s.open(T0)
    rq = s.queue("jobs")
    got = {d.id for d in await s.peek(rq, T0, 100_000)}
    pre = {f"pre-{i:028d}" for i in range(200)}
    assert pre - acked_ids <= got  # every message sent before the backup is there
    assert not acked_ids & got  # every message acked before it is gone
    await s.close()


async def test_restore_refuses_while_ocd_runs_and_refuses_non_ocd_files(tmp_path):
    live = SqliteStore(tmp_path / "live")
    await live.open(T0)
    backup(tmp_path / "live", tmp_path / "snap.sqlite")
    with pytest.raises(StoreLockedError, match="stop it before restoring"):
        restore(tmp_path / "snap.sqlite", tmp_path / "live")
    await live.close()
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(SchemaError):
        restore(tmp_path / "junk.sqlite", tmp_path / "live")
    with pytest.raises(StoreError, match="refusing to overwrite"):
        backup(tmp_path / "live", tmp_path / "snap.sqlite")


async def test_damaged_database_is_refused_with_advice(tmp_path):
    s = SqliteStore(tmp_path)
    await s.open(T0)
    q = await s.ensure_queue("jobs", "local", None, T0)
    for i in range(300):
        await s.enqueue(q, [NewMessage(f"m{i:031d}", "json", b"x" * 500, T0, T0)])
    await s.close()
    db = tmp_path / "scheduler.sqlite"
    data = bytearray(db.read_bytes())
    # Scribble over a page in the middle of the file, as a bad disk would.
    mid = (len(data) // 4096 // 2) * 4096
    data[mid + 100 : mid + 1000] = b"\xff" * 900
    db.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="restore a backup"):
        await SqliteStore(tmp_path).open(T0)
