"""``ocd migrate-store`` moves a stopped SQLite node's data into PostgreSQL: queues,
consumers, messages with their ids, delays and attempts, and the key that signs lease ids."""

from __future__ import annotations

from ocd.pull import LEASE_SECRET, Signer
from ocd.store import (
    Claim,
    DeadLetter,
    LeaseKind,
    NewMessage,
    PullConsumer,
    QueueSettings,
    SqliteStore,
)
from ocd.store.postgres import PostgresStore
from tests.acceptance.conftest import run_ocd

T0 = 1_800_000_000_000
NO_DLQ = DeadLetter(None)


async def _sqlite_node(data_dir):
    s = SqliteStore(data_dir)
    await s.open(T0)
    q = await s.ensure_queue("jobs", "local", QueueSettings(delivery_delay_s=5), T0)
    await s.ensure_queue("other", "acme", None, T0)
    await s.put_pull_consumer(q, PullConsumer(q.key, "c" * 32, T0, "jobs-dlq", batch_size=7))
    msgs = [NewMessage(f"{i:032x}", "json", b'{"n": %d}' % i, T0 + i, T0 + i) for i in range(5)]
    msgs.append(NewMessage("d" * 32, "text", b"later", T0, T0 + 3_600_000))
    await s.enqueue(q, msgs)
    [leased] = (
        await s.claim(q, Claim(1, T0 + 10, T0 + 60_000, 4, NO_DLQ, LeaseKind.PULL))
    ).deliveries
    lease = Signer(await s.secret(LEASE_SECRET)).issue("lease", q, leased.seq, leased.id, 1)
    await s.close()
    return q, leased, lease


async def test_migrate_store_copies_everything_and_lease_ids_stay_valid(tmp_path, pg_dsn):
    q, leased, lease = await _sqlite_node(tmp_path / "data")
    out = run_ocd("migrate-store", "--from", str(tmp_path / "data"), "--to", pg_dsn)
    assert out.returncode == 0, out.stderr
    assert "copied 2 queue(s), 1 pull consumer(s) and 6 message(s)" in out.stdout

    pg = PostgresStore(pg_dsn)
    await pg.open(T0 + 20)
    try:
        jobs = pg.queue("jobs")
        assert jobs.queue_id == q.queue_id and jobs.settings.delivery_delay_s == 5
        assert pg.queue("other", "acme") is not None
        c = pg.pull_consumer(jobs)
        assert (c.consumer_id, c.batch_size, c.dead_letter_queue) == ("c" * 32, 7, "jobs-dlq")
        assert (await pg.backlog(jobs)).count == 6
        ready = await pg.peek(jobs, T0 + 20, 10)  # the first one is leased
        assert sorted(d.id for d in ready) == [f"{i:032x}" for i in range(1, 5)]
        assert leased.id == f"{0:032x}"
        # the delayed one keeps its delay; the leased one its lease deadline and attempt
        assert (await pg.ready(jobs, T0 + 20, 10)).next_visible_ms == T0 + 60_000
        token = Signer(await pg.secret(LEASE_SECRET)).check("lease", jobs, lease)
        assert token is not None and token.seq == leased.seq
        settled = await pg.settle(jobs, [token.seq], [], [], NO_DLQ, T0 + 20)
        assert settled.acked == 1 and (await pg.backlog(jobs)).count == 5
        fresh = await pg.enqueue(jobs, [NewMessage("e" * 32, "json", b"1", T0, T0)])
        assert fresh.count == 6  # new seqs continue after the copied ones
    finally:
        await pg.close()


async def test_migrate_store_refuses_a_non_empty_target_unless_forced(tmp_path, pg_dsn):
    await _sqlite_node(tmp_path / "data")
    assert (
        run_ocd("migrate-store", "--from", str(tmp_path / "data"), "--to", pg_dsn).returncode == 0
    )
    again = run_ocd("migrate-store", "--from", str(tmp_path / "data"), "--to", pg_dsn)
    assert again.returncode == 1 and "already holds ocd queues" in again.stderr
    forced = run_ocd("migrate-store", "--from", str(tmp_path / "data"), "--to", pg_dsn, "--force")
    assert forced.returncode == 0, forced.stderr
    assert "6 message(s)" in forced.stdout


async def test_migrate_store_refuses_a_running_node_and_hides_the_password(tmp_path):
    s = SqliteStore(tmp_path / "data")
    await s.open(T0)
    try:
        out = run_ocd(
            "migrate-store",
            "--from",
            str(tmp_path / "data"),
            "--to",
            "postgresql://ocd:hunter2@127.0.0.1:1/ocd",
        )
    finally:
        await s.close()
    assert out.returncode == 1 and "in use by another ocd process" in out.stderr
    assert "hunter2" not in out.stderr + out.stdout


def test_backup_of_a_postgres_config_points_to_postgres_tools(tmp_path):
    cfg = tmp_path / "ocd.toml"
    cfg.write_text('[store]\nbackend = "postgres"\ndsn = "postgresql://ocd:pw@db/ocd"\n')
    out = run_ocd("backup", "-c", str(cfg), "--to", str(tmp_path / "b.sqlite"))
    assert out.returncode == 2 and "pg_dump" in out.stderr and "pw@" not in out.stderr


async def test_migrate_store_keeps_fifo_groups_sequences_and_the_dedup_window(tmp_path, pg_dsn):
    s = SqliteStore(tmp_path / "data")
    await s.open(T0)
    q = await s.ensure_queue(
        "orders.fifo", "local", QueueSettings(deduplication_scope="message_group"), T0
    )
    msgs = [
        NewMessage(f"{i:032x}", "json", b"%d" % i, T0, T0, "a" if i < 3 else "b", f"d{i}")
        for i in range(5)
    ]
    _, sent = await s.enqueue_fifo(q, msgs)
    # a's head leased to a pull client (push leases go back when the export opens the file)
    [head] = (await s.claim(q, Claim(1, T0, T0 + 60_000, 4, NO_DLQ, LeaseKind.PULL))).deliveries
    await s.close()
    out = run_ocd("migrate-store", "--from", str(tmp_path / "data"), "--to", pg_dsn)
    assert out.returncode == 0, out.stderr

    pg = PostgresStore(pg_dsn)
    await pg.open(T0 + 10)
    try:
        orders = pg.queue("orders.fifo")
        assert orders.settings.deduplication_scope == "message_group"
        # a's head is still in flight (its lease deadline came along): only b goes out
        d = (await pg.claim(orders, Claim(10, T0 + 10, T0 + 60_000, 4, NO_DLQ))).deliveries
        assert [(x.group, x.sequence) for x in d] == [
            ("b", sent[3].sequence),
            ("b", sent[4].sequence),
        ]
        # the window came along; new sequence numbers continue after the copied ones
        _, again = await pg.enqueue_fifo(
            orders, [NewMessage("e" * 32, "json", b"0", T0 + 10, T0 + 10, "a", "d0")]
        )
        assert again[0].duplicate and again[0].id == head.id
        _, fresh = await pg.enqueue_fifo(
            orders, [NewMessage("f" * 32, "json", b"9", T0 + 10, T0 + 10, "a", "new")]
        )
        assert fresh[0].sequence > sent[-1].sequence
        after = (await pg.claim(orders, Claim(10, T0 + 60_000, T0 + 90_000, 4, NO_DLQ))).deliveries
        assert [x.id for x in after][:3] == [head.id, sent[1].id, sent[2].id]
    finally:
        await pg.close()
