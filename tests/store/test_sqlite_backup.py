"""Backups of a live database, restores, and refusing to run on a damaged file."""

from __future__ import annotations

import asyncio
import sqlite3
import stat

import pytest

from ocd.errors import SchemaError, StoreError, StoreLockedError
from ocd.store import Claim, DeadLetter, NewMessage, SqliteStore
from ocd.store.sqlite import datafiles
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


def _sqlite_file(path, rows: int) -> sqlite3.Connection:
    """A live database in WAL mode, left open with its last commits in the WAL only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("CREATE TABLE t (n INTEGER)")
    con.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(rows)])
    con.commit()
    return con


def _rows(path) -> int:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT count(*) FROM t").fetchone()[0])
    finally:
        con.close()


async def test_backup_carries_d1_r2_and_durable_object_files_into_an_empty_data_dir(tmp_path):
    live = SqliteStore(tmp_path / "live")
    await live.open(T0)
    data = tmp_path / "live"
    d1 = _sqlite_file(data / "d1" / "db-1.sqlite", 300)  # open, its rows in its WAL
    obj = data / "r2" / "photos" / "objects" / "a" / "cat.jpg"
    obj.parent.mkdir(parents=True)
    big = bytes(range(256)) * (datafiles.CHUNK_BYTES // 256) + b"tail"  # two chunks
    obj.write_bytes(big)
    (data / "r2" / "photos" / "empty").write_bytes(b"")
    meta = _sqlite_file(data / "r2" / "photos" / "meta.sqlite", 2)
    do = _sqlite_file(data / "do" / "counter" / "abc123.sqlite", 7)
    size = backup(data, tmp_path / "snap.sqlite")
    assert size > len(big)
    d1.execute("INSERT INTO t VALUES (999)")  # after the backup: not in it
    d1.commit()
    for con in (d1, meta, do):
        con.close()
    await live.close()

    restore(tmp_path / "snap.sqlite", tmp_path / "restored")
    out = tmp_path / "restored"
    assert _rows(out / "d1" / "db-1.sqlite") == 300
    assert _rows(out / "r2" / "photos" / "meta.sqlite") == 2
    assert _rows(out / "do" / "counter" / "abc123.sqlite") == 7
    assert (out / "r2" / "photos" / "objects" / "a" / "cat.jpg").read_bytes() == big
    assert (out / "r2" / "photos" / "empty").read_bytes() == b""
    assert not list(out.glob("**/*-wal"))  # the WAL's commits are inside each copy
    for p in (out / "d1", out / "r2" / "photos" / "objects" / "a"):
        assert stat.S_IMODE(p.stat().st_mode) == 0o700
    assert stat.S_IMODE((out / "d1" / "db-1.sqlite").stat().st_mode) == 0o600
    s = SqliteStore(out)  # the queue database opens clean, the file table gone from it
    await s.open(T0)
    await s.close()
    con = sqlite3.connect(out / "scheduler.sqlite")
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    con.close()
    assert datafiles.TABLE not in tables


async def test_restore_replaces_files_written_after_the_backup(tmp_path):
    data = tmp_path / "live"
    live = SqliteStore(data)
    await live.open(T0)
    (data / "r2" / "b").mkdir(parents=True)
    (data / "r2" / "b" / "kept").write_bytes(b"before")
    backup(data, tmp_path / "snap.sqlite")
    (data / "r2" / "b" / "kept").write_bytes(b"after")
    (data / "r2" / "b" / "later").write_bytes(b"later")
    (data / "d1").mkdir()
    (data / "d1" / "new.sqlite").write_bytes(b"")
    await live.close()
    restore(tmp_path / "snap.sqlite", data)
    assert (data / "r2" / "b" / "kept").read_bytes() == b"before"
    assert not (data / "r2" / "b" / "later").exists()
    assert not (data / "d1").exists()
    assert not (data / ".restoring").exists()
