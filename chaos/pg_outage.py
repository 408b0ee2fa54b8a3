"""PostgreSQL going away under mixed REST load: a real ``ocd serve`` on a throw-away
PostgreSQL server, which the scenario stops (``pg_ctl stop -m fast``) for a few seconds and
starts again, while REST pushes (to a queue with an HTTP pull consumer), binding sends (to a
queue a worker consumes) and a pull/ack consumer go on.

Afterwards every accepted send must have been delivered: ``lost`` counts those that were
not. Also checked: the daemon never stopped and no background task died, sends were
answered 503 (REST, code 15001) and ``StoreUnavailable`` (the binding) while the server was
down, ``readyz`` went 503 and back, and everything resumed on its own once it was up again.
Skipped, saying why, where no PostgreSQL server binaries are installed.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from tests.acceptance.conftest import APPS, OcdProcess, records
from tests.acceptance.disk import Rest, body_of

PROBE = "probe"  # the push that tells the outage is over; not counted
VISIBILITY_MS = 2_000  # a lease whose ack was lost to the outage comes back soon


def _config(tmp: Path, dsn: str) -> Path:
    cfg = tmp / "ocd.toml"
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:0"
data_dir = "{tmp / "data"}"
shutdown_timeout = 5

[store]
backend = "postgres"
dsn = {json.dumps(dsn)}

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
        self.api = api
        self.stop = asyncio.Event()
        self.pushed: set[str] = set()  # REST sends that returned 200
        self.sent: set[int] = set()  # binding sends that returned 200
        self.pulled: list[str] = []
        self.refused_rest = 0  # 503 15001: the database is unavailable
        self.refused_binding = 0  # StoreUnavailable
        self.drain_refused = 0  # pulls and acks answered 503 while it was down
        self.unexpected: list[str] = []  # any other answer
        self._n = 0

    async def _call(self, fn: Any, *args: Any) -> tuple[int, dict[str, Any]] | None:
        try:
            result: tuple[int, dict[str, Any]] = await fn(*args)
            return result
        except (TimeoutError, aiohttp.ClientError) as e:
            self.unexpected.append(f"{fn.__name__}: {type(e).__name__}: {e}")
            await asyncio.sleep(0.1)
            return None

    @staticmethod
    def _unavailable(status: int, answer: dict[str, Any]) -> bool:
        return status == 503 and answer.get("errors", [{}])[0].get("code") == 15001

    async def push(self) -> None:
        while not self.stop.is_set():
            ids = [f"r{self._n}-{i}" for i in range(10)]
            self._n += 1
            got = await self._call(self.api.push, [f"{i}:x" for i in ids])
            if got is None:
                continue
            status, answer = got
            if status == 200:
                self.pushed.update(ids)
            elif self._unavailable(status, answer):
                self.refused_rest += 1
                await asyncio.sleep(0.05)  # a client backing off
            else:
                self.unexpected.append(f"push {status} {answer}")
            await asyncio.sleep(0.005)

    async def send(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            got = await self._call(self.api.binding_send, {"n": n})
            if got is None:
                continue
            status, answer = got
            if status == 200:
                self.sent.add(n)
            elif answer.get("error") == "StoreUnavailable":
                self.refused_binding += 1
                await asyncio.sleep(0.05)
            else:
                self.unexpected.append(f"binding {status} {answer}")
            await asyncio.sleep(0.005)

    async def consume(self) -> None:
        while not self.stop.is_set():
            if not await self.pull_once(20):
                await asyncio.sleep(0.05)

    async def pull_once(self, n: int) -> int:
        pulled = await self._call(self.api.pull, n, VISIBILITY_MS)
        if pulled is None:
            return 0
        status, got = pulled
        if status != 200:
            if self._unavailable(status, got):
                self.drain_refused += 1
                await asyncio.sleep(0.05)
            else:
                self.unexpected.append(f"pull {status} {got}")
            return 0
        messages = got["result"]["messages"]
        if not messages:
            return 0
        answer = await self._call(self.api.ack, [m["lease_id"] for m in messages])
        if answer is None:
            return 0
        status, acked = answer
        if status != 200:  # not acked: the messages come back when their lease lapses
            if self._unavailable(status, acked):
                self.drain_refused += 1
            else:
                self.unexpected.append(f"ack {status} {acked}")
            return 0
        bodies = [str(body_of(m)) for m in messages]
        self.pulled.extend(b.split(":")[0] for b in bodies if b != PROBE)
        return len(messages)


async def _until(check: Any, timeout_s: float, what: str) -> float:
    started = time.monotonic()
    while not await check():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def run(quick: bool, cluster: Any = None, dsn: str | None = None) -> dict[str, Any]:
    """``cluster`` and ``dsn``: a managed ``tests.pg.Cluster`` and a fresh database of it
    (the tests pass their own); else the scenario starts a throw-away server."""
    if cluster is not None:
        if not cluster.managed:
            return {"skipped": "the PostgreSQL server is not this run's own: it cannot be stopped"}
        assert dsn is not None
        return await _scenario(quick, cluster, dsn)
    from tests import pg

    reason = pg.why_unavailable()
    if reason is not None:
        return {"skipped": reason}
    own = pg.start_cluster()
    try:
        if not own.managed:
            return {"skipped": "the PostgreSQL server is not this run's own: it cannot be stopped"}
        return await _scenario(quick, own, own.create_database("ocd_chaos_pg_outage"))
    finally:
        own.stop()


async def _scenario(quick: bool, cluster: Any, dsn: str) -> dict[str, Any]:
    outages = 1 if quick else 6
    warm_s, down_s, after_s = (1.0, 2.0, 1.5) if quick else (15.0, 8.0, 15.0)
    recover_s: list[float] = []
    seen_unready = 0
    with tempfile.TemporaryDirectory(prefix="ocd-chaos-pg-outage-") as t:
        tmp = Path(t)
        ocd = OcdProcess(_config(tmp, dsn))
        try:
            port = ocd.wait_started()
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
                api = Rest(s, port)
                await api.use_queue("jobs")
                load = Load(api)

                async def unready() -> bool:
                    status, ready = await api.readyz()
                    return status == 503 and ready.get("database") == "unavailable"

                async def resumed() -> bool:
                    status, _ = await api.push([PROBE])
                    return status == 200 and (await api.readyz())[0] == 200

                tasks = [
                    asyncio.create_task(load.push()),
                    asyncio.create_task(load.send()),
                    asyncio.create_task(load.consume()),
                ]
                try:
                    await asyncio.sleep(warm_s)  # steady load before the first outage
                    for _ in range(outages):
                        await asyncio.to_thread(cluster.halt)
                        try:
                            await _until(unready, 30, "readyz to say the database is away")
                            seen_unready += 1
                            await asyncio.sleep(down_s)  # held down under load
                        finally:
                            await asyncio.to_thread(cluster.start)
                        recover_s.append(await _until(resumed, 60, "sends to be accepted again"))
                        await asyncio.sleep(after_s)
                finally:
                    load.stop.set()
                    await asyncio.gather(*tasks)
                # Drain: what was leased when an ack was lost comes back after its lease.
                deadline = time.monotonic() + 60
                while not load.pushed <= set(load.pulled) and time.monotonic() < deadline:
                    if not await load.pull_once(100):
                        await asyncio.sleep(0.1)
                while not load.sent <= _delivered(tmp) and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
            alive = ocd.proc.poll() is None
            code = ocd.stop() if alive else ocd.proc.returncode
        finally:
            ocd.close()
        events = ocd.events
        lost_rest = load.pushed - set(load.pulled)
        lost_binding = load.sent - _delivered(tmp)
    lost = len(lost_rest) + len(lost_binding)
    died = [e for e in events if e.get("event") == "task_died"]
    logged_away = [e for e in events if e.get("event") == "store_unavailable"]
    ok = (
        lost == 0
        and alive
        and code == 0
        and not died
        and not load.unexpected
        and load.refused_rest > 0
        and seen_unready == outages
        and len(recover_s) == outages
    )
    result: dict[str, Any] = {
        "lost": lost,
        "ok": ok,
        "outages": outages,
        "seconds_down_each": down_s,
        "rest_sends_accepted": len(load.pushed),
        "binding_sends_accepted": len(load.sent),
        "pulled": len(load.pulled),
        "duplicates": len(load.pulled) - len(set(load.pulled)),
        "refused_503": load.refused_rest,
        "refused_binding": load.refused_binding,
        "pulls_acks_refused_503": load.drain_refused,
        "outages_logged": len(logged_away),
        "seconds_to_resume": [round(x, 2) for x in recover_s],
        "recovered": (
            f"stayed up through {outages} PostgreSQL outage(s) of {down_s:g} s: sends got "
            "503/StoreUnavailable meanwhile, and were accepted again "
            f"{max(recover_s, default=0):.2f} s at most after the server was back"
            if alive
            else f"ocd exited ({code})"
        ),
    }
    if load.unexpected:
        result["unexpected"] = load.unexpected[:5]
    if died:
        result["task_died"] = died[:1]
    if lost_rest or lost_binding:
        result["lost_examples"] = sorted(map(str, lost_rest | lost_binding))[:5]
    return result


def _delivered(tmp: Path) -> set[int]:
    return {r["body"]["n"] for r in records(tmp) if isinstance(r.get("body"), dict)}
