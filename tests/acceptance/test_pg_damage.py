"""A PostgreSQL database replaced under a node is refused, not run on: real ``ocd serve``
processes on a throw-away PostgreSQL server, with one ``data_dir`` (where each node keeps
its record of the database it ran on: ``postgres.mark``).

Pointed at another database, or at its own database dropped and restored from an older
``pg_dump``, a node refuses to start (exit 3) saying what is missing and how to go on;
``--accept-data-loss`` starts anyway; ordinary restarts, after a kill -9 of ocd and a crash
of the server included, never raise the alarm."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest

from ocd.store.postgres.mark import RECORD_NAME
from tests.acceptance.conftest import APPS, OcdProcess
from tests.helpers import wait_sync
from tests.pg import Cluster, find_bin_dir

pytestmark = pytest.mark.timeout(120)

K = 50  # messages per phase, in batches of 10


def config(tmp: Path, dsn: str, name: str) -> Path:
    cfg = tmp / f"{name}.toml"
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:0"
data_dir = "{tmp / "data"}"
shutdown_timeout = 5

[store]
backend = "postgres"
dsn = {json.dumps(dsn)}

[[workers]]
name = "app"
main = "{APPS / "recorder.py"}"
routes = ["/"]
vars = {{ RECORD = "{tmp / "record.jsonl"}" }}

[[workers.queues.producers]]
binding = "QUEUE"
queue = "jobs"
"""
    )
    return cfg


async def send(port: int, start: int, k: int = K) -> None:
    async with aiohttp.ClientSession() as s:
        for n in range(start, start + k, 10):
            msgs = [{"body": {"n": i}} for i in range(n, n + 10)]
            async with s.post(f"http://127.0.0.1:{port}/send-batch", json={"messages": msgs}) as r:
                assert r.status == 200, await r.text()


async def run_and_send(ocd_processes, cfg: Path, start: int) -> None:
    """One clean run of a node that sends K messages."""
    p = ocd_processes(cfg)
    await send(p.wait_started(), start)
    assert p.stop() == 0, p.log


def refusal(p: OcdProcess) -> tuple[int, str]:
    wait_sync(lambda: p.proc.poll() is not None or p.event("started"), 30)
    assert p.event("started") is None, "ocd started on it"
    code = p.stop()
    failed = p.event("startup_failed")
    assert failed is not None, p.log
    return code, str(failed["msg"])


def database_name(dsn: str) -> str:
    return urlsplit(dsn).path.lstrip("/")


def seq_of(cluster: Cluster, dsn: str) -> int:
    return int(cluster.psql("SELECT last_value FROM ocd_messages_seq_seq", dsn=dsn))


def stored(cluster: Cluster, dsn: str) -> int:
    return int(cluster.psql("SELECT count(*) FROM ocd_messages", dsn=dsn))


