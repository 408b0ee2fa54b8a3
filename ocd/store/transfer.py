"""Moving a stopped SQLite node's data into PostgreSQL (``ocd migrate-store``)."""

from __future__ import annotations

from pathlib import Path

from ocd.store.dump import Copied


async def sqlite_to_postgres(data_dir: Path, dsn: str, now_ms: int, force: bool) -> Copied:
    """Copy queues, pull consumers, messages (ids, timestamps, delays, attempts) and secrets
    (so pull lease ids and refs stay valid) from ``data_dir`` into ``dsn``."""
    from ocd.store.postgres.load import load
    from ocd.store.sqlite.export import export

    async with export(data_dir, now_ms) as dump:
        return await load(dsn, dump, now_ms, force)
