"""Cron triggers: the scheduler on a real store (SQLite file, PostgreSQL database) under an
injected clock, and scheduled() found and called as Cloudflare calls it."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from pathlib import Path

import pytest

import runtime
from ocd import cron
from ocd.config import WorkerConfig
from ocd.loader import load_worker
from ocd.metrics import Metrics
from ocd.scheduler import Schedule, Scheduler
from ocd.store import SqliteStore, Store
from tests.helpers import FakeClock


def at(hour: int, minute: int, second: int = 0) -> int:
    t = dt.datetime(2027, 3, 1, hour, minute, second, tzinfo=dt.UTC)
    return int(t.timestamp() * 1000)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, controller, env, ctx) -> None:
        self.calls.append((controller.cron, controller.scheduledTime))


def schedule(handler, expr: str = "*/5 * * * *", worker: str = "app") -> Schedule:
    return Schedule(worker, cron.parse(expr), handler, runtime.Env({}), 10.0)


@pytest.fixture(params=["sqlite", "postgres"])
async def open_store(request, tmp_path):
    opened: list[Store] = []
    dsn = request.getfixturevalue("pg_dsn") if request.param == "postgres" else None

    async def open_one(now_ms: int) -> Store:
        if dsn is None:
            s: Store = SqliteStore(tmp_path / "data")
        else:
            from ocd.store.postgres import PostgresStore

            s = PostgresStore(dsn)
        await s.open(now_ms)
        opened.append(s)
        return s

    yield open_one
    for s in opened:
        await s.close()


async def test_a_schedule_fires_at_its_minute_and_once_per_tick(open_store):
    clock = FakeClock(at(12, 3, 20))
    store = await open_store(clock())
    rec = Recorder()
    s = Scheduler(store, clock, Metrics(), [schedule(rec)])
    await s.run_due()  # first seen: 12:00 is in the past and does not run
    clock.now = at(12, 4, 59)
    await s.run_due()
    assert rec.calls == []
    clock.now = at(12, 5, 0)
    await s.run_due()
    await s.idle()
    clock.now = at(12, 5, 40)
    await s.run_due()
    await s.idle()
    assert rec.calls == [("*/5 * * * *", at(12, 5))]


async def test_a_run_missed_while_down_fires_once_after_a_restart(open_store):
    clock = FakeClock(at(12, 0, 10))
    store = await open_store(clock())
    rec = Recorder()
    await Scheduler(store, clock, Metrics(), [schedule(rec)]).run_due()
    await store.close()
    clock.now = at(12, 47, 30)  # nine ticks came due while ocd was down
    store = await open_store(clock())
    s = Scheduler(store, clock, Metrics(), [schedule(rec)])
    await s.run_due()
    await s.idle()
    await s.run_due()
    assert rec.calls == [("*/5 * * * *", at(12, 45))]


async def test_two_nodes_on_postgresql_run_each_tick_once(pg_dsn):
    from ocd.store.postgres import PostgresStore

    clock = FakeClock(at(9, 0, 30))
    stores = [PostgresStore(pg_dsn), PostgresStore(pg_dsn)]
    for st in stores:
        await st.open(clock())
    try:
        rec = Recorder()
        nodes = [Scheduler(st, clock, Metrics(), [schedule(rec, "* * * * *")]) for st in stores]
        for n in nodes:
            await n.run_due()  # first seen at 9:00:30: 9:00 is recorded, not run
        for minute in range(1, 6):
            clock.now = at(9, minute, 1)
            await asyncio.gather(*(n.run_due() for n in nodes))
            for n in nodes:
                await n.idle()
        assert rec.calls == [("* * * * *", at(9, m)) for m in range(1, 6)]
    finally:
        for st in stores:
            await st.close()


async def test_a_failing_run_is_logged_and_counted_and_the_next_tick_still_runs(tmp_path, caplog):
    clock = FakeClock(at(8, 0, 30))
    store = SqliteStore(tmp_path / "data")
    await store.open(clock())
    calls = []

    async def broken(controller, env, ctx):
        calls.append(controller.scheduledTime)
        controller.noRetry()
        raise RuntimeError("boom")

    metrics = Metrics()
    s = Scheduler(store, clock, metrics, [schedule(broken, "* * * * *")])
    try:
        await s.run_due()
        with caplog.at_level(logging.ERROR):
            for minute in (1, 2):
                clock.now = at(8, minute, 0)
                [task] = await s.run_due()
                assert (await task).outcome == "exception"
        assert calls == [at(8, 1), at(8, 2)]
        assert "scheduled() for '* * * * *' raised" in caplog.text and "boom" in caplog.text
        value = metrics.registry.get_sample_value(
            "ocd_cron_runs_total", {"worker": "app", "cron": "* * * * *", "outcome": "exception"}
        )
        assert value == 2
    finally:
        await store.close()


def worker_file(tmp_path: Path, source: str, crons=("*/5 * * * *",)) -> WorkerConfig:
    path = tmp_path / "entry.py"
    path.write_text(source)
    return WorkerConfig(
        f"w{abs(hash(source)) % 10_000}", "workers[0]", tmp_path / "ocd.toml", path, None, (),
        {}, crons=crons,
    )  # fmt: skip


@pytest.mark.parametrize(
    "source",
    [
        # class style, as Cloudflare's cron example writes it
        "from workers import WorkerEntrypoint\n"
        "class Default(WorkerEntrypoint):\n"
        "    async def scheduled(self, controller, env, ctx):\n"
        "        env.SEEN.append((controller.cron, self.env is env))\n",
        # class style without env and ctx
        "from workers import WorkerEntrypoint\n"
        "class Default(WorkerEntrypoint):\n"
        "    async def scheduled(self, controller):\n"
        "        self.env.SEEN.append((controller.cron, True))\n",
        # module style, new and legacy names
        "async def scheduled(controller, env, ctx):\n"
        "    env.SEEN.append((controller.cron, True))\n",
        "async def on_scheduled(controller, env):\n    env.SEEN.append((controller.cron, True))\n",
    ],
)
async def test_scheduled_is_called_with_the_arguments_it_takes(tmp_path, source):
    loaded = load_worker(worker_file(tmp_path, source))
    assert loaded.scheduled is not None
    seen: list[tuple[str, bool]] = []
    controller = runtime.ScheduledController("*/5 * * * *", at(1, 5))
    await loaded.scheduled(controller, runtime.Env({"SEEN": seen}), runtime.ExecutionContext())
    assert seen == [("*/5 * * * *", True)]


def test_crons_without_a_scheduled_handler_are_refused_at_load(tmp_path):
    from ocd.errors import WorkerLoadError

    with pytest.raises(WorkerLoadError, match=r"cron triggers \(\*/5 \* \* \* \*\) but its module"):
        load_worker(worker_file(tmp_path, "async def fetch(request):\n    return 'hi'\n"))


CRON_WORKER = """
from workers import WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def scheduled(self, controller, env, ctx):
        with open(env.RECORD, "a") as f:
            f.write(f"{controller.cron} {controller.scheduledTime}\\n")
