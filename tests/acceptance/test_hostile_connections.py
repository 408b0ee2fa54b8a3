"""A real ``ocd serve`` held to 256 descriptors, more half-open and slow-header connections
opened against it than that: normal clients are still served, the hostile connections are
closed (to make room, or at the header timeout), and the log says so."""

from __future__ import annotations

import asyncio
import resource
import time
from pathlib import Path

import aiohttp

from tests.acceptance.conftest import OcdProcess, recorder_config
from tests.helpers import wait_sync

NOFILE = 256
HOSTILE = 300  # more connections than the daemon has descriptors


def _small_nofile() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _open_hostile(port: int, n: int) -> list[Conn]:
    conns = []
    for i in range(n):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        if i % 2:  # half send the start of a request head and never finish it
            writer.write(b"POST /send HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        conns.append((reader, writer))
    return conns


async def _closed_by_server(reader: asyncio.StreamReader, timeout: float) -> bool:
    try:
        async with asyncio.timeout(timeout):
            while await reader.read(65536):
                pass
        return True
    except (TimeoutError, ConnectionError):
        return False


async def test_half_open_connections_beyond_the_descriptor_limit_lock_nobody_out(
    tmp_path: Path, ocd_processes
) -> None:
    cfg = recorder_config(tmp_path, "", extra="header_timeout = 2")
    p: OcdProcess = ocd_processes(cfg, preexec_fn=_small_nofile)
    port = p.wait_started()
    limit = p.event("descriptor_limit")
    assert limit is not None and limit["nofile"] == NOFILE
    cap = limit["max_connections"]
    assert cap < NOFILE

    started = time.monotonic()
    hostile = await _open_hostile(port, HOSTILE)
    try:
        async with aiohttp.ClientSession() as s:
            for i in range(5):  # a normal client, while all of them are open
                async with s.post(f"http://127.0.0.1:{port}/send", json={"body": i}) as r:
                    assert r.status == 200, await r.text()
        closed = await asyncio.gather(*(_closed_by_server(r, 30) for r, _ in hostile))
        took = time.monotonic() - started
        assert all(closed), f"{closed.count(False)} of {HOSTILE} still open after {took:.1f} s"
    finally:
        for _, w in hostile:
            w.close()
    assert p.proc.poll() is None
    wait_sync(lambda: p.event("connections_limited") and p.event("header_timeout"), 10)
    assert "out of system resource" not in p.log  # accept() never ran out of descriptors
    async with aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{port}/__ocd/healthz") as r:
            assert r.status == 200
