"""A full disk under mixed load: a real ``ocd serve`` on a small tmpfs ``data_dir``.

REST pushes (to a queue with an HTTP pull consumer) and binding sends (to a queue a worker
consumes) fill the filesystem while a REST client pulls and acks; the scenario holds the
disk full for a while (the full run also kills ocd with SIGKILL then and starts it again
on the full disk), then frees space (deletes a filler file it wrote beside the database)
and waits for ocd to accept sends again. Afterwards every
accepted send must have been delivered: ``lost`` counts those that were not. Also
checked: the daemon never stopped, sends were refused with 507 (REST) and ``StoreFull``
(the binding) while full, pulls and acks never failed, and ``readyz`` went 503 and back.
Needs root to mount the tmpfs; skipped, saying why, where that is impossible.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from tests.acceptance.conftest import APPS, OcdProcess, records
from tests.acceptance.disk import CannotMount, Rest, body_of, small_filesystem


def _config(tmp: Path, data_dir: Path) -> Path:
    cfg = tmp / "ocd.toml"
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:0"
data_dir = "{data_dir}"
shutdown_timeout = 5

[[queues]]
name = "jobs"

[[workers]]
name = "app"
main = "{APPS / "recorder.py"}"
routes = ["/"]
vars = {{ RECORD = "{tmp / "record.jsonl"}" }}

[[workers.queues.producers]]
binding = "QUEUE"
queue = "work"

[[workers.queues.consumers]]
queue = "work"
max_batch_size = 10
max_batch_timeout = 0.1
"""
    )
    return cfg


class Load:
    """REST pushes, binding sends and a pull/ack consumer, counted."""

    def __init__(self, api: Rest) -> None:
        self.api = api  # replaced when the daemon is restarted
        self.down = False  # the daemon is being restarted: connection errors are expected
        self.stop = asyncio.Event()
        self.pushed: set[str] = set()  # REST sends that returned 200
        self.sent: set[int] = set()  # binding sends that returned 200
        self.pulled: list[str] = []
        self.refused_rest = 0
        self.refused_binding = 0
        self.unexpected: list[str] = []  # any other answer
        self.drain_errors = 0  # pulls or acks that failed
        self._n = 0

    async def _call(self, fn: Any, *args: Any) -> tuple[int, dict[str, Any]] | None:
        """``fn(*args)`` on the current daemon; None while it is down (its fate unknown)."""
        try:
            result: tuple[int, dict[str, Any]] = await fn(*args)
            return result
        except (TimeoutError, aiohttp.ClientError) as e:
            if not self.down:
                self.unexpected.append(f"{fn.__name__}: {type(e).__name__}: {e}")
            await asyncio.sleep(0.1)
            return None

    async def push(self) -> None:
        body = "x" * 16_000
        while not self.stop.is_set():
            ids = [f"r{self._n}-{i}" for i in range(10)]
            self._n += 1
            got = await self._call(self.api.push, [f"{i}:{body}" for i in ids])
            if got is None:
                continue
            status, answer = got
            if status == 200:
                self.pushed.update(ids)
            elif status == 507 and "the disk is full" in answer["errors"][0]["message"]:
                self.refused_rest += 1
                await asyncio.sleep(0.05)  # a client backing off
            else:
                self.unexpected.append(f"push {status} {answer}")

    async def send(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            got = await self._call(self.api.binding_send, {"n": n, "pad": "y" * 2000})
            if got is None:
                continue
            status, answer = got
            if status == 200:
                self.sent.add(n)
            elif answer.get("error") == "StoreFull":
                self.refused_binding += 1
                await asyncio.sleep(0.05)
            else:
                self.unexpected.append(f"binding {status} {answer}")

    async def consume(self, pace_s: float) -> None:
        while not self.stop.is_set():
            await self.pull_once(20)
            await asyncio.sleep(pace_s)  # slower than the producers: the disk fills

    async def pull_once(self, n: int) -> int:
        pulled = await self._call(self.api.pull, n)
        if pulled is None:
            return 0
        status, got = pulled
        if status != 200:
            self.drain_errors += 1
            self.unexpected.append(f"pull {status} {got}")
            return 0
        messages = got["result"]["messages"]
        if not messages:
            return 0
        answer = await self._call(self.api.ack, [m["lease_id"] for m in messages])
        if answer is None:  # the daemon went down: these come back when their lease lapses
            return 0
        status, acked = answer
        if status != 200:
            self.drain_errors += 1
            self.unexpected.append(f"ack {status} {acked}")
            return 0
        self.pulled.extend(str(body_of(m)).split(":")[0] for m in messages)
        return len(messages)


async def _until(check: Any, timeout_s: float, what: str) -> float:
    started = time.monotonic()
    while not await check():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.1)
    return time.monotonic() - started