def recorded(tmp: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((tmp / "data" / RECORD_NAME).read_text())
    return data


@pytest.fixture
def other_db(pg_cluster):
    """A second fresh database (B) on the same server."""
    name = f"ocd_b_{uuid.uuid4().hex[:16]}"
    dsn = pg_cluster.create_database(name)
    yield dsn
    pg_cluster.drop_database(name)


async def test_a_node_pointed_at_another_database_is_refused_and_leaves_it_untouched(
    tmp_path, ocd_processes, pg_cluster, pg_dsn, other_db
):
    await run_and_send(ocd_processes, config(tmp_path, pg_dsn, "a"), 0)
    record = recorded(tmp_path)
    assert record["seq"] == seq_of(pg_cluster, pg_dsn)  # a clean stop records where it ended

    on_b = config(tmp_path, other_db, "b")
    code, msg = refusal(ocd_processes(on_b))
    assert code == 3
    assert "is not the one this node last ran on" in msg, msg
    assert "it has none (a new database)" in msg and f"reached seq {record['seq']}" in msg, msg
    assert "ocd serve --accept-data-loss" in msg, msg
    # refused before anything in B changed: ocd made no tables there
    assert pg_cluster.psql("SELECT to_regclass('ocd_meta') IS NULL", dsn=other_db) == "t"

    # back on its own database, the node starts as ever
    await run_and_send(ocd_processes, config(tmp_path, pg_dsn, "a"), K)

    accepted = ocd_processes(on_b, args=("--accept-data-loss",))
    port = accepted.wait_started()
    loud = accepted.event("data_loss_accepted")
    assert loud is not None and loud["level"] == "error", accepted.log
    await send(port, 100 * K)
    assert accepted.stop() == 0
    again = ocd_processes(on_b)  # the record started over on B: nothing is missing now
    again.wait_started()
    assert again.event("data_loss_accepted") is None
    assert again.stop() == 0
    assert stored(pg_cluster, other_db) == K


async def test_a_database_restored_from_an_older_dump_is_refused_saying_what_is_missing(
    tmp_path, ocd_processes, pg_cluster, pg_dsn
):
    pg_dump = _pg_dump(pg_cluster)
    cfg = config(tmp_path, pg_dsn, "a")
    await run_and_send(ocd_processes, cfg, 0)
    dump = subprocess.run(
        [pg_dump, "--no-owner", "-d", pg_dsn], capture_output=True, text=True, timeout=60
    )
    assert dump.returncode == 0, dump.stderr
    await run_and_send(ocd_processes, cfg, K)  # K more after the dump
    assert stored(pg_cluster, pg_dsn) == 2 * K
    name = database_name(pg_dsn)
    pg_cluster.drop_database(name)
    pg_cluster.create_database(name)
    pg_cluster.psql(dump.stdout, dsn=pg_dsn)
    assert stored(pg_cluster, pg_dsn) == K  # the database really is the older one

    code, msg = refusal(ocd_processes(cfg))
    assert code == 3
    assert "is older than what this node saw committed to it" in msg, msg
    assert "seq(s) are missing" in msg and "restored from an older dump" in msg, msg
    assert "ocd serve --accept-data-loss" in msg, msg
    assert stored(pg_cluster, pg_dsn) == K  # and it was left as it was

    accepted = ocd_processes(cfg, args=("--accept-data-loss",))
    await send(accepted.wait_started(), 10 * K)
    assert accepted.event("data_loss_accepted") is not None
    assert accepted.stop() == 0
    again = ocd_processes(cfg)
    again.wait_started()
    assert again.event("data_loss_accepted") is None
    assert again.stop() == 0


async def test_restarts_after_kill_9_and_a_server_crash_never_raise_the_alarm(
    tmp_path, ocd_processes, pg_cluster, pg_dsn
):
    cfg = config(tmp_path, pg_dsn, "a")
    p = ocd_processes(cfg)
    port = p.wait_started()
    await send(port, 0)
    # the record follows the database while the node runs (not only at a clean stop)
    wait_sync(
        lambda: (tmp_path / "data" / RECORD_NAME).exists() and recorded(tmp_path)["seq"] >= K, 20
    )
    await send(port, K)
    p.kill9()
    assert recorded(tmp_path)["seq"] <= seq_of(pg_cluster, pg_dsn)  # never ahead
    p = ocd_processes(cfg)
    port = p.wait_started()
    assert p.event("startup_failed") is None
    await send(port, 2 * K)
    if pg_cluster.managed:  # a crash of the server, and its WAL recovery
        pg_cluster.stop_immediate()
        pg_cluster.start()
    assert p.stop() == 0
    again = ocd_processes(cfg)
    again.wait_started()
    assert again.event("data_loss_accepted") is None
    assert recorded(tmp_path)["seq"] <= seq_of(pg_cluster, pg_dsn)
    assert again.stop() == 0


def _pg_dump(cluster: Cluster) -> str:
    bin_dir = cluster.bin_dir or find_bin_dir()
    found = str(bin_dir / "pg_dump") if bin_dir and (bin_dir / "pg_dump").is_file() else None
    found = found or shutil.which("pg_dump")
    if found is None:
        pytest.skip("no pg_dump binary found")
    return found
