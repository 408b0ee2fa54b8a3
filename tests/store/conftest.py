"""Stores of every backend for the conformance suite: ``store`` is one open store, and
``open_store()`` opens another on the same data (a restart, or a second node)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from ocd.store import SqliteStore, Store

T0 = 1_800_000_000_000
BACKENDS = ["sqlite", "postgres"]

OpenStore = Callable[..., Awaitable[Store]]


@pytest.fixture(params=BACKENDS)
async def open_store(request, tmp_path) -> AsyncIterator[OpenStore]:
    opened: list[Store] = []
    dsn = request.getfixturevalue("pg_dsn") if request.param == "postgres" else None

    async def open_one(now_ms: int = T0, **options: object) -> Store:
        if dsn is None:
            s: Store = SqliteStore(tmp_path / "data")
        else:
            from ocd.store.postgres import PostgresStore

            s = PostgresStore(dsn, **options)  # type: ignore[arg-type]
        await s.open(now_ms)
        opened.append(s)
        return s

    yield open_one
    for s in opened:
        await s.close()


@pytest.fixture
async def store(open_store) -> Store:
    return await open_store()
