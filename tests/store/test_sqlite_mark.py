"""The SQLite backend's high-water mark (``scheduler.sqlite.mark``), in process: it covers a
send as soon as the send returns, follows checkpoints when commits are not synced, and a
database older than it is refused unless the loss is accepted."""

from __future__ import annotations

import logging
import shutil
import sqlite3

import pytest

from ocd.errors import StoreBehind, StoreLockedError
from ocd.store import NewMessage, SqliteStore
from ocd.store.sqlite import sql
from ocd.store.sqlite.mark import mark_path, read_mark
from tests.helpers import eventually
from tests.store.conftest import T0


def msg(i: int) -> list[NewMessage]:
    return [NewMessage(f"m{i:031d}", "json", b"1", T0, T0)]


async def sent(tmp_path, n: int, start: int = 0, **options) -> None:
    s = SqliteStore(tmp_path, **options)
    await s.open(T0)
    q = await s.ensure_queue("jobs", "local", None, T0)
    for i in range(start, start + n):
        await s.enqueue(q, msg(i))
    await s.close()


async def test_mark_covers_each_send_as_soon_as_it_returns(tmp_path):
    s = SqliteStore(tmp_path)
    await s.open(T0)
    try:
        q = await s.ensure_queue("jobs", "local", None, T0)
        before = read_mark(mark_path(s.path))
        assert before is not None
        for i in range(5):
            await s.enqueue(q, msg(i))
            now = read_mark(mark_path(s.path))
            assert now is not None and now.commits > before.commits  # a kill -9 here: covered
            before = now
    finally:
        await s.close()


async def test_with_durability_normal_the_mark_follows_checkpoints(tmp_path):
    s = SqliteStore(tmp_path, durability="normal")
    await s.open(T0)
    try:
        q = await s.ensure_queue("jobs", "local", None, T0)
        start = read_mark(mark_path(s.path))
        assert start is not None
        for i in range(10):
            await s.enqueue(q, msg(i))

        def advanced() -> bool:
            m = read_mark(mark_path(s.path))
            return m is not None and m.commits >= start.commits + 10

        await eventually(advanced, 10)
    finally:
        await s.close()


@pytest.mark.parametrize("durability", ["full", "normal"])
async def test_an_older_copy_is_refused_until_the_loss_is_accepted(tmp_path, caplog, durability):
    await sent(tmp_path, 10, durability=durability)
    shutil.copyfile(tmp_path / "scheduler.sqlite", tmp_path / "old.sqlite")
    await sent(tmp_path, 10, start=10, durability=durability)
    shutil.copyfile(tmp_path / "old.sqlite", tmp_path / "scheduler.sqlite")
    with pytest.raises(StoreBehind, match="commit") as refused:
        await SqliteStore(tmp_path, durability=durability).open(T0)
    assert refused.value.missing is not None and refused.value.missing >= 10
    with caplog.at_level(logging.ERROR):
        s = SqliteStore(tmp_path, durability=durability, accept_data_loss=True)
        await s.open(T0)
    try:
        q = s.queue("jobs")
        assert q is not None and len(await s.peek(q, T0, 100)) == 10
    finally:
        await s.close()
    assert any(getattr(r, "event", "") == "data_loss_accepted" for r in caplog.records)
    s = SqliteStore(tmp_path, durability=durability)  # the mark started over
    await s.open(T0)
    await s.close()


async def test_an_unreadable_mark_is_said_and_started_over(tmp_path, caplog):
    await sent(tmp_path, 3)
    mark_path(tmp_path / "scheduler.sqlite").write_bytes(b"\x00" * 7)
    with caplog.at_level(logging.WARNING):
        await sent(tmp_path, 3, start=3)
    assert any(getattr(r, "event", "") == "mark_unreadable" for r in caplog.records)
    assert read_mark(mark_path(tmp_path / "scheduler.sqlite")) is not None


async def test_a_database_from_before_the_mark_starts_and_gets_one(tmp_path):
    await sent(tmp_path, 3)
    db = tmp_path / "scheduler.sqlite"
    con = sqlite3.connect(db)  # as an ocd of before the mark left it
    con.execute("DELETE FROM meta WHERE key = ?", (sql.DATABASE_ID_KEY,))
    con.execute("DELETE FROM sqlite_sequence WHERE name = 'ocd:commits'")
    con.commit()
    con.close()
    mark_path(db).unlink()
    await sent(tmp_path, 3, start=3)
    mark = read_mark(mark_path(db))
    assert mark is not None and mark.commits >= 3


async def test_a_second_open_in_one_process_is_refused_and_leaves_the_first_working(tmp_path):
    s = SqliteStore(tmp_path)
    await s.open(T0)
    try:
        q = await s.ensure_queue("jobs", "local", None, T0)
        with pytest.raises(StoreLockedError, match="in use by another ocd"):
            await SqliteStore(tmp_path).open(T0)
        await s.enqueue(q, msg(1))
        assert len(await s.peek(q, T0, 10)) == 1
    finally:
        await s.close()
