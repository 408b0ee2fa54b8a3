"""Operating ocd from the command line: SIGHUP and `ocd dev` reloads, status, backups."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import urllib.request
from pathlib import Path

import pytest

from tests.acceptance.conftest import recorder_config, records, run_ocd
from tests.helpers import wait_sync

CONSUMER = """
[[workers.queues.consumers]]
queue = "jobs"
max_batch_timeout = 0
"""

WORKER = """
from workers import Response, WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return Response("{text}")
"""


def get(port: int, path: str = "/") -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.read().decode()


def post(port: int, path: str, body: object) -> None:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200


run = run_ocd


def small_app(tmp: Path, text: str) -> Path:
    (tmp / "app").mkdir(exist_ok=True)
    (tmp / "app" / "worker.py").write_text(WORKER.format(text=text))
    cfg = tmp / "ocd.toml"
    cfg.write_text(
        '[server]\nlisten = "127.0.0.1:0"\ndata_dir = "data"\n\n'
        '[[workers]]\nname = "app"\nmain = "app/worker.py"\nroutes = ["/"]\n'
    )
    return cfg


def test_sighup_reloads_code_and_rejects_a_broken_config(tmp_path, ocd_processes):
    cfg = small_app(tmp_path, "one")
    p = ocd_processes(cfg)
    port = p.wait_started()
    assert get(port) == "one"
    (tmp_path / "app" / "worker.py").write_text(WORKER.format(text="two"))
    p.proc.send_signal(signal.SIGHUP)
    wait_sync(lambda: p.event("reload_applied"))
    assert get(port) == "two"
    cfg.write_text(cfg.read_text() + "\n[oops]\n")
    p.proc.send_signal(signal.SIGHUP)
    wait_sync(lambda: p.event("reload_rejected"))
    assert 'unknown key "oops"' in p.event("reload_rejected")["msg"]
    assert get(port) == "two"
    assert p.stop() == 0


def test_dev_reloads_when_a_worker_file_changes(tmp_path, ocd_processes):
    cfg = small_app(tmp_path, "first")
    p = ocd_processes(cfg, command="dev")
    port = p.wait_started()
    wait_sync(lambda: p.event("dev_watching"))
    assert get(port) == "first"
    (tmp_path / "app" / "worker.py").write_text(WORKER.format(text="second"))
    wait_sync(lambda: get(port) == "second", 20)
    changed = p.event("dev_changed")
    assert changed is not None and "worker.py" in changed["msg"]
    assert p.stop() == 0


def test_status_shows_queues_and_consumers(tmp_path, ocd_processes):
    p = ocd_processes(recorder_config(tmp_path, CONSUMER))
    port = p.wait_started()
    post(port, "/send", {"body": {"n": 1}})
    wait_sync(lambda: p.event("batch_acked"))
    r = run("status", "--url", f"http://127.0.0.1:{port}")
    assert r.returncode == 0, r.stderr
    assert "state: ready" in r.stdout
    assert "jobs" in r.stdout and "ok: 1 acked, 0 retried, 0 dead-lettered" in r.stdout
    assert ["app", "QUEUE", "queue", "jobs"] in [line.split() for line in r.stdout.splitlines()]
    r = run("status", "--url", f"http://127.0.0.1:{port}", "--json")
    data = json.loads(r.stdout)
    assert data["queues"][0]["name"] == "jobs" and data["queues"][0]["backlog"] == 0
    assert data["bindings"] == [
        {"worker": "app", "kind": "queue", "name": "QUEUE", "target": "jobs"}
    ]
    assert p.stop() == 0
    r = run("status", "--url", f"http://127.0.0.1:{port}")
    assert r.returncode == 1 and "cannot reach ocd" in r.stderr


@pytest.mark.sqlite_only
def test_backup_of_a_live_daemon_then_restore(tmp_path, ocd_processes):
    cfg = recorder_config(tmp_path, "")  # no consumer: messages stay queued
    p = ocd_processes(cfg)
    port = p.wait_started()
    for i in range(20):
        post(port, "/send", {"body": {"n": i}})
    data = tmp_path / "data"
    (data / "r2" / "bucket").mkdir(parents=True)
    (data / "r2" / "bucket" / "object").write_bytes(b"\x00stored\xff")
    (data / "d1").mkdir()
    d1 = sqlite3.connect(data / "d1" / "db.sqlite")  # open and in WAL mode, as D1's are
    d1.execute("PRAGMA journal_mode=WAL")
    d1.execute("CREATE TABLE t (v TEXT)")
    d1.execute("INSERT INTO t VALUES ('row')")
    d1.commit()
    r = run("backup", "-c", str(cfg), "--to", str(tmp_path / "snap.sqlite"))
    assert r.returncode == 0, r.stderr
    d1.close()
    r = run("restore", "-c", str(cfg), "--from", str(tmp_path / "snap.sqlite"))
    assert r.returncode == 1 and "stop it before restoring" in r.stderr
    assert p.stop() == 0
    shutil.rmtree(data)
    r = run("restore", "-c", str(cfg), "--from", str(tmp_path / "snap.sqlite"))
    assert r.returncode == 0, r.stderr
    assert (data / "r2" / "bucket" / "object").read_bytes() == b"\x00stored\xff"
    restored = sqlite3.connect(data / "d1" / "db.sqlite")
    assert restored.execute("SELECT v FROM t").fetchall() == [("row",)]
    restored.close()
    cfg.write_text(cfg.read_text() + CONSUMER)
    again = ocd_processes(cfg)
    again.wait_started()
    wait_sync(lambda: len(records(tmp_path)) == 20, 15)
    assert sorted(r["body"]["n"] for r in records(tmp_path)) == list(range(20))
    assert again.stop() == 0
