"""A full disk (PostgreSQL: a database that goes away) is an operating state, not a crash.

Real ``ocd serve`` processes on a real small filesystem (a tmpfs mounted for the test; the
tests skip, saying why, where mounting is impossible), filled by pushes over REST."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.acceptance.conftest import APPS, OcdProcess, records, run_ocd
from tests.acceptance.disk import CannotMount, Rest, fill, small_filesystem
from tests.helpers import eventually, wait_sync
from tests.openapi_schemas import problems, response_validator

pytestmark = pytest.mark.timeout(120)

BODY = "x" * 20_000  # ten to a batch: under the 256 KB batch limit
BATCH = "/accounts/{account_id}/queues/{queue_id}/messages/batch"  # what Rest.push calls


def documented(status: int, answer: Any) -> list[str]:
    """What in ``answer`` the OpenAPI document's response for ``status`` does not allow."""
    validator = response_validator("POST", BATCH, status)
    assert validator is not None, f"the document lists no {status} for a batch push"
    return problems(validator, answer)


def config(tmp: Path, data_dir: Path, store: str = "", reserve: str = "") -> Path:
    cfg = tmp / "ocd.toml"
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:0"
data_dir = "{data_dir}"
shutdown_timeout = 5
{reserve}

{store}

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


def enter(cm: Any) -> Path:
    try:
        return Path(cm.__enter__())
    except CannotMount as e:
        pytest.skip(str(e))


async def push_until_full(api: Rest, accepted: list[str], start: int = 0) -> dict[str, Any]:
    """Push numbered batches until the daemon answers 507; returns that answer."""
    n = start
    for _ in range(10_000):
        bodies = [f"{n + i}:{BODY}" for i in range(10)]
        status, answer = await api.push(bodies)
        if status == 507:
            return answer
        assert status == 200, answer
        accepted.extend(b.split(":")[0] for b in bodies)
        n += 10
    raise AssertionError("the disk never filled")


def events(p: OcdProcess, name: str) -> list[dict[str, Any]]:
    return [e for e in p.events if e.get("event") == name]


@pytest.mark.sqlite_only
@pytest.mark.parametrize("kind", ["tmpfs", "ext4"])
def test_a_full_disk_refuses_sends_clearly_drains_and_resumes_once_space_is_freed(
    ocd_processes, tmp_path, kind
):
    cm = small_filesystem(tmp_path / "volume", 48, kind)
    volume = enter(cm)
    try:
        filler = volume / "filler"
        filler.write_bytes(bytes(12 * 2**20))  # what the operator frees later
        data_dir = volume / "data"
        ocd = ocd_processes(config(tmp_path, data_dir))
        port = ocd.wait_started()

        async def scenario() -> None:
            async with aiohttp.ClientSession() as s:
                api = Rest(s, port)
                await api.use_queue("jobs")
                accepted: list[str] = []
                answer = await push_until_full(api, accepted)
                # REST: 507 in Cloudflare's envelope, saying the disk is full and where.
                assert answer["success"] is False and answer["result"] is None
                (err,) = answer["errors"]
                assert err["code"] == 10251
                assert documented(507, answer) == []
                assert "the disk is full" in err["message"] and str(data_dir) in err["message"]
                # The binding raises an error that says the same.
                status, raised = await api.binding_send({"n": 1})
                assert status == 400 and raised["error"] == "StoreFull"
                assert "the disk is full" in raised["message"]
                assert str(data_dir) in raised["message"]
                status, ready = await api.readyz()
                assert status == 503 and ready["database"] == "full"
                assert str(data_dir) in ready["reason"]
                assert await api.store_full_metric() == 1
                # Pulls and acks go on, so that consumers drain the queue.
                pulled: list[Any] = []
                await api.drain(pulled)
                assert sorted(b.split(":")[0] for b in pulled) == sorted(accepted)
                status, answer = await api.push(["still full"])
                assert status == 507  # acks freed pages inside the file, not the disk

                filler.unlink()  # the operator frees space: everything resumes on its own

                async def sends_again() -> bool:
                    status, _ = await api.push(["after"])
                    return status == 200

                await eventually(sends_again, timeout=20, interval=0.1)
                status, ready = await api.readyz()
                assert status == 200 and ready["ready"] is True
                assert await api.store_full_metric() == 0
                status, sent = await api.binding_send({"n": "after"})
                assert status == 200, sent
                after: list[Any] = []
                await api.drain(after)
                assert after == ["after"]

        asyncio.run(scenario())
        assert ocd.proc.poll() is None, ocd.log  # it never stopped
        assert len(events(ocd, "store_full")) == 1, ocd.log  # one line when it started ...
        assert len(events(ocd, "store_space_back")) == 1, ocd.log  # ... one when it ended
        assert not events(ocd, "task_died") and "Traceback" not in ocd.log
        assert ocd.stop() == 0
    finally:
        cm.__exit__(None, None, None)


