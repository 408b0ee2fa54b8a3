"""Damaged files: a real daemon stores K messages, is killed with kill -9, one of its files is
damaged, and it is started again. Each damaged case must be refused, with advice, before
anything in the file changes; the undamaged control must start with every message there.

The cases are those a new user reported accepted with data missing and no warning: the WAL
deleted, truncated or with bytes flipped after a kill -9, ``scheduler.sqlite`` emptied to 0
bytes or swapped for an older copy; and a foreign SQLite database, which must come out of
the refusal unchanged byte for byte.

While the messages are sent, a reader holds a snapshot of the database (as a running
``ocd backup`` would), so that no checkpoint copies them out of the WAL before the kill:
each damage then really removes acknowledged messages, and the daemon must notice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import struct
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

from bench.harness import BenchError, Daemon, Setup

DB = "scheduler.sqlite"
WAL_HEADER = 32
FRAME_HEADER = 24
QUEUE = "jobs"
ADVICE = "--accept-data-loss"


# ------------------------------------------------------------------ the damage


def wal_frames(data_dir: Path) -> int:
    """Frames of the WAL's current generation (those SQLite would replay): the frames
    from the start whose salts match the header's."""
    wal = (data_dir / f"{DB}-wal").read_bytes()
    if len(wal) < WAL_HEADER:
        return 0
    (page_size,) = struct.unpack(">I", wal[8:12])
    salts = wal[16:24]
    n = 0
    while True:
        at = WAL_HEADER + n * (FRAME_HEADER + page_size)
        frame = wal[at : at + FRAME_HEADER]
        if len(frame) < FRAME_HEADER or frame[8:16] != salts:
            return n
        n += 1


def frame_offset(data_dir: Path, frame: int) -> int:
    wal = data_dir / f"{DB}-wal"
    with wal.open("rb") as f:
        (page_size,) = struct.unpack(">I", f.read(12)[8:12])
    return WAL_HEADER + frame * (FRAME_HEADER + page_size)


def delete_wal(data_dir: Path) -> None:
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            (data_dir / f"{DB}{suffix}").unlink()


def truncate_wal(data_dir: Path) -> None:
    """Cut the WAL in the middle of its frames, as a disk that lost the end of a file."""
    half = wal_frames(data_dir) // 2
    os.truncate(data_dir / f"{DB}-wal", frame_offset(data_dir, half))


def flip_wal(data_dir: Path) -> None:
    """Flip bytes in the page of a frame in the middle of the WAL."""
    at = frame_offset(data_dir, wal_frames(data_dir) // 2) + FRAME_HEADER + 100
    with (data_dir / f"{DB}-wal").open("r+b") as f:
        f.seek(at)
        old = f.read(16)
        f.seek(at)
        f.write(bytes(b ^ 0xFF for b in old))


def empty_db(data_dir: Path) -> None:
    os.truncate(data_dir / DB, 0)


def older_copy(old: Path) -> Callable[[Path], None]:
    """Swap in a copy of the database taken earlier, as a hand-made restore would."""

    def swap(data_dir: Path) -> None:
        delete_wal(data_dir)
        shutil.copyfile(old, data_dir / DB)

    return swap


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_foreign(path: Path) -> None:
    """Someone else's SQLite database, in the default (rollback journal) mode."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    con.executemany("INSERT INTO customers (name) VALUES (?)", [(f"c{i}",) for i in range(50)])
    con.commit()
    con.close()


@contextlib.contextmanager
def snapshot_reader(data_dir: Path) -> Iterator[None]:
    """Hold a read transaction, as a running backup would: no checkpoint copies what is
    committed after it out of the WAL. Read-only, so closing it checkpoints nothing."""
    con = sqlite3.connect(f"file:{data_dir / DB}?mode=ro", uri=True, isolation_level=None)
    try:
        con.execute("BEGIN")
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        yield
    finally:
        con.close()


def stored(data_dir: Path) -> int:
    """Messages in the (stopped) daemon's database."""
    con = sqlite3.connect(f"file:{data_dir / DB}?mode=ro", uri=True)
    try:
        (n,) = con.execute("SELECT count(*) FROM messages").fetchone()
    finally:
        con.close()
    return int(n)


# ------------------------------------------------------------------ the daemon


class Refused(Exception):
    """The daemon exited instead of starting; ``message``: its ``cannot start`` line."""

    def __init__(self, code: int | None, log: str) -> None:
        self.code = code
        self.message = next(
            (
                str(e.get("msg"))
                for e in map(_json, reversed(log.splitlines()))
                if e.get("event") == "startup_failed"
            ),
            log[-500:],
        )
        super().__init__(f"exit {code}: {self.message}")


def _json(line: str) -> dict[str, Any]:
    try:
        out = json.loads(line)
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


@contextlib.asynccontextmanager
async def running(setup: Setup, work: Path) -> AsyncIterator[Daemon]:
    """A started daemon (``Refused`` if it exits instead), killed if the block does not
    stop it."""
    d = Daemon(setup, work / "ocd.toml")
    try:
        await d.__aenter__()
    except BenchError:
        assert d.proc is not None
        raise Refused(d.proc.wait(30), d.log) from None
    try:
        yield d
    finally:
        if d.session is not None:
            await d.session.close()
        d.kill()


async def send(d: Daemon, k: int) -> None:
    """``k`` messages in batches of 100; returns once every send was acknowledged."""
    await d.post("/produce", {"mode": "batch", "total": k, "tasks": 2})


async def one_case(
    name: str, damage: Callable[[Path], None] | None, k: int, root: Path
) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root))
    data = work / "data"
    setup = Setup(data, producers={"QUEUE": QUEUE})
    old = work / "old.sqlite"
    async with running(setup, work) as first:
        await send(first, k)
        first.stop()  # a clean stop: everything is in scheduler.sqlite, the older copy
    shutil.copyfile(data / DB, old)
    async with running(setup, work) as second:
        with snapshot_reader(data):
            await send(second, k)
            second.kill()  # kill -9, with the last k messages in the WAL only
    acked = 2 * k
    if name == "older_copy":
        damage = older_copy(old)
    if damage is not None:
        damage(data)
    try:
        async with running(setup, work) as third:
            third.stop()
    except Refused as r:
        advised = ADVICE in r.message and "restore a backup" in r.message
        return {
            "refused": True,
            "exit": r.code,
            "advised": advised,
            "lost": 0,
            "message": r.message,
        }
    have = stored(data)
    return {"refused": False, "stored": have, "acked": acked, "lost": max(acked - have, 0)}


