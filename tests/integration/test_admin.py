"""ocd.admin against a real store: the rules every surface shares, without HTTP.

The store is SQLite in a temp dir; the test of two nodes on one database runs on PostgreSQL
(skipped where it is unavailable, unless CI requires it).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ocd.admin import Admin, config_consumers, config_names, worker_consumer_id
from ocd.config import Config, load_config
from ocd.errors import (
    ConsumerExists,
    ConsumerInConfig,
    ConsumerNotFound,
    DeadLetterTypeMismatch,
    FifoSettingOnStandard,
    QueueExists,
    QueueInUse,
    QueueNotFound,
    QueueTypeChange,
)
from ocd.store import PullConsumer, QueueRecord, QueueSettings, SqliteStore, Store

T0 = 1_800_000_000_000
APPS = Path(__file__).resolve().parent.parent / "apps"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


async def _opened(stores: list[Store], store: Store) -> Store:
    await store.open(T0)
    stores.append(store)
    return store


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request, tmp_path) -> AsyncIterator[Store]:
    stores: list[Store] = []
    if request.param == "sqlite":
        yield await _opened(stores, SqliteStore(tmp_path / "data"))
    else:
        from ocd.store.postgres import PostgresStore

        yield await _opened(stores, PostgresStore(request.getfixturevalue("pg_dsn")))
    for s in stores:
        await s.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def admin(store, clock) -> Admin:
    return Admin(store, clock)


@pytest.fixture
def config(tmp_path) -> Config:
    path = tmp_path / "ocd.toml"
    path.write_text(
        f"""
[server]
listen = "127.0.0.1:0"
data_dir = "data"

[[workers]]
name = "app"
main = "{APPS / "recorder.py"}"

[[workers.queues.producers]]
binding = "QUEUE"
queue = "jobs"

[[workers.queues.producers]]
binding = "OUT"
queue = "out"

[[workers.queues.consumers]]
queue = "jobs"
dead_letter_queue = "jobs-dlq"

[[queues]]
name = "declared"
delivery_delay = 5

