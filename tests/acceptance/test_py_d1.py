"""A Python worker's ``env.DB`` through ``ocd serve``: ``fetch`` inserts with ``bind`` and
``run`` and selects back with ``all``/``first``/``raw``, a failing batch changes nothing,
and the rows are in ``<data_dir>/d1/<database_id>.sqlite`` after kill -9."""

from __future__ import annotations

import aiohttp
import pytest

pytestmark = [pytest.mark.timeout(90), pytest.mark.sqlite_only]

WORKER = """
from workers import Response, WorkerEntrypoint

import runtime


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        db = self.env.DB
        await db.exec("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT)")
        n = int(request.url.rsplit("/", 1)[1])
        ins = await db.prepare("INSERT INTO notes (text) VALUES (?)").bind(f"note {n}").run()
        try:
            await db.batch([
                db.prepare("INSERT INTO notes (text) VALUES ('lost')"),
                db.prepare("INSERT INTO nowhere VALUES (1)"),
            ])
            failed = None
        except runtime.D1Error as e:
            failed = str(e)
        rows = (await db.prepare("SELECT id, text FROM notes ORDER BY id").all()).results
        return Response.json({
            "last_row_id": ins.meta.last_row_id,
            "changes": ins.meta.changes,
            "rows": rows,
            "count": await db.prepare("SELECT count(*) AS c FROM notes").first("c"),
            "raw": await db.prepare("SELECT text FROM notes WHERE id = ?").bind(1).raw(),
            "failed": failed,
        })
"""

CONFIG = """
[server]
listen = "127.0.0.1:{port}"
data_dir = "data"
shutdown_timeout = 5

[[workers]]
name = "pyd1"
main = "{main}"
routes = ["/d1"]
d1_databases = [{{ binding = "DB", database_name = "notes", database_id = "notes-1" }}]
"""


def _config(tmp, port=0):
    main = tmp / "worker.py"
    main.write_text(WORKER)
    cfg = tmp / "ocd.toml"
    cfg.write_text(CONFIG.format(port=port, main=main))
    return cfg


async def test_python_worker_inserts_and_selects_across_kill_9(tmp_path, ocd_processes):
    first = ocd_processes(_config(tmp_path))
    port = first.wait_started()
    async with aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{port}/d1/1") as r:
            assert r.status == 200, await r.text()
            out = await r.json()
    assert out == {
        "last_row_id": 1,
        "changes": 1,
        "rows": [{"id": 1, "text": "note 1"}],
        "count": 1,
        "raw": [["note 1"]],
        "failed": "D1_ERROR: no such table: nowhere: SQLITE_ERROR",
    }
    first.kill9()
    assert (tmp_path / "data" / "d1" / "notes-1.sqlite").exists()
    second = ocd_processes(_config(tmp_path, port))
    second.wait_started()
    async with aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{port}/d1/2") as r:
            out = await r.json()
    assert out["rows"] == [{"id": 1, "text": "note 1"}, {"id": 2, "text": "note 2"}]
    assert second.stop() == 0
