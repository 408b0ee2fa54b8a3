"""A JS Worker's ``env.DB`` through ``ocd serve`` and the real workerd: migrations applied by
``ocd d1 migrations apply``, ``queue()`` inserting each message, ``fetch`` selecting them back
across kill -9 of ocd; batches all or nothing; D1's error texts; ``ocd d1 execute`` next to a
running ocd."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import aiohttp
import pytest

from tests.acceptance.conftest import run_ocd
from tests.helpers import eventually
from tests.js import js_section

pytestmark = [
    pytest.mark.timeout(150),
    pytest.mark.usefixtures("workerd_tools"),
    pytest.mark.sqlite_only,  # D1 is a node's own: refused on PostgreSQL
]

WORKER = """
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/d1/send") {
      await env.QUEUE.sendBatch(JSON.parse(await request.text()).map((body) => ({ body })));
      return new Response("sent");
    }
    if (url.pathname === "/d1/rows") {
      const { results } = await env.DB.prepare("SELECT n, body FROM msgs ORDER BY n").all();
      return Response.json(results);
    }
    if (url.pathname === "/d1/probe") {
      const out = {};
      const ins = await env.DB.prepare("INSERT INTO notes (id, text, blob) VALUES (?1, ?2, ?3)")
        .bind(1, "one", new Uint8Array([0, 7, 255])).run();
      out.run = { success: ins.success, changes: ins.meta.changes,
                  last_row_id: ins.meta.last_row_id, rows_written: ins.meta.rows_written,
                  duration: typeof ins.meta.duration };
      out.first = await env.DB.prepare("SELECT * FROM notes WHERE id = ?").bind(1).first();
      out.firstCol = await env.DB.prepare("SELECT text FROM notes").first("text");
      out.none = await env.DB.prepare("SELECT * FROM notes WHERE id = 99").first();
      out.raw = await env.DB.prepare("SELECT id, text FROM notes").raw({ columnNames: true });
      try {
        await env.DB.batch([
          env.DB.prepare("INSERT INTO notes (id, text) VALUES (2, 'two')"),
          env.DB.prepare("INSERT INTO notes (id, text) VALUES (1, 'again')"),
        ]);
        out.batch = "committed";
      } catch (e) { out.batch = e.message; }
      out.afterBatch = (await env.DB.prepare("SELECT count(*) AS c FROM notes").first("c"));
      const ok = await env.DB.batch([
        env.DB.prepare("INSERT INTO notes (id, text) VALUES (3, 'three')"),
        env.DB.prepare("SELECT count(*) AS c FROM notes"),
      ]);
      out.okBatch = ok.map((r) => r.results);
      try { await env.DB.prepare("SELECT * FROM x").all(); } catch (e) { out.error = e.message; }
      out.exec = await env.DB.exec("CREATE TABLE IF NOT EXISTS e (a);\\nINSERT INTO e VALUES (1);");
      try {
        await env.DB.exec("INSERT INTO nowhere VALUES (1)");
      } catch (e) { out.execError = e.message; }
      return Response.json(out);
    }
    return new Response("not found", { status: 404 });
  },
  async queue(batch, env) {
    const insert = env.DB.prepare("INSERT INTO msgs (n, body) VALUES (?, ?)");
    await env.DB.batch(batch.messages.map((m) => insert.bind(m.body.n, JSON.stringify(m.body))));
    batch.ackAll();
  },
};
"""

MIGRATION_1 = "CREATE TABLE msgs (n INTEGER PRIMARY KEY, body TEXT NOT NULL);\n"
MIGRATION_2 = """-- notes, with a trigger whose body holds semicolons
CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT, blob BLOB);
CREATE TABLE log (what TEXT);
CREATE TRIGGER notes_log AFTER INSERT ON notes BEGIN
  INSERT INTO log VALUES ('note ' || NEW.id);
END;
"""

CONFIG = """
[server]
listen = "127.0.0.1:{port}"
data_dir = "data"
shutdown_timeout = 5

{js}

[[workers]]
name = "d1app"
main = "{main}"
compatibility_date = "2026-11-01"
routes = ["/d1"]
d1_databases = [{{ binding = "DB", database_name = "app-db", database_id = "0f6c1d2e-aaaa" }}]

[[workers.queues.producers]]
binding = "QUEUE"
queue = "to-d1"