[[queues]]
name = "jobs"
delivery_paused = true
"""
    )
    return load_config(path)


def pull_consumer(q: QueueRecord, dlq: str | None = None, batch_size: int = 10) -> PullConsumer:
    return PullConsumer(q.key, "c" * 32, T0, dlq, batch_size)


# ---------------------------------------------------------------- queues


async def test_a_taken_name_is_queue_exists_and_nothing_changes(admin, store):
    made = await admin.create_queue("local", "work", QueueSettings(delivery_delay_s=3))
    with pytest.raises(QueueExists) as e:
        await admin.create_queue("local", "work", QueueSettings(delivery_delay_s=9))
    assert (e.value.account, e.value.name) == ("local", "work")
    assert str(e.value) == "A queue named work already exists"
    assert store.queues() == [made]
    # Another account has names of its own.
    other = await admin.create_queue("acme", "work", QueueSettings())
    assert other.queue_id != made.queue_id


async def test_of_concurrent_creates_of_one_name_exactly_one_succeeds(admin, store):
    results = await asyncio.gather(
        *(admin.create_queue("local", "race", QueueSettings()) for _ in range(8)),
        return_exceptions=True,
    )
    made = [r for r in results if isinstance(r, QueueRecord)]
    refused = [r for r in results if isinstance(r, QueueExists)]
    assert len(made) == 1 and len(refused) == 7, results
    assert [q.queue_id for q in store.queues()] == [made[0].queue_id]


async def test_of_concurrent_creates_on_two_nodes_exactly_one_succeeds(pg_dsn):
    from ocd.store.postgres import PostgresStore

    stores: list[Store] = []
    try:
        a = await _opened(stores, PostgresStore(pg_dsn))
        b = await _opened(stores, PostgresStore(pg_dsn))
        admins = [Admin(a, Clock()), Admin(b, Clock())]
        results = await asyncio.gather(
            *(admins[i % 2].create_queue("local", "race", QueueSettings()) for i in range(8)),
            return_exceptions=True,
        )
        made = [r for r in results if isinstance(r, QueueRecord)]
        assert len(made) == 1 and sum(isinstance(r, QueueExists) for r in results) == 7
        # Dead-letter auto-creates on both nodes at once make one queue, too.
        dlqs = await asyncio.gather(*(admins[i % 2].dead_letter("local", "dlq") for i in range(6)))
        assert len({q.queue_id for q in dlqs}) == 1
        # A rename onto a name the other node just took is refused by the database.
        other = await admins[0].create_queue("local", "other", QueueSettings())
        await admins[1].create_queue("local", "taken", QueueSettings())
        with pytest.raises(QueueExists):
            await admins[0].change_queue(other, QueueSettings(), "taken")
    finally:
        for s in stores:
            await s.close()


async def test_change_replaces_or_derives_settings_and_renames(admin, clock):
    q = await admin.create_queue("local", "work", QueueSettings(delivery_delay_s=3))
    clock.now += 1000
    paused = await admin.change_queue(
        q, lambda s: dataclasses.replace(s, delivery_paused=True), None
    )
    assert paused.settings == QueueSettings(delivery_delay_s=3, delivery_paused=True)
    assert paused.modified_ms == T0 + 1000
    renamed = await admin.change_queue(q, QueueSettings(), "jobs2")
    assert (renamed.name, renamed.queue_id, renamed.settings) == (
        "jobs2",
        q.queue_id,
        QueueSettings(),
    )


async def test_concurrent_changes_of_different_settings_on_one_node_all_take_effect(admin):
    q = await admin.create_queue("local", "work", QueueSettings())
    await asyncio.gather(
        admin.change_queue(q, lambda s: dataclasses.replace(s, delivery_paused=True)),
        admin.change_queue(q, lambda s: dataclasses.replace(s, delivery_delay_s=7)),
        admin.change_queue(q, lambda s: dataclasses.replace(s, message_retention_period_s=600)),
    )
    assert (await admin.current(q)).settings == QueueSettings(7, 600, True)


async def test_a_rename_to_a_taken_name_or_of_a_deleted_queue_is_refused(admin, store):
    work = await admin.create_queue("local", "work", QueueSettings())
    await admin.create_queue("local", "jobs", QueueSettings())
    with pytest.raises(QueueExists) as e:
        await admin.change_queue(work, QueueSettings(delivery_delay_s=1), "jobs")
    assert e.value.name == "jobs"
    assert store.queue("work").settings == QueueSettings()  # nothing was written
    await admin.delete_queue(work)
    with pytest.raises(QueueNotFound):
        await admin.change_queue(work, QueueSettings())


async def test_purge_empties_the_queue_and_records_when(admin, store, clock):
    from ocd.store import NewMessage

    q = await admin.create_queue("local", "work", QueueSettings())
    await store.enqueue(q, [NewMessage("m1", "text", b"hi", T0, T0)])
    clock.now += 5000
    purged = await admin.purge(q)
    assert purged.purged_ms == T0 + 5000
    assert (await store.backlog(q)).count == 0


# ---------------------------------------------------------------- what the config names


def test_config_names_every_queue_a_worker_binds_and_every_declaration(config):
    assert config_names(config) == {
        ("local", "jobs"): ["worker app", "[[queues]]"],
        ("local", "out"): ["worker app"],
        ("local", "jobs-dlq"): ["worker app"],
        ("local", "declared"): ["[[queues]]"],
    }
    [(key, wc)] = config_consumers(config).items()
    assert key == ("local", "jobs") and wc.worker == "app"
    assert wc.consumer.dead_letter_queue == "jobs-dlq"


async def test_config_queues_are_made_and_protected_until_the_config_drops_them(
    admin, store, config, tmp_path
):
    admin.configure(config)
    made = await admin.ensure_config_queues(config.queues)
    assert [q.name for q in made] == [q.name for q in config.queues]
    assert await admin.ensure_config_queues(config.queues) == made  # idempotent
    assert store.queue("declared").settings.delivery_delay_s == 5
    assert store.queue("jobs").settings.delivery_paused is True
    assert store.queue("out").settings == QueueSettings()  # named only: defaults

    for name in ("jobs", "jobs-dlq", "out", "declared"):
        with pytest.raises(QueueInUse) as e:
            await admin.delete_queue(store.queue(name))
        assert e.value.named_by == config_names(config)[("local", name)]
    with pytest.raises(QueueInUse) as e:
        await admin.change_queue(store.queue("declared"), QueueSettings(), "renamed")
    assert str(e.value) == (
        "queue declared cannot be renamed: ocd's config file names it ([[queues]]); "
        "remove it there and reload first"
    )
    # Its settings may change over the API, and a "rename" to its own name is no rename.
    same = await admin.change_queue(store.queue("declared"), QueueSettings(), "declared")
    assert same.settings == QueueSettings()

    # A reload that drops the declaration lets the queue go.
    reloaded = tmp_path / "reloaded.toml"
    reloaded.write_text('[server]\nlisten = "127.0.0.1:0"\ndata_dir = "data"\n')
    admin.configure(load_config(reloaded))
    await admin.delete_queue(store.queue("declared"))
    assert store.queue("declared") is None


# ---------------------------------------------------------------- consumers


async def test_a_consumer_makes_its_missing_dead_letter_queue(admin, store):
    q = await admin.create_queue("local", "work", QueueSettings())
    stored = await admin.create_consumer(q, pull_consumer(q, dlq="work-dlq"))
    assert stored.dead_letter_queue == "work-dlq"
    assert store.queue("work-dlq") is not None
    assert store.pull_consumer(q) == stored


async def test_a_queue_has_one_consumer_at_a_time(admin, store):
    q = await admin.create_queue("local", "work", QueueSettings())
    results = await asyncio.gather(
        *(admin.create_consumer(q, pull_consumer(q)) for _ in range(4)), return_exceptions=True
    )
    assert sum(isinstance(r, PullConsumer) for r in results) == 1, results
    errors = [r for r in results if isinstance(r, ConsumerExists)]
    assert len(errors) == 3 and errors[0].queue == "work"


async def test_put_updates_or_creates_and_delete_needs_the_consumers_id(admin, store):
    q = await admin.create_queue("local", "work", QueueSettings())
    made = await admin.put_consumer(q, pull_consumer(q), "any-id")  # none yet: created
    with pytest.raises(ConsumerNotFound) as e:
        await admin.put_consumer(q, pull_consumer(q, batch_size=5), "not-its-id")
    assert (e.value.queue, e.value.consumer_id) == ("work", "not-its-id")
    changed = dataclasses.replace(pull_consumer(q, batch_size=5), consumer_id="d" * 32)
    updated = await admin.put_consumer(q, changed, made.consumer_id)
    assert (updated.consumer_id, updated.batch_size) == (made.consumer_id, 5)  # the id stays
    with pytest.raises(ConsumerNotFound):
        await admin.delete_consumer(q, "not-its-id")
    await admin.delete_consumer(q, made.consumer_id)
    assert store.pull_consumer(q) is None
    with pytest.raises(ConsumerNotFound):
        await admin.delete_consumer(q, made.consumer_id)


async def test_a_worker_consumer_is_the_config_files_not_the_apis(admin, store, config):
    admin.configure(config)
    await admin.ensure_config_queues(config.queues)
    jobs = store.queue("jobs")
    with pytest.raises(ConsumerExists):
        await admin.create_consumer(jobs, pull_consumer(jobs))
    with pytest.raises(ConsumerInConfig):
        await admin.put_consumer(jobs, pull_consumer(jobs), "whatever")
    with pytest.raises(ConsumerNotFound):
        await admin.delete_consumer(jobs, "not-its-id")
    with pytest.raises(ConsumerInConfig) as e:
        await admin.delete_consumer(jobs, worker_consumer_id(jobs, "app"))
    assert isinstance(e.value, QueueInUse) and e.value.worker == "app"
    assert str(e.value) == (
        "the consumer of jobs is worker app in ocd's config file; remove it there"
    )
    assert store.pull_consumer(jobs) is None


async def test_dead_letter_makes_a_missing_queue_once(admin, store):
    q = await admin.create_queue("local", "work", QueueSettings())
    dlqs = await asyncio.gather(*(admin.dead_letter("local", "gone") for _ in range(5)))
    assert len({d.queue_id for d in dlqs}) == 1
    assert await admin.dead_letter("local", "gone") == store.queue("gone")
    await admin.delete_queue(dlqs[0])
    again = await admin.dead_letter("local", "gone")  # deleted since: made again
    assert again.queue_id != dlqs[0].queue_id
    assert [x.name for x in store.queues()] == ["gone", "work"] and q.name == "work"


# ---------------------------------------------------------------- FIFO queues keep their type


async def test_fifo_queues_keep_their_settings_and_standard_ones_refuse_them(admin, store):
    fifo = QueueSettings(content_based_deduplication=True, deduplication_scope="message_group")
    orders = await admin.create_queue("local", "orders.fifo", fifo)
    assert orders.fifo and store.queue("orders.fifo").settings == fifo
    changed = await admin.change_queue(
        orders, lambda s: dataclasses.replace(s, content_based_deduplication=False)
    )
    assert changed.settings == dataclasses.replace(fifo, content_based_deduplication=False)
    with pytest.raises(FifoSettingOnStandard) as e:
        await admin.create_queue("local", "jobs", QueueSettings(content_based_deduplication=True))
    assert (e.value.queue, e.value.setting) == ("jobs", "content_based_deduplication")
    assert str(e.value) == (
        "content_based_deduplication is only valid on FIFO queues (names ending in .fifo); "
        "jobs is a standard queue"
    )
    assert store.queue("jobs") is None
    jobs = await admin.create_queue("local", "jobs", QueueSettings())
    with pytest.raises(FifoSettingOnStandard) as e:
        await admin.change_queue(jobs, QueueSettings(deduplication_scope="message_group"))
    assert e.value.setting == "deduplication_scope"
    assert store.queue("jobs").settings == QueueSettings()


@pytest.mark.parametrize(("old", "new"), [("jobs", "jobs.fifo"), ("orders.fifo", "orders")])
async def test_a_rename_never_changes_a_queues_type(admin, store, old, new):
    q = await admin.create_queue("local", old, QueueSettings())
    with pytest.raises(QueueTypeChange) as e:
        await admin.change_queue(q, QueueSettings(delivery_delay_s=5), new)
    assert (e.value.queue, e.value.new_name) == (old, new)
    assert old in str(e.value) and new in str(e.value)
    assert store.queue(old).settings == QueueSettings() and store.queue(new) is None
    same_type = "renamed.fifo" if q.fifo else "renamed"
    assert (await admin.change_queue(q, QueueSettings(), same_type)).name == same_type


async def test_a_dead_letter_queue_is_of_its_queues_type(admin, store):
    orders = await admin.create_queue("local", "orders.fifo", QueueSettings())
    jobs = await admin.create_queue("local", "jobs", QueueSettings())
    for q, dlq in ((orders, "orders-dlq"), (jobs, "jobs-dlq.fifo")):
        with pytest.raises(DeadLetterTypeMismatch) as e:
            await admin.create_consumer(q, pull_consumer(q, dlq=dlq))
        assert (e.value.queue, e.value.dead_letter_queue) == (q.name, dlq)
        with pytest.raises(DeadLetterTypeMismatch):
            await admin.put_consumer(q, pull_consumer(q, dlq=dlq))
        assert store.pull_consumer(q) is None and store.queue(dlq) is None
    assert str(e.value) == (
        "the dead letter queue of the standard queue jobs must be a standard queue (FIFO "
        "queues are the names ending in .fifo), got the FIFO queue jobs-dlq.fifo"
    )
    stored = await admin.create_consumer(orders, pull_consumer(orders, dlq="orders-dlq.fifo"))
    assert stored.dead_letter_queue == "orders-dlq.fifo" and store.queue("orders-dlq.fifo").fifo


async def test_config_fifo_queues_get_their_declared_settings(admin, store, tmp_path):
    path = tmp_path / "fifo.toml"
    path.write_text(
        """
[server]
listen = "127.0.0.1:0"
data_dir = "data"

[[queues]]
name = "orders.fifo"
content_based_deduplication = true
deduplication_scope = "message_group"
"""
    )
    await admin.ensure_config_queues(load_config(path).queues)
    orders = store.queue("orders.fifo")
    assert orders.fifo and orders.settings == QueueSettings(
        content_based_deduplication=True, deduplication_scope="message_group"
    )