async def run(quick: bool) -> dict[str, Any]:
    size_mib, filler_mib = (40, 8) if quick else (120, 32)
    hold_s, after_s = (1.5, 1.5) if quick else (60.0, 60.0)
    with tempfile.TemporaryDirectory(prefix="ocd-chaos-disk-") as t:
        tmp = Path(t)
        try:
            cm = small_filesystem(tmp / "volume", size_mib)
            volume = cm.__enter__()
        except CannotMount as e:
            return {"skipped": str(e)}
        try:
            return await _scenario(tmp, volume, filler_mib, hold_s, after_s, kill=not quick)
        finally:
            cm.__exit__(None, None, None)


async def _scenario(
    tmp: Path, volume: Path, filler_mib: int, hold_s: float, after_s: float, kill: bool
) -> dict[str, Any]:
    filler = volume / "filler"
    filler.write_bytes(bytes(filler_mib * 2**20))
    cfg = _config(tmp, volume / "data")
    ocd = OcdProcess(cfg)
    fill_s: list[float] = []
    recover_s: list[float] = []
    readyz_full = 0
    cycles = 1
    events: list[dict[str, Any]] = []
    restarted_full = False
    try:
        port = ocd.wait_started()
        async with aiohttp.ClientSession() as s:
            api = Rest(s, port)
            await api.use_queue("jobs")
            load = Load(api)

            async def full() -> bool:
                status, ready = await load.api.readyz()
                return status == 503 and ready.get("database") == "full"

            async def resumed() -> bool:
                return (await load.api.readyz())[0] == 200

            tasks = [
                asyncio.create_task(load.push()),
                asyncio.create_task(load.send()),
                asyncio.create_task(load.consume(0.05)),
            ]
            try:
                fill_s.append(await _until(full, 120, "the disk to fill"))
                readyz_full += 1
                await asyncio.sleep(hold_s / 2)  # held full under load
                if kill:  # a crash on the full disk, and a start on it
                    load.down = True
                    ocd.kill9()
                    events += ocd.events
                    ocd.close()
                    ocd = OcdProcess(cfg)
                    port = ocd.wait_started()
                    fresh = Rest(s, port)
                    await fresh.use_queue("jobs")
                    load.api = fresh
                    load.down = False
                    restarted_full = await full()
                await asyncio.sleep(hold_s / 2)
                filler.unlink()  # the operator frees space
                recover_s.append(await _until(resumed, 60, "sends to be accepted again"))
                await asyncio.sleep(after_s)
            finally:
                load.stop.set()
                await asyncio.gather(*tasks)
            while await load.pull_once(100):  # drain what is left
                pass
            wanted = set(load.sent)
            deadline = time.monotonic() + 60
            while not wanted <= _delivered(tmp) and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
        alive = ocd.proc.poll() is None
        code = ocd.stop() if alive else ocd.proc.returncode
    finally:
        ocd.close()
        events += ocd.events
    lost_rest = load.pushed - set(load.pulled)
    lost_binding = set(load.sent) - _delivered(tmp)
    lost = len(lost_rest) + len(lost_binding)
    died = [e for e in events if e.get("event") == "task_died"]
    episodes = [e for e in events if e.get("event") == "store_full"]
    ok = (
        lost == 0
        and alive
        and code == 0
        and not died
        and load.drain_errors == 0
        and not load.unexpected
        and load.refused_rest > 0
        and readyz_full == cycles
        and len(recover_s) == cycles
        and (restarted_full or not kill)
    )
    result: dict[str, Any] = {
        "lost": lost,
        "lost_rest": sorted(lost_rest)[:10],
        "lost_binding": sorted(lost_binding)[:10],
        "ok": ok,
        "killed_and_restarted_while_full": kill and restarted_full,
        "rest_sends_accepted": len(load.pushed),
        "binding_sends_accepted": len(load.sent),
        "pulled": len(load.pulled),
        "duplicates": len(load.pulled) - len(set(load.pulled)),
        "refused_507": load.refused_rest,
        "refused_binding": load.refused_binding,
        "drain_errors": load.drain_errors,
        "full_episodes_logged": len(episodes),
        "seconds_to_fill": [round(x, 1) for x in fill_s],
        "seconds_to_resume": [round(x, 1) for x in recover_s],
        "recovered": (
            f"stayed up through a full disk{' (and a kill -9 and start on it)' if kill else ''}: "
            "sends got 507/StoreFull while pulls and acks went on, and sends were accepted "
            f"again {max(recover_s, default=0):.1f} s after space was freed"
            if alive
            else f"ocd exited ({code})"
        ),
    }
    if load.unexpected:
        result["unexpected"] = load.unexpected[:5]
    if died:
        result["task_died"] = died[:1]
    return result


def _delivered(tmp: Path) -> set[int]:
    return {r["body"]["n"] for r in records(tmp) if isinstance(r.get("body"), dict)}