@pytest.mark.sqlite_only
def test_the_push_consumer_keeps_delivering_through_a_full_disk_and_loses_nothing(
    ocd_processes, tmp_path
):
    """Binding sends to a queue a worker consumes, until the disk fills: every send that
    returned is delivered, and the dispatcher never dies."""
    cm = small_filesystem(tmp_path / "volume", 40)
    volume = enter(cm)
    try:
        filler = volume / "filler"
        filler.write_bytes(bytes(8 * 2**20))
        ocd = ocd_processes(config(tmp_path, volume / "data"))
        port = ocd.wait_started()

        async def scenario() -> set[int]:
            sent: set[int] = set()
            async with aiohttp.ClientSession() as s:
                api = Rest(s, port)
                await api.use_queue("jobs")
                n = 0
                refused = 0
                # The pull queue fills the disk while the binding keeps sending to "work".
                while refused < 5:
                    status, _ = await api.push([f"{n}:{BODY}" for _ in range(10)])
                    st, answer = await api.binding_send({"n": n})
                    if st == 200:
                        sent.add(n)
                    else:
                        assert answer["error"] == "StoreFull", answer
                    refused += status == 507
                    n += 1
                drained: list[Any] = []
                await api.drain(drained)  # the pull consumer makes room too
                filler.unlink()

                async def binding_sends_again() -> bool:
                    nonlocal n
                    n += 1
                    st, _ = await api.binding_send({"n": n})
                    if st == 200:
                        sent.add(n)
                    return st == 200

                await eventually(binding_sends_again, timeout=20, interval=0.1)
            return sent

        sent = asyncio.run(scenario())

        def delivered() -> bool:
            return sent <= _recorded(tmp_path)

        wait_sync(delivered, timeout=20)
        assert ocd.proc.poll() is None and not events(ocd, "task_died"), ocd.log
        assert ocd.stop() == 0
    finally:
        cm.__exit__(None, None, None)


def _recorded(tmp: Path) -> set[int]:
    return {r["body"]["n"] for r in records(tmp) if isinstance(r.get("body"), dict)}


@pytest.mark.sqlite_only
def test_ocd_starts_on_a_full_disk_serves_pulls_and_acks_and_never_advises_a_restore(
    ocd_processes, tmp_path
):
    cm = small_filesystem(tmp_path / "volume", 40)
    volume = enter(cm)
    try:
        data_dir = volume / "data"
        cfg = config(tmp_path, data_dir)
        filler = volume / "filler"
        filler.write_bytes(bytes(8 * 2**20))  # what the operator frees at the end
        ocd = ocd_processes(cfg)
        port = ocd.wait_started()
        accepted: list[str] = []

        async def fill_it() -> None:
            async with aiohttp.ClientSession() as s:
                api = Rest(s, port)
                await api.use_queue("jobs")
                await push_until_full(api, accepted)

        asyncio.run(fill_it())
        ocd.proc.send_signal(signal.SIGKILL)  # as a crash would, on the full disk
        ocd.proc.wait(10)

        again = ocd_processes(cfg)
        port = again.wait_started()

        async def drain_after_restart() -> None:
            async with aiohttp.ClientSession() as s:
                api = Rest(s, port)
                await api.use_queue("jobs")
                status, ready = await api.readyz()
                assert status == 503 and ready["database"] == "full", ready
                status, answer = await api.push(["no room"])
                assert status == 507 and "the disk is full" in answer["errors"][0]["message"]
                pulled: list[Any] = []
                await api.drain(pulled)
                assert sorted(b.split(":")[0] for b in pulled) == sorted(accepted)

        asyncio.run(drain_after_restart())
        assert again.stop() == 0
        assert "restore" not in again.log

        # Nothing left at all, not even the reserve's room: ocd cannot open the database,
        # and says the disk is full, not that the file is damaged.
        last_room = volume / "last-room"
        fill(last_room)
        r = run_ocd("serve", "-c", str(cfg))
        assert r.returncode != 0
        assert "the disk is full" in r.stderr and "not damaged" in r.stderr, r.stderr
        assert "do not restore a backup" in r.stderr
        last_room.unlink()
        filler.unlink()
        last = ocd_processes(cfg)
        port = last.wait_started()

        async def sends_work() -> None:
            async with aiohttp.ClientSession() as s:
                api = Rest(s, port)
                await api.use_queue("jobs")
                assert (await api.push(["fine"]))[0] == 200

        asyncio.run(sends_work())
        assert last.stop() == 0
        assert (data_dir / "scheduler.sqlite.reserve").exists()  # held again

        # Another program fills the disk while ocd is stopped: the reserve is the room the
        # start, pulls and acks use.
        fill(last_room)
        held = ocd_processes(cfg)
        port = held.wait_started()

        async def serves_from_the_reserve() -> None:
            async with aiohttp.ClientSession() as s:
                api = Rest(s, port)
                await api.use_queue("jobs")
                status, ready = await api.readyz()
                assert status == 503 and ready["database"] == "full", ready
                assert (await api.push(["no room"]))[0] == 507
                pulled: list[Any] = []
                await api.drain(pulled)
                assert pulled == ["fine"]

        asyncio.run(serves_from_the_reserve())
        assert held.stop() == 0
        assert "restore" not in held.log
    finally:
        cm.__exit__(None, None, None)