"""


def cron_config(tmp: Path, crons: str, store_section: str) -> Path:
    (tmp / "app").mkdir(exist_ok=True)
    (tmp / "app" / "worker.py").write_text(CRON_WORKER)
    cfg = tmp / "ocd.toml"
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:0"
data_dir = "data"

{store_section}

[[workers]]
name = "app"
main = "app/worker.py"
crons = {crons}
vars = {{ RECORD = "{tmp / "runs.txt"}" }}
"""
    )
    return cfg


async def test_the_daemon_runs_its_workers_crons_and_a_reload_swaps_them(tmp_path, store_section):
    from ocd.config import load_config
    from ocd.daemon import Daemon, load_workers

    clock = FakeClock(at(10, 2, 0))
    cfg = cron_config(tmp_path, '["0 * * * *"]', store_section)
    config = load_config(cfg)
    daemon = Daemon(config, load_workers(config), clock=clock)
    await daemon.start()
    try:
        assert [s.key for s in daemon.scheduler.schedules] == ["app|0 * * * *"]
        cron_config(tmp_path, '["*/5 * * * *"]', store_section)
        assert await daemon.reload()
        assert [s.key for s in daemon.scheduler.schedules] == ["app|*/5 * * * *"]
        await daemon.scheduler.run_due()  # first seen after the reload
        clock.now = at(10, 5, 3)
        await daemon.scheduler.run_due()
        await daemon.scheduler.idle()
        assert (tmp_path / "runs.txt").read_text() == f"*/5 * * * * {at(10, 5)}\n"
    finally:
        await daemon.shutdown(timeout_s=1)
