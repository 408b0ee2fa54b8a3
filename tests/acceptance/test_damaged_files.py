"""Damage is detected, not absorbed: a real ``ocd serve`` killed with kill -9, one of its
files damaged as a disk, a script or a person would, then started again.

Each damaged case is refused at start (exit 3) with a message that says what is missing
and how to go on; ``--accept-data-loss`` starts anyway; and ordinary restarts, kill -9 ones
under load included, never raise the alarm. While the last messages are sent a reader holds
a snapshot (as a running backup would), so that they are in the WAL only when the daemon
dies and each damage really removes acknowledged messages.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path

import aiohttp
import pytest

from chaos.damaged_files import (
    DB,
    delete_wal,
    digest,
    empty_db,
    flip_wal,
    make_foreign,
    snapshot_reader,
    truncate_wal,
)
from tests.acceptance.conftest import produce, recorder_config, run_ocd
from tests.helpers import eventually, wait_sync

pytestmark = pytest.mark.sqlite_only

K = 200  # messages per phase, in batches of 10: 20 group commits


async def send(port: int, start: int, k: int = K) -> set[int]:
    """Send ``k`` numbered messages through the worker's binding; the numbers acknowledged."""
    confirmed: set[int] = set()
    async with aiohttp.ClientSession() as s:
        for n in range(start, start + k, 10):
            msgs = [{"body": {"n": i}} for i in range(n, n + 10)]
            async with s.post(f"http://127.0.0.1:{port}/send-batch", json={"messages": msgs}) as r:
                assert r.status == 200, await r.text()
            confirmed.update(range(n, n + 10))
    return confirmed


def stored(data: Path) -> set[int]:
    """The numbers of the messages in a stopped daemon's database."""
    con = sqlite3.connect(f"file:{data / DB}?mode=ro", uri=True)
    try:
        return {json.loads(body)["n"] for (body,) in con.execute("SELECT body FROM messages")}
    finally:
        con.close()


def refusal(p) -> tuple[int, str]:
    """The exit code of a daemon that should not start, and its ``cannot start`` message."""
    wait_sync(lambda: p.proc.poll() is not None or p.event("started"), 30)
    assert p.event("started") is None, "ocd started on it"
    code = p.stop()
    failed = p.event("startup_failed")
    assert failed is not None, p.log
    return code, str(failed["msg"])


async def killed_with_a_fresh_wal(tmp_path: Path, ocd_processes) -> tuple[Path, Path, set[int]]:
    """A daemon that stored 2K messages, the first K in the database file (a clean stop
    checkpoints them), the last K in its WAL only, then died of kill -9."""
    cfg = recorder_config(tmp_path, "")
    data = tmp_path / "data"
    p = ocd_processes(cfg)
    confirmed = await send(p.wait_started(), 0)
    assert p.stop() == 0
    p = ocd_processes(cfg)
    port = p.wait_started()
    with snapshot_reader(data):
        confirmed |= await send(port, K)
        p.kill9()
    return cfg, data, confirmed


def assert_behind_message(msg: str, wal: str) -> None:
    assert "older than what ocd committed" in msg, msg
    assert "commit(s) are missing" in msg, msg
    assert f"scheduler.sqlite-wal, {wal}" in msg, msg
    assert "restore a backup (ocd restore)" in msg, msg
    assert "ocd serve --accept-data-loss" in msg, msg


async def test_wal_deleted_after_kill_9_is_refused_saying_what_is_missing(tmp_path, ocd_processes):
    cfg, data, _ = await killed_with_a_fresh_wal(tmp_path, ocd_processes)
    delete_wal(data)
    code, msg = refusal(ocd_processes(cfg))
    assert code == 3
    assert_behind_message(msg, "missing")


@pytest.mark.parametrize("damage", [truncate_wal, flip_wal], ids=["truncated", "bytes_flipped"])
async def test_damaged_wal_is_refused_and_left_as_it_was(tmp_path, ocd_processes, damage):
    cfg, data, _ = await killed_with_a_fresh_wal(tmp_path, ocd_processes)
    damage(data)
    wal, db = digest(data / f"{DB}-wal"), digest(data / DB)
    code, msg = refusal(ocd_processes(cfg))
    assert code == 3
    assert_behind_message(msg, "now ")
    # Nothing was checkpointed or overwritten: the damaged files can still be salvaged.
    assert digest(data / f"{DB}-wal") == wal and digest(data / DB) == db


async def test_accept_data_loss_starts_on_what_is_left_and_later_starts_are_clean(
    tmp_path, ocd_processes
):
    cfg, data, confirmed = await killed_with_a_fresh_wal(tmp_path, ocd_processes)
    flip_wal(data)
    assert refusal(ocd_processes(cfg))[0] == 3
    accepted = ocd_processes(cfg, args=("--accept-data-loss",))
    port = accepted.wait_started()
    loud = accepted.event("data_loss_accepted")
    assert loud is not None and loud["level"] == "error"
    assert "commit(s) are missing" in loud["msg"] and "--accept-data-loss" in loud["msg"]
    later = await send(port, 10 * K)
    accepted.kill9()
    again = ocd_processes(cfg)  # no flag: the mark started over, nothing is missing now
    again.wait_started()
    assert again.event("data_loss_accepted") is None
    assert again.stop() == 0
    have = stored(data)
    assert later <= have
    assert confirmed - have, "the flipped WAL lost nothing: the test did not damage anything"


