"""A small real filesystem for a daemon's data directory, and REST helpers to fill it.

Shared by tests/acceptance/test_disk_full.py and chaos/full_disk.py. Mounting needs root (or
CAP_SYS_ADMIN); where it is impossible ``small_filesystem`` says why instead."""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

API = "/client/v4/accounts/local/queues"


class CannotMount(Exception):
    """No small filesystem can be mounted here; str() says why."""


@contextlib.contextmanager
def small_filesystem(where: Path, size_mib: int, kind: str = "tmpfs") -> Iterator[Path]:
    """A filesystem of ``size_mib`` MiB mounted at ``where`` (made if missing): a tmpfs, or
    (``kind="ext4"``) an ext4 image on a loop device; unmounted on exit even if the block
    fails."""
    where.mkdir(parents=True, exist_ok=True)
    image = where.with_name(where.name + ".img")
    if kind == "ext4":
        with open(image, "wb") as f:
            f.truncate(size_mib * 2**20)
        made = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True, text=True)
        if made.returncode != 0:
            image.unlink()
            raise CannotMount(f"cannot make an ext4 image here: {made.stderr.strip()}")
        command = ["mount", "-o", "loop", str(image), str(where)]
    else:
        command = ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m,mode=0755", "tmpfs", str(where)]
    r = subprocess.run(command, capture_output=True, text=True)
    if r.returncode != 0:
        image.unlink(missing_ok=True)
        why = (r.stderr or r.stdout).strip() or f"mount exited {r.returncode}"
        raise CannotMount(f"cannot mount a {size_mib} MiB {kind} at {where} here: {why}")
    try:
        yield where
    finally:
        done = subprocess.run(["umount", str(where)], capture_output=True)
        if done.returncode != 0:  # something still holds a file open: detach it lazily
            subprocess.run(["umount", "-l", str(where)], capture_output=True)
        image.unlink(missing_ok=True)


def fill(path: Path) -> int:
    """Append zeros to ``path`` until the filesystem is full; the bytes written."""
    written = 0
    chunk = 2**20
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while chunk >= 4096:
            try:
                written += os.write(fd, bytes(chunk))
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                chunk //= 4  # the last few blocks, smaller
        os.fsync(fd)
    finally:
        os.close(fd)
    return written


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def body_of(message: dict[str, Any]) -> Any:
    """A pulled message's body: JSON ones come base64-encoded, as from Cloudflare."""
    if message.get("metadata", {}).get("CF-Content-Type") == "json":
        return json.loads(base64.b64decode(message["body"]))
    return message["body"]


class Rest:
    """The REST API of one daemon, for one queue with an HTTP pull consumer."""

    def __init__(self, session: aiohttp.ClientSession, port: int) -> None:
        self.s = session
        self.root = f"http://127.0.0.1:{port}"
        self.base = f"{self.root}{API}"
        self.qid = ""

    async def use_queue(self, name: str) -> None:
        async with self.s.get(self.base) as r:
            queues = (await r.json())["result"]
        self.qid = {q["queue_name"]: q["queue_id"] for q in queues}[name]
        async with self.s.get(f"{self.base}/{self.qid}/consumers") as r:
            if (await r.json())["result"]:
                return
        async with self.s.post(
            f"{self.base}/{self.qid}/consumers", json={"type": "http_pull"}
        ) as r:
            assert r.status == 200, await r.text()

    async def push(self, bodies: list[Any]) -> tuple[int, dict[str, Any]]:
        msgs = [{"body": b} for b in bodies]
        async with self.s.post(
            f"{self.base}/{self.qid}/messages/batch", json={"messages": msgs}
        ) as r:
            return r.status, await r.json()

    async def pull(self, n: int = 100, visibility_ms: int = 60_000) -> tuple[int, dict[str, Any]]:
        body = {"batch_size": n, "visibility_timeout_ms": visibility_ms}
        async with self.s.post(f"{self.base}/{self.qid}/messages/pull", json=body) as r:
            return r.status, await r.json()

    async def ack(self, leases: list[str]) -> tuple[int, dict[str, Any]]:
        body = {"acks": [{"lease_id": x} for x in leases]}
        async with self.s.post(f"{self.base}/{self.qid}/messages/ack", json=body) as r:
            return r.status, await r.json()

    async def drain(self, into: list[Any]) -> None:
        """Pull and ack until the queue gives nothing; the bodies go to ``into``."""
        while True:
            status, got = await self.pull()
            assert status == 200, got
            messages = got["result"]["messages"]
            if not messages:
                return
            status, acked = await self.ack([m["lease_id"] for m in messages])
            assert status == 200, acked
            into.extend(body_of(m) for m in messages)

    async def readyz(self) -> tuple[int, dict[str, Any]]:
        async with self.s.get(f"{self.root}/__ocd/readyz") as r:
            return r.status, await r.json()

    async def store_full_metric(self) -> float:
        async with self.s.get(f"{self.root}/__ocd/metrics") as r:
            text = await r.text()
        line = next(x for x in text.splitlines() if x.startswith("ocd_store_full "))
        return float(line.split()[1])

    async def binding_send(self, body: Any) -> tuple[int, dict[str, Any]]:
        """A send through the recorder worker's QUEUE binding (tests/apps/recorder.py)."""
        async with self.s.post(f"{self.root}/send", json={"body": body}) as r:
            return r.status, await r.json()
