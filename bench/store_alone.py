"""The store alone (issue 36): no daemon, no HTTP, no dispatcher; this process opens ocd's
store through its public interface and makes the calls the producer, the dispatcher and
the pull API make.

* store    -- SQLite, ``durability = "full"``, a fresh data dir per run;
* pg_store -- PostgreSQL, a fresh database of the bench's server per run.

Each run sends ``n`` messages in batches of 100 (``enqueue``, one batch at a time, each
awaited as a producer's ``sendBatch`` is), then claims (a PUSH lease of 60 s) and acks
(``settle``) batches of 100 until a claim comes back empty; once on a standard queue and once
on a FIFO queue with 1,000 interleaved groups (message i in group i % 1000, its own
deduplication id ``str(i)``, which sorts nearly in send order), which goes first alternating
by run; on SQLite also on that FIFO queue with the ids content-based deduplication gives
(``fifo_hashed``: the body's SHA-256, as ``ocd.producer`` makes them), which land anywhere.
The messages are built before the clock starts. ``us_per_msg`` is this process's CPU
(``time.process_time``: the event loop, the SQLite writer, asyncpg) over sending, claiming
and acking, per message; on PostgreSQL ``server_us_per_msg`` is the server's
(``PgServer.cpu_s``) over the same window.

PostgreSQL's writes a message, standard and FIFO, from ``pg_stat_user_tables`` (every user
table of the run's database is ocd's) read before and after, with autovacuum off on those
tables so that nothing is vacuumed in between. The store is closed before each read: a
backend reports its table counters when it exits, and an idle one only up to 10 s later.

* ``heap_tuples_per_msg``: heap tuple versions written, ``n_tup_ins + n_tup_upd`` (an
  update writes a new version, HOT or not; a delete writes none, it marks one dead);
* ``hot_updates_per_msg``: of those updates, the HOT ones (no index entry written);
* ``dead_tuples_per_msg``: ``n_dead_tup`` after, less before, with nothing vacuumed (page
  pruning during the run still reclaims some, as it would with autovacuum on);
* ``index_inserts_per_msg``: B-tree entries inserted, counted in the WAL between the two
  reads (``pg_walinspect``: Btree ``INSERT_LEAF``, ``INSERT_POST`` and the ``SPLIT_L`` /
  ``SPLIT_R`` that carry the new entry, on the database's own indexes); ``pg_stat_user_
  indexes`` has no insert counter. Missing when ``pg_walinspect`` cannot be created;
* ``index_inserts_upper_per_msg``: the same estimated from the counters, each table's
  ``(n_tup_ins + n_tup_upd - n_tup_hot_upd) x its indexes``: an upper bound, since a row
  outside a partial index's predicate (a message without a PUSH owner, say) adds no entry;
* ``wal_bytes_per_msg``: WAL written between the two reads.
* ``xacts_per_batch``: transactions the database ran for each 100 messages sent, claimed
  and acked (``pg_stat_database``); the bench's own few reads between the two are in it.

A ``CHECKPOINT`` before the first read makes every run start with the same full-page
writes to come, and keeps the run's WAL in ``pg_wal`` for ``pg_walinspect``. The second
open of the store (after the first created the queue and the tables) registers its node:
a few rows, counted, against 100,000 messages.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from harness import Bench, BenchError
from pgserver import PgServer

from ocd.producer import new_message_id
from ocd.store import Claim, DeadLetter, LeaseKind, NewMessage, QueueSettings, Store, make_store

BATCH = 100
GROUPS = 1000
LEASE_MS = 60_000
MAX_ATTEMPTS = 4
NO_DLQ = DeadLetter(None)
SETTLED_S = 10.0  # how long the server may take to show a closed store's counters and WAL

# Btree WAL records that add an entry to a leaf (a split record carries the entry that
# caused it); INSERT_UPPER and NEWROOT are the tree's own downlinks.
INDEX_INSERT_RECORDS = ("INSERT_LEAF", "INSERT_POST", "SPLIT_L", "SPLIT_R")
COUNTERS = ("n_tup_ins", "n_tup_upd", "n_tup_hot_upd", "n_tup_del", "n_dead_tup")


def batches(n: int, fifo: bool, hashed: bool = False) -> list[list[NewMessage]]:
    now = int(time.time() * 1000)
    out = []
    for start in range(0, n, BATCH):
        batch = []
        for i in range(start, min(start + BATCH, n)):
            body = json.dumps({"i": i}).encode()
            if fifo:
                dedup = hashlib.sha256(body).hexdigest() if hashed else str(i)
                batch.append(
                    NewMessage(new_message_id(), "json", body, now, now, f"g{i % GROUPS}", dedup)
                )
            else:
                batch.append(NewMessage(new_message_id(), "json", body, now, now))
        out.append(batch)
    return out


async def drive(store: Store, name: str, sends: list[list[NewMessage]]) -> dict[str, float]:
    """Send every batch, then claim and ack until empty; CPU and wall seconds of each half."""
    now = int(time.time() * 1000)
    queue = await store.ensure_queue(name, "local", QueueSettings(), now)
    n = sum(len(b) for b in sends)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for batch in sends:
        if queue.fifo:
            await store.enqueue_fifo(queue, batch)
        else:
            await store.enqueue(queue, batch)
    cpu1 = time.process_time()
    acked = 0
    while True:
        t = int(time.time() * 1000)
        ask = Claim(BATCH, t, t + LEASE_MS, MAX_ATTEMPTS, NO_DLQ, LeaseKind.PUSH)
        claimed = await store.claim(queue, ask)
        if not claimed.deliveries:
            break
        await store.settle(queue, [d.seq for d in claimed.deliveries], [], [], NO_DLQ, t)
        acked += len(claimed.deliveries)
    cpu2, wall2 = time.process_time(), time.perf_counter()
    if acked != n:
        raise BenchError(f"{name}: sent {n} messages, claimed and acked {acked}")
    return {
        "us_per_msg": (cpu2 - cpu0) / n * 1e6,
        "send_us_per_msg": (cpu1 - cpu0) / n * 1e6,
        "claim_ack_us_per_msg": (cpu2 - cpu1) / n * 1e6,
        "msg_s": n / (wall2 - wall0),
        "cpu_pct": 100 * (cpu2 - cpu0) / (wall2 - wall0),
    }


def queue_name(fifo: bool) -> str:
    return "bench.fifo" if fifo else "bench"


async def sqlite_run(work: Path, n: int, fifo: bool, hashed: bool = False) -> dict[str, float]:
    sends = batches(n, fifo, hashed)
    store = make_store("sqlite", data_dir=work / "data", durability="full")
    await store.open(int(time.time() * 1000))
    try:
        return await drive(store, queue_name(fifo), sends)
    finally:
        await store.close()


class PgWrites:
    """The counters and WAL position of one database, read through psql."""

    def __init__(self, pg: PgServer, dsn: str) -> None:
        self.pg, self.dsn = pg, dsn
        self.walinspect = self._try("CREATE EXTENSION IF NOT EXISTS pg_walinspect")

    def _try(self, sql: str) -> bool:
        try:
            self.pg.psql(sql, self.dsn)
        except RuntimeError:
            return False
        return True

    def sql(self, sql: str) -> str:
        return self.pg.psql(sql, self.dsn)

    def no_autovacuum(self) -> None:
        tables = self.sql("SELECT relname FROM pg_stat_user_tables").split()
        for t in tables:
            self.sql(f'ALTER TABLE "{t}" SET (autovacuum_enabled = off)')

    def wait_closed(self) -> None:
        """Until no other session is connected to the database: the store's backends have
        exited, and so reported their counters."""
        deadline = time.monotonic() + SETTLED_S
        others = (
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        while self.sql(others) != "0":
            if time.monotonic() > deadline:
                raise BenchError("the store's PostgreSQL sessions did not end")
            time.sleep(0.02)

    def counters(self) -> dict[str, tuple[int, ...]]:
        """Per table: COUNTERS, then its number of indexes."""
        rows = self.sql(
            f"SELECT relname, {', '.join(COUNTERS)}, "
            "(SELECT count(*) FROM pg_index i WHERE i.indrelid = t.relid) "
            "FROM pg_stat_user_tables t"
        )
        out = {}
        for row in rows.splitlines():
            name, *values = row.split("|")
            out[name] = tuple(int(v) for v in values)
        return out

    def xacts(self) -> int:
        """Transactions the database has committed or rolled back (reported, like the
        table counters, when a backend goes idle or exits)."""
        return int(
            self.sql(
                "SELECT xact_commit + xact_rollback FROM pg_stat_database "
                "WHERE datname = current_database()"
            )
        )

    def wal_lsn(self) -> str:
        return self.sql("SELECT pg_current_wal_insert_lsn()")

    def wait_flushed(self, lsn: str) -> None:
        """Until the WAL up to ``lsn`` is flushed (claims and acks may commit without
        waiting for it), so that pg_walinspect can read it."""
        deadline = time.monotonic() + SETTLED_S
        while self.sql(f"SELECT pg_current_wal_flush_lsn() >= '{lsn}'") != "t":
            if time.monotonic() > deadline:
                raise BenchError(f"the WAL was not flushed up to {lsn}")
            time.sleep(0.02)

    def index_inserts(self, start: str, end: str) -> int | None:
        if not self.walinspect:
            return None
        records = ", ".join(f"'{r}'" for r in INDEX_INSERT_RECORDS)
        return int(
            self.sql(
                "SELECT count(*) FROM pg_get_wal_records_info("
                f"'{start}', '{end}') w, "
                "LATERAL regexp_match(w.block_ref, 'rel \\d+/(\\d+)/(\\d+)') m "
                "JOIN pg_class c ON c.relfilenode = m[2]::oid AND c.relkind = 'i' "
                "WHERE w.resource_manager = 'Btree' "
                f"AND w.record_type IN ({records}) "
                "AND m[1]::oid = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
        )

    def wal_bytes(self, start: str, end: str) -> int:
        return int(self.sql(f"SELECT pg_wal_lsn_diff('{end}', '{start}')::bigint"))


def writes_per_msg(
    before: dict[str, tuple[int, ...]], after: dict[str, tuple[int, ...]], n: int
) -> dict[str, float]:
    ins = upd = hot = dead = upper = 0
    for table, now in after.items():
        was = before.get(table, (0,) * len(now))
        t_ins, t_upd, t_hot, _del, t_dead = (
            a - b for a, b in zip(now[: len(COUNTERS)], was, strict=False)
        )
        ins, upd, hot, dead = ins + t_ins, upd + t_upd, hot + t_hot, dead + t_dead
        upper += (t_ins + t_upd - t_hot) * now[len(COUNTERS)]
    return {
        "heap_tuples_per_msg": (ins + upd) / n,
        "hot_updates_per_msg": hot / n,
        "dead_tuples_per_msg": dead / n,
        "index_inserts_upper_per_msg": upper / n,
    }


async def pg_run(pg: PgServer, dsn: str, n: int, fifo: bool) -> dict[str, float]:
    sends = batches(n, fifo)
    writes = PgWrites(pg, dsn)
    # A first open creates the tables and the queue; then they stop being vacuumed
    setup = make_store("postgres", dsn=dsn, durability="full")
    await setup.open(int(time.time() * 1000))
    try:
        await setup.ensure_queue(queue_name(fifo), "local", QueueSettings(), 0)
    finally:
        await setup.close()
    writes.no_autovacuum()
    writes.wait_closed()
    writes.sql("CHECKPOINT")
    before, lsn0, xacts0 = writes.counters(), writes.wal_lsn(), writes.xacts()

    store = make_store("postgres", dsn=dsn, durability="full")
    await store.open(int(time.time() * 1000))
    try:
        server0 = pg.cpu_s()
        out = await drive(store, queue_name(fifo), sends)
        out["server_us_per_msg"] = (pg.cpu_s() - server0) / n * 1e6
    finally:
        await store.close()
    lsn1 = writes.wal_lsn()
    writes.wait_closed()
    writes.wait_flushed(lsn1)
    out.update(writes_per_msg(before, writes.counters(), n))
    out["xacts_per_batch"] = (writes.xacts() - xacts0) / (n / BATCH)
    out["wal_bytes_per_msg"] = writes.wal_bytes(lsn0, lsn1) / n
    inserts = writes.index_inserts(lsn0, lsn1)
    if inserts is not None:
        out["index_inserts_per_msg"] = inserts / n
    return out


async def store_run(
    bench: Bench, name: str, run: int, n: int, pg: PgServer | None
) -> dict[str, Any]:
    """A standard and a FIFO run (which goes first alternating; on SQLite also a FIFO run
    with content-based deduplication ids) and FIFO's CPU over standard's."""
    out: dict[str, Any] = {"messages": n}
    order = [("standard", False, False), ("fifo", True, False)]
    if run % 2 == 0:
        order.reverse()
    if pg is None:
        order.insert(run % 3, ("fifo_hashed", True, True))
    for kind, fifo, hashed in order:
        label = f"{name}-{kind}"
        with bench.workdir(label) as work:
            if pg is None:
                out[kind] = await sqlite_run(work, n, fifo, hashed)
            else:
                with pg.database(label) as dsn:
                    out[kind] = await pg_run(pg, dsn, n, fifo)
    out["fifo_ratio"] = out["fifo"]["us_per_msg"] / out["standard"]["us_per_msg"]
    return out