[[workers.queues.consumers]]
queue = "to-d1"
max_batch_size = 10
max_batch_timeout = 0
"""


def _config(tmp: Path, port: int = 0) -> Path:
    main = tmp / "worker.js"
    main.write_text(WORKER)
    migrations = tmp / "migrations"
    migrations.mkdir(exist_ok=True)
    (migrations / "0001_msgs.sql").write_text(MIGRATION_1)
    (migrations / "0002_notes.sql").write_text(MIGRATION_2)
    cfg = tmp / "ocd.toml"
    cfg.write_text(CONFIG.format(port=port, js=js_section(), main=main))
    return cfg


def _d1(cfg: Path, *args: str) -> tuple[int, str, str]:
    done = run_ocd("d1", *args, "-c", str(cfg))
    return done.returncode, done.stdout, done.stderr


async def _json(s: aiohttp.ClientSession, url: str) -> object:
    async with s.get(url) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def test_migrations_then_queue_rows_in_d1_across_kill_9(tmp_path, ocd_processes):
    cfg = _config(tmp_path)
    code, out, err = _d1(cfg, "migrations", "apply", "app-db")
    assert code == 0, err
    assert "0001_msgs.sql" in out and "0002_notes.sql" in out
    code, out, err = _d1(cfg, "migrations", "apply", "app-db")
    assert (code, out.strip()) == (0, "No migrations to apply!"), err
    db = tmp_path / "data" / "d1" / "0f6c1d2e-aaaa.sqlite"
    assert stat.S_IMODE(db.stat().st_mode) == 0o600

    first = ocd_processes(_config(tmp_path))
    port = first.wait_started()
    base = f"http://127.0.0.1:{port}"
    want = [{"n": n, "body": json.dumps({"n": n}, separators=(",", ":"))} for n in range(20)]
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{base}/d1/send", json=[{"n": n} for n in range(20)]) as r:
            assert r.status == 200

        async def all_in() -> bool:
            return await _json(s, f"{base}/d1/rows") == want

        assert await eventually(all_in, 60)
    # a second writer next to the running ocd: SQLite's lock keeps them apart
    code, out, err = _d1(cfg, "execute", "app-db", "--command", "INSERT INTO msgs VALUES (99, 'x')")
    assert code == 0, err
    first.kill9()

    second = ocd_processes(_config(tmp_path, port))
    second.wait_started()
    async with aiohttp.ClientSession() as s:
        rows = await _json(s, f"{base}/d1/rows")
    assert rows == [*want, {"n": 99, "body": "x"}]
    assert second.stop() == 0
    code, out, err = _d1(cfg, "execute", "app-db", "--command", "SELECT count(*) AS c FROM msgs")
    assert code == 0, err
    assert json.loads(out.splitlines()[0]) == {"c": 21}
    applied = run_ocd("d1", "execute", "app-db", "--json", "-c", str(cfg), "--command",
                      "SELECT id, name FROM d1_migrations ORDER BY id")  # fmt: skip
    got = json.loads(applied.stdout)[0]["results"]
    assert got == [{"id": 1, "name": "0001_msgs.sql"}, {"id": 2, "name": "0002_notes.sql"}]


async def test_d1_api_batches_all_or_nothing_and_errors_in_d1s_words(tmp_path, ocd_processes):
    cfg = _config(tmp_path)
    assert _d1(cfg, "migrations", "apply", "app-db")[0] == 0
    p = ocd_processes(cfg)
    port = p.wait_started()
    async with aiohttp.ClientSession() as s:
        out = await _json(s, f"http://127.0.0.1:{port}/d1/probe")
    assert isinstance(out, dict)
    assert out["run"] == {
        "success": True,
        "changes": 1,
        "last_row_id": 1,
        "rows_written": 2,  # with the trigger's row in log
        "duration": "number",
    }
    assert out["first"] == {"id": 1, "text": "one", "blob": [0, 7, 255]}
    assert out["firstCol"] == "one"
    assert out["none"] is None
    assert out["raw"] == [["id", "text"], [1, "one"]]
    assert out["batch"] == "D1_ERROR: UNIQUE constraint failed: notes.id: SQLITE_CONSTRAINT"
    assert out["afterBatch"] == 1  # the first insert of the failed batch is gone too
    assert out["okBatch"] == [[], [{"c": 2}]]
    assert out["error"] == "D1_ERROR: no such table: x: SQLITE_ERROR"
    assert out["exec"]["count"] == 2
    assert out["execError"].startswith(
        "D1_EXEC_ERROR: Error in line 1: INSERT INTO nowhere VALUES (1): no such table: nowhere"
    )
    assert p.stop() == 0


def test_d1_execute_file_and_its_failures(tmp_path):
    cfg = _config(tmp_path)
    script = tmp_path / "seed.sql"
    script.write_text("CREATE TABLE t (a);\nINSERT INTO t VALUES (1);\nINSERT INTO t VALUES (2);")
    code, out, err = _d1(cfg, "execute", "app-db", "--file", str(script))
    assert code == 0, err
    assert out.strip().endswith("3 statement(s) executed, 2 row(s) changed")
    bad = "INSERT INTO t VALUES (3); INSERT INTO missing VALUES (1)"
    code, out, err = _d1(cfg, "execute", "app-db", "--command", bad)
    assert code == 1
    assert "D1_ERROR: no such table: missing: SQLITE_ERROR" in err
    code, out, err = _d1(cfg, "execute", "app-db", "--command", "SELECT count(*) AS c FROM t")
    assert json.loads(out.splitlines()[0]) == {"c": 2}  # the failed command changed nothing
    code, out, err = _d1(cfg, "execute", "nope", "--command", "SELECT 1")
    assert code == 2 and 'no D1 database "nope"' in err and "app-db" in err
    assert os.path.exists(tmp_path / "data" / "d1" / "0f6c1d2e-aaaa.sqlite")