def test_a_bad_disk_reserve_is_refused_with_its_key_path(tmp_path):
    cfg = config(tmp_path, tmp_path / "data", reserve='disk_reserve = "lots"')
    r = run_ocd("check-config", "-c", str(cfg))
    assert r.returncode != 0
    assert "server.disk_reserve" in r.stderr and '"lots"' in r.stderr, r.stderr


@pytest.mark.sqlite_only
def test_the_reserve_is_held_in_the_data_dir_at_the_configured_size(ocd_processes, tmp_path):
    cfg = config(tmp_path, tmp_path / "data", reserve='disk_reserve = "3MiB"')
    ocd = ocd_processes(cfg)
    ocd.wait_started()
    reserve = tmp_path / "data" / "scheduler.sqlite.reserve"
    assert reserve.stat().st_size == 3 * 2**20
    assert reserve.stat().st_blocks * 512 >= 3 * 2**20  # allocated, not a sparse file
    assert ocd.stop() == 0


@pytest.mark.timeout(180)
def test_postgres_going_away_answers_503_and_everything_resumes(
    ocd_processes, tmp_path, pg_cluster, pg_dsn
):
    if not pg_cluster.managed:
        pytest.skip("the PostgreSQL server is not this test run's own: it cannot be stopped")
    store = f'[store]\nbackend = "postgres"\ndsn = "{pg_dsn}"'
    ocd = ocd_processes(config(tmp_path, tmp_path / "data", store=store))
    port = ocd.wait_started()
    sent: set[int] = set()

    async def scenario() -> None:
        async with aiohttp.ClientSession() as s:
            api = Rest(s, port)
            await api.use_queue("jobs")
            for n in range(20):
                assert (await api.binding_send({"n": n}))[0] == 200
                sent.add(n)
            assert (await api.push(["before"]))[0] == 200
            pg_cluster.halt()
            try:
                status, answer = await api.push(["while away"])
                assert status == 503, answer
                message = answer["errors"][0]["message"]
                assert "unavailable" in message and "try again" in message
                assert documented(503, answer) == []
                status, raised = await api.binding_send({"n": -1})
                assert status == 400 and raised["error"] == "StoreUnavailable", raised

                async def not_ready() -> bool:
                    status, ready = await api.readyz()
                    return status == 503 and ready["database"] == "unavailable"

                await eventually(not_ready, timeout=20)
                # The dispatcher and the other loops back off instead of dying.
                await eventually(lambda: bool(events(ocd, "dispatch_paused")), timeout=40)
            finally:
                pg_cluster.start()

            async def sends_again() -> bool:
                status, _ = await api.push(["after"])
                return status == 200

            await eventually(sends_again, timeout=40, interval=0.2)

            async def ready_again() -> bool:
                return (await api.readyz())[0] == 200

            await eventually(ready_again, timeout=20)
            for n in range(20, 30):
                assert (await api.binding_send({"n": n}))[0] == 200
                sent.add(n)
            pulled: list[Any] = []
            await api.drain(pulled)
            assert "before" in pulled and "after" in pulled

    asyncio.run(scenario())
    wait_sync(lambda: sent <= _recorded(tmp_path), timeout=30)
    assert ocd.proc.poll() is None and not events(ocd, "task_died"), ocd.log
    assert len(events(ocd, "dispatch_paused")) <= 1, ocd.log  # once, not once per retry
    # One line when the database went away, one when it came back; not one per request.
    assert len(events(ocd, "store_unavailable")) == 1, ocd.log
    assert len(events(ocd, "store_available")) == 1, ocd.log
    assert ocd.stop() == 0
