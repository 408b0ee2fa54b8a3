"""The clock's mark: the highest time any node saved, kept across restarts, never lowered."""

from __future__ import annotations

import asyncio
import random

import pytest

from tests.store.conftest import T0


async def test_a_new_database_has_no_mark(store):
    assert await store.clock_mark() == 0


async def test_the_mark_only_rises(store):
    await store.save_clock_mark(T0 + 5_000)
    await store.save_clock_mark(T0 + 1_000)  # a clock stepped back saves a lower time
    assert await store.clock_mark() == T0 + 5_000
    await store.save_clock_mark(T0 + 7_000)
    assert await store.clock_mark() == T0 + 7_000


async def test_the_mark_compares_as_a_number_across_byte_boundaries(store):
    await store.save_clock_mark(255)
    await store.save_clock_mark(256)  # 0x00ff < 0x0100 as numbers, as 8-byte strings too
    assert await store.clock_mark() == 256
    await store.save_clock_mark(2**40)
    await store.save_clock_mark(2**40 - 1)
    assert await store.clock_mark() == 2**40


async def test_the_mark_survives_a_restart(open_store):
    s = await open_store()
    await s.save_clock_mark(T0 + 9_000)
    await s.close()
    s2 = await open_store()
    assert await s2.clock_mark() == T0 + 9_000


async def test_concurrent_saves_keep_the_highest(store):
    times = [T0 + i for i in range(200)]
    random.Random(7).shuffle(times)
    await asyncio.gather(*(store.save_clock_mark(t) for t in times))
    assert await store.clock_mark() == T0 + 199


async def test_every_node_sees_the_highest_mark_any_node_saved(request, open_store):
    if "postgres" not in request.node.callspec.id:
        pytest.skip("one node owns a SQLite database")
    a = await open_store()
    b = await open_store()
    await asyncio.gather(
        *(a.save_clock_mark(T0 + 2 * i) for i in range(50)),
        *(b.save_clock_mark(T0 + 2 * i + 1) for i in range(50)),
    )
    await a.save_clock_mark(T0)  # a node whose clock is behind lowers nothing
    assert await a.clock_mark() == await b.clock_mark() == T0 + 99