CASES: dict[str, Callable[[Path], None] | None] = {
    "undamaged": None,
    "wal_deleted": delete_wal,
    "wal_truncated": truncate_wal,
    "wal_flipped": flip_wal,
    "db_emptied": empty_db,
    "older_copy": None,  # made per run from its own older copy
}


async def foreign_case(root: Path) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="foreign-", dir=root))
    data = work / "data"
    data.mkdir()
    make_foreign(data / DB)
    before = digest(data / DB)
    try:
        async with running(Setup(data, producers={"QUEUE": QUEUE}), work) as d:
            d.stop()
    except Refused as r:
        unchanged = digest(data / DB) == before and not (data / f"{DB}-wal").exists()
        return {
            "refused": True,
            "exit": r.code,
            "unchanged": unchanged,
            "lost": 0,
            "message": r.message,
        }
    return {"refused": False, "unchanged": digest(data / DB) == before, "lost": 0}


async def run(quick: bool) -> dict[str, Any]:
    k, rounds = (300, 1) if quick else (3000, 3)
    root = Path(tempfile.mkdtemp(prefix="ocd-chaos-damaged-"))
    runs: dict[str, list[dict[str, Any]]] = {}
    try:
        for _ in range(rounds):
            for name, damage in CASES.items():
                runs.setdefault(name, []).append(await one_case(name, damage, k, root))
            runs.setdefault("foreign_db", []).append(await foreign_case(root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    cases = {name: rs[-1] for name, rs in runs.items()}  # the last round's, in full
    control = runs["undamaged"]
    damaged = {n: rs for n, rs in runs.items() if n != "undamaged"}
    detected = all(
        r["refused"] and r.get("exit") == 3 and (r.get("advised") or r.get("unchanged"))
        for rs in damaged.values()
        for r in rs
    )
    lost = sum(r["lost"] for rs in runs.values() for r in rs)
    ok = detected and all(not r["refused"] and r["lost"] == 0 for r in control)
    refused = sum(r["refused"] for rs in damaged.values() for r in rs)
    tried = sum(len(rs) for rs in damaged.values())
    return {
        "ok": ok,
        "lost": lost,
        "rounds": rounds,
        "messages_per_case": 2 * k,
        "refused_per_case": {n: sum(r["refused"] for r in rs) for n, rs in runs.items()},
        "cases": cases,
        "recovered": (
            f"every undamaged restart after kill -9 came up with all {2 * k} messages "
            f"({rounds} round(s)); {refused} of {tried} damaged starts were refused (exit 3) "
            "with advice (restore a backup, or --accept-data-loss), the foreign database "
            "unchanged"
        ),
    }