async def test_emptied_or_deleted_database_is_refused_but_a_cleared_data_dir_starts_afresh(
    tmp_path, ocd_processes
):
    cfg, data, _ = await killed_with_a_fresh_wal(tmp_path, ocd_processes)
    empty_db(data)
    code, msg = refusal(ocd_processes(cfg))
    assert code == 3
    assert "scheduler.sqlite is empty (0 bytes)" in msg and "had committed" in msg, msg
    assert "ocd serve --accept-data-loss" in msg

    for f in (DB, f"{DB}-wal", f"{DB}-shm"):
        (data / f).unlink(missing_ok=True)
    code, msg = refusal(ocd_processes(cfg))
    assert code == 3 and "scheduler.sqlite is missing" in msg, msg
    assert not (data / DB).exists()  # the refusal left no empty database behind

    for f in data.glob(f"{DB}*"):  # rm scheduler.sqlite*: the mark goes too
        f.unlink()
    fresh = ocd_processes(cfg)
    fresh.wait_started()
    assert fresh.stop() == 0


async def test_older_copy_swapped_in_is_refused(tmp_path, ocd_processes):
    cfg = recorder_config(tmp_path, "")
    data = tmp_path / "data"
    p = ocd_processes(cfg)
    await send(p.wait_started(), 0)
    assert p.stop() == 0
    shutil.copyfile(data / DB, tmp_path / "old.sqlite")
    p = ocd_processes(cfg)
    await send(p.wait_started(), K)
    assert p.stop() == 0  # a clean stop: nothing is in a WAL
    shutil.copyfile(tmp_path / "old.sqlite", data / DB)
    code, msg = refusal(ocd_processes(cfg))
    assert code == 3
    assert "older than what ocd committed" in msg and "replaced by an older copy" in msg, msg


async def test_restoring_a_backup_after_a_refusal_starts_with_the_backup(tmp_path, ocd_processes):
    cfg, data, _ = await killed_with_a_fresh_wal(tmp_path, ocd_processes)
    p = ocd_processes(cfg)
    await send(p.wait_started(), 10 * K)
    backup = run_ocd("backup", "-c", str(cfg), "--to", str(tmp_path / "snap.sqlite"))
    assert backup.returncode == 0, backup.stderr
    with snapshot_reader(data):
        await send(p.wait_started(), 20 * K)
        p.kill9()
    delete_wal(data)
    assert refusal(ocd_processes(cfg))[0] == 3
    restored = run_ocd("restore", "-c", str(cfg), "--from", str(tmp_path / "snap.sqlite"))
    assert restored.returncode == 0, restored.stderr
    p = ocd_processes(cfg)
    p.wait_started()
    assert p.stop() == 0
    have = stored(data)
    assert set(range(10 * K, 11 * K)) <= have and not have & set(range(20 * K, 21 * K))


@pytest.mark.parametrize("journal", ["delete", "wal"])
async def test_foreign_database_is_refused_unchanged(tmp_path, ocd_processes, journal):
    data = tmp_path / "data"
    data.mkdir()
    make_foreign(data / DB)
    if journal == "wal":
        con = sqlite3.connect(data / DB)
        con.execute("PRAGMA journal_mode=WAL")
        con.close()
    before = digest(data / DB)
    code, msg = refusal(ocd_processes(recorder_config(tmp_path, "")))
    assert code == 3
    assert "is not an ocd database" in msg and "ocd has not changed it" in msg, msg
    assert digest(data / DB) == before
    left = {f.name for f in data.iterdir()}  # no mark, no lock file, no journal of ocd's
    if journal == "delete":
        assert left == {DB}
    else:  # SQLite's read-only look at a WAL database needs its index files
        assert left <= {DB, f"{DB}-wal", f"{DB}-shm"}


async def test_deleting_files_that_hold_no_data_does_not_let_a_second_daemon_in(
    tmp_path, ocd_processes
):
    cfg = recorder_config(tmp_path, "")
    data = tmp_path / "data"
    first = ocd_processes(cfg)
    port = first.wait_started()
    await send(port, 0)
    for f in data.iterdir():  # the mark, and the lock file older ocd versions used
        if f.name not in (DB, f"{DB}-wal", f"{DB}-shm"):
            f.unlink()
    (data / f"{DB}.lock").unlink(missing_ok=True)
    code, msg = refusal(ocd_processes(cfg))
    assert code == 3 and "in use by another ocd process" in msg, msg
    await send(port, K)  # the first daemon still serves
    assert first.stop() == 0
    second = ocd_processes(cfg)
    second.wait_started()
    assert second.stop() == 0
    assert stored(data) == set(range(2 * K))


async def test_restarts_and_kill_9_cycles_under_load_never_raise_the_alarm(tmp_path, ocd_processes):
    cfg = recorder_config(tmp_path, "")
    data = tmp_path / "data"
    confirmed: set[int] = set()
    for cycle in range(4):
        p = ocd_processes(cfg)
        port = p.wait_started()
        assert p.event("data_loss_accepted") is None
        stop = asyncio.Event()
        producers = [
            asyncio.create_task(produce(port, confirmed, stop, start=(cycle * 4 + k) * 10**6))
            for k in range(4)
        ]
        target = len(confirmed) + 500
        await eventually(lambda t=target: len(confirmed) >= t, 60)
        p.kill9()  # mid-stream
        stop.set()
        await asyncio.gather(*producers)
    p = ocd_processes(cfg)
    p.wait_started()
    assert p.stop() == 0  # and a clean stop and start
    p = ocd_processes(cfg)
    p.wait_started()
    assert p.stop() == 0
    assert confirmed <= stored(data)
