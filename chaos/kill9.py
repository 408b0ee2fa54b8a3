"""kill -9 cycles under mixed load: nothing a send confirmed is lost, and every duplicate is
one that was in flight at a kill.

Load, all at once and through every outage (each client retries where a request failed):

* binding sends: ``sendBatch`` of 10 through the recorder worker's ``/send-batch``; its
  consumer (``jobs``, batches of 10, two at a time) appends each delivery to a record file;
* REST: batch pushes of 10 to ``pulled``, and pullers that pull 10 and ack them in one call;
* SQS (when the daemon has the endpoint): ``SendMessageBatch`` of 10 to ``sqsjobs``, and
  receivers that ``ReceiveMessage`` 10 and ``DeleteMessageBatch`` them; the same on the FIFO
  queue ``sqsjobs.fifo`` (seven message groups, one sender, so each group's numbers rise in
  send order).

Each cycle starts ``ocd serve``, lets the load run for a random while (or, one cycle in
eight, kills it during startup and recovery) and kills it with SIGKILL. At the end a clean
daemon drains everything and the books are checked:

* ``lost``: confirmed sends never delivered (worker), never pulled (REST) or received (SQS);
* ``duplicates``: messages delivered more than once;
* ``unexplained``: duplicates that no kill explains: a worker delivery repeated within one
  process, or a message pulled/received again after its ack/delete was confirmed;
* ``fifo_out_of_order``: a FIFO message received for the first time after a later message
  of its group was.

The ``pg`` variant runs the same on PostgreSQL with two nodes sharing one database, killing
one node per cycle (alternately) while the other keeps serving; it is skipped, with the
reason, where no PostgreSQL can be started.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parent.parent
RECORDER = REPO / "tests" / "apps" / "recorder.py"
API = "/client/v4/accounts/local/queues"
SQS_JSON = "application/x-amz-json-1.0"
BATCH = 10
VISIBILITY_S = 10  # pull and SQS leases: short, so that the drain does not wait long
STARTUP_TIMEOUT_S = 60.0
DRAIN_TIMEOUT_S = 180.0
FIFO_GROUPS = 7


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Node:
    """One daemon's config and its current process (None between a kill and a restart)."""

    name: str
    config: Path
    port: int
    sqs_port: int
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    kills: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def sqs_url(self) -> str:
        return f"http://127.0.0.1:{self.sqs_port}"

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ocd",
                    "serve",
                    "-c",
                    str(self.config),
                    "--log-format",
                    "json",
                    "--log-level",
                    "warning",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=REPO,
                env=dict(os.environ, PYTHONUNBUFFERED="1"),
            )
        self.starts += 1

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.kills += 1
        if self.proc is not None:
            self.proc.wait(30)
        self.proc = None

    def stop(self) -> int:
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(120)
        self.proc = None
        return code

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    async def wait_up(self, s: aiohttp.ClientSession) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            code = self.exited()
            if code is not None:
                raise RuntimeError(f"{self.name} exited {code} at start; see {self.log}")
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with s.get(self.url + "/__ocd/readyz") as r:
                    ready = r.status == 200
                if ready:  # and the SQS listener, which starts after the main one
                    _, writer = await asyncio.open_connection("127.0.0.1", self.sqs_port)
                    writer.close()
                    return
            await asyncio.sleep(0.05)  # the pace of polling, not synchronisation
        raise RuntimeError(f"{self.name} not ready within {STARTUP_TIMEOUT_S} s; see {self.log}")


@dataclass
class Books:
    """What the clients were told, and what they saw."""

    confirmed_worker: set[int] = field(default_factory=set)
    confirmed_rest: set[int] = field(default_factory=set)
    confirmed_sqs: set[int] = field(default_factory=set)
    pulled: collections.Counter[int] = field(default_factory=collections.Counter)
    acked: set[int] = field(default_factory=set)
    pulled_after_ack: int = 0
    received: collections.Counter[int] = field(default_factory=collections.Counter)
    deleted: set[int] = field(default_factory=set)
    received_after_delete: int = 0
    confirmed_fifo: set[int] = field(default_factory=set)
    received_fifo: collections.Counter[int] = field(default_factory=collections.Counter)
    deleted_fifo: set[int] = field(default_factory=set)
    received_after_delete_fifo: int = 0
    fifo_out_of_order: int = 0
    fifo_highest: dict[int, int] = field(default_factory=dict)  # group -> highest first seen
    errors: collections.Counter[str] = field(default_factory=collections.Counter)


def write_config(work: Path, node: str, port: int, sqs_port: int, store: str) -> Path:
    cfg = work / f"{node}.toml"
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:{port}"
data_dir = "{work / "data"}"
shutdown_timeout = 5

{store}

[sqs]
listen = "127.0.0.1:{sqs_port}"

[[queues]]
name = "pulled"

[[queues]]
name = "sqsjobs"

[[queues]]
name = "sqsjobs.fifo"

[[workers]]
name = "app"
main = "{RECORDER}"
routes = ["/"]
vars = {{ RECORD = "{work / "record.jsonl"}" }}

[[workers.queues.producers]]
binding = "QUEUE"
queue = "jobs"

[[workers.queues.consumers]]
queue = "jobs"
max_batch_size = {BATCH}
max_batch_timeout = 0
max_concurrency = 2
"""
    )
    return cfg


def _ns(message_body: Any) -> int | None:
    body = message_body
    if isinstance(body, str):
        with contextlib.suppress(ValueError):
            body = json.loads(body)
    return body.get("n") if isinstance(body, dict) else None


class Load:
    """The clients. Each loop picks a live node per request and retries through outages."""

    def __init__(self, nodes: list[Node], books: Books, stop: asyncio.Event) -> None:
        self.nodes = nodes
        self.books = books
        self.stop = stop
        self.sqs_url: str | None = None  # QueueUrl of sqsjobs, once known
        self.fifo_url: str | None = None  # and of sqsjobs.fifo

    def node(self) -> Node:
        live = [n for n in self.nodes if n.proc is not None] or self.nodes
        return random.choice(live)

    async def _post(
        self, s: aiohttp.ClientSession, url: str, body: Any, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        async with s.post(
            url, data=json.dumps(body), headers=headers or {"Content-Type": "application/json"}
        ) as r:
            text = await r.text()
            try:
                return r.status, json.loads(text)
            except ValueError:
                return r.status, text

    async def _pause_after_error(self, what: str) -> None:
        self.books.errors[what] += 1
        await asyncio.sleep(0.05)  # the pace of retries while a node is down

    async def worker_sends(self, s: aiohttp.ClientSession, start: int) -> None:
        n = start
        while not self.stop.is_set():
            msgs = [{"body": {"n": n + i}} for i in range(BATCH)]
            try:
                status, _ = await self._post(s, self.node().url + "/send-batch", {"messages": msgs})
            except (aiohttp.ClientError, OSError):
                await self._pause_after_error("worker send")
                n += BATCH  # its fate is unknown: never reuse its numbers
                continue
            if status == 200:
                self.books.confirmed_worker.update(range(n, n + BATCH))
            n += BATCH  # an unconfirmed batch may or may not be stored: never reuse its numbers

    async def rest_pushes(self, s: aiohttp.ClientSession, start: int) -> None:
        n = start
        while not self.stop.is_set():
            # text bodies: a pull returns them as they are (json ones come back base64)
            msgs = [
                {"body": json.dumps({"n": n + i}), "content_type": "text"} for i in range(BATCH)
            ]
            try:
                status, _ = await self._post(
                    s, self.node().url + f"{API}/pulled/messages/batch", {"messages": msgs}
                )
            except (aiohttp.ClientError, OSError):
                await self._pause_after_error("rest push")
                n += BATCH  # its fate is unknown: never reuse its numbers
                continue
            if status == 200:
                self.books.confirmed_rest.update(range(n, n + BATCH))
            n += BATCH

    async def rest_pull(self, s: aiohttp.ClientSession, until_empty: bool = False) -> None:
        while not self.stop.is_set() or until_empty:
            base = self.node().url + f"{API}/pulled/messages"
            try:
                status, answer = await self._post(
                    s,
                    base + "/pull",
                    {"batch_size": BATCH, "visibility_timeout_ms": VISIBILITY_S * 1000},
                )
                if status != 200:
                    await self._pause_after_error(f"rest pull {status}")
                    continue
                messages = answer["result"]["messages"]
                if not messages:
                    if until_empty:
                        return
                    await asyncio.sleep(0.05)  # an empty queue: the pace of polling
                    continue
                numbers = [_ns(m["body"]) for m in messages]
                for k in numbers:
                    if k is None:
                        continue
                    if k in self.books.acked:
                        self.books.pulled_after_ack += 1
                    self.books.pulled[k] += 1
                status, answer = await self._post(
                    s, base + "/ack", {"acks": [{"lease_id": m["lease_id"]} for m in messages]}
                )
                if status == 200 and answer["result"]["ackCount"] == len(messages):
                    self.books.acked.update(k for k in numbers if k is not None)
            except (aiohttp.ClientError, OSError, KeyError, TypeError):
                await self._pause_after_error("rest pull/ack")

    async def _sqs(
        self, s: aiohttp.ClientSession, node: Node, op: str, body: dict[str, Any]
    ) -> tuple[int, Any]:
        return await self._post(
            s,
            node.sqs_url + "/",
            body,
            {"Content-Type": SQS_JSON, "X-Amz-Target": f"AmazonSQS.{op}"},
        )

    async def sqs_queue_url(self, s: aiohttp.ClientSession, name: str = "sqsjobs") -> str:
        status, answer = await self._sqs(s, self.nodes[0], "GetQueueUrl", {"QueueName": name})
        if status != 200:
            raise RuntimeError(f"GetQueueUrl {name}: {status} {answer}")
        return str(answer["QueueUrl"])

    def _fifo_seen(self, k: int) -> None:
        b = self.books
        if k in b.deleted_fifo:
            b.received_after_delete_fifo += 1
        if b.received_fifo[k] == 0:  # a first receipt: no later message of its group before
            group = k % FIFO_GROUPS
            if k < b.fifo_highest.get(group, -1):
                b.fifo_out_of_order += 1
            b.fifo_highest[group] = max(k, b.fifo_highest.get(group, -1))
        b.received_fifo[k] += 1

    async def sqs_sends(self, s: aiohttp.ClientSession, start: int, fifo: bool = False) -> None:
        """``SendMessageBatch`` of numbered messages to sqsjobs, or to sqsjobs.fifo (message
        n in group n % FIFO_GROUPS, deduplicated by its number)."""
        url, confirmed = (
            (self.fifo_url, self.books.confirmed_fifo)
            if fifo
            else (self.sqs_url, self.books.confirmed_sqs)
        )
        n = start
        while not self.stop.is_set():
            entries: list[dict[str, str]] = [
                {"Id": str(i), "MessageBody": json.dumps({"n": n + i})} for i in range(BATCH)
            ]
            if fifo:
                for i, e in enumerate(entries):
                    e["MessageGroupId"] = f"g{(n + i) % FIFO_GROUPS}"
                    e["MessageDeduplicationId"] = str(n + i)
            try:
                status, answer = await self._sqs(
                    s, self.node(), "SendMessageBatch", {"QueueUrl": url, "Entries": entries}
                )
            except (aiohttp.ClientError, OSError):
                await self._pause_after_error("sqs send")
                n += BATCH  # its fate is unknown: never reuse its numbers
                continue
            if status == 200:
                ok = {int(e["Id"]) for e in answer.get("Successful", [])}
                confirmed.update(n + i for i in ok)
            n += BATCH

    async def sqs_receive(
        self, s: aiohttp.ClientSession, until_empty: bool = False, fifo: bool = False
    ) -> None:
        url = self.fifo_url if fifo else self.sqs_url
        while not self.stop.is_set() or until_empty:
            node = self.node()
            try:
                status, answer = await self._sqs(
                    s,
                    node,
                    "ReceiveMessage",
                    {
                        "QueueUrl": url,
                        "MaxNumberOfMessages": BATCH,
                        "VisibilityTimeout": VISIBILITY_S,
                        "WaitTimeSeconds": 1,
                    },
                )
                if status != 200:
                    await self._pause_after_error(f"sqs receive {status}")
                    continue
                messages = answer.get("Messages", [])
                if not messages:
                    if until_empty:
                        return
                    continue
                numbers = [_ns(m["Body"]) for m in messages]
                for k in numbers:
                    if k is None:
                        continue
                    if fifo:
                        self._fifo_seen(k)
                        continue
                    if k in self.books.deleted:
                        self.books.received_after_delete += 1
                    self.books.received[k] += 1
                entries = [
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(messages)
                ]
                status, answer = await self._sqs(
                    s, node, "DeleteMessageBatch", {"QueueUrl": url, "Entries": entries}
                )
                if status == 200:
                    deleted = self.books.deleted_fifo if fifo else self.books.deleted
                    for e in answer.get("Successful", []):
                        k = numbers[int(e["Id"])]
                        if k is not None:
                            deleted.add(k)
            except (aiohttp.ClientError, OSError, KeyError, TypeError, ValueError):
                await self._pause_after_error("sqs receive/delete")

    def tasks(self, s: aiohttp.ClientSession) -> list[asyncio.Task[None]]:
        loops = [
            self.worker_sends(s, 0),
            self.worker_sends(s, 100_000_000),
            self.rest_pushes(s, 200_000_000),
            self.rest_pull(s),
            self.rest_pull(s),
            self.sqs_sends(s, 300_000_000),
            self.sqs_receive(s),
            self.sqs_receive(s),
            self.sqs_sends(s, 400_000_000, fifo=True),
            self.sqs_receive(s, fifo=True),
            self.sqs_receive(s, fifo=True),
        ]
        return [asyncio.create_task(c) for c in loops]


def _records(path: Path) -> list[dict[str, Any]]:
    out = []
    if path.exists():
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
    return out


async def _kill_cycles(
    nodes: list[Node], cycles: int, up_s: tuple[float, float], s: aiohttp.ClientSession
) -> dict[str, int]:
    startup_kills = 0
    for cycle in range(cycles):
        victim = nodes[cycle % len(nodes)]
        for n in nodes:
            if n.proc is None:
                n.start()
        if cycle % 8 == 7:  # killed during startup and recovery
            await asyncio.sleep(random.uniform(0.1, 0.8))  # chaos: a random moment, on purpose
            startup_kills += 1
        else:
            for n in nodes:
                await n.wait_up(s)
            await asyncio.sleep(random.uniform(*up_s))  # chaos: load runs for a random while
        code = victim.exited()
        if code is not None:
            raise RuntimeError(f"{victim.name} exited {code} by itself; see {victim.log}")
        victim.kill9()
    return {"startup_kills": startup_kills}


async def _scenario(
    work: Path, store: str, node_count: int, cycles: int, up_s: tuple[float, float]
) -> dict[str, Any]:
    nodes = []
    for i in range(node_count):
        port, sqs_port = free_port(), free_port()
        cfg = write_config(work, f"node{i}", port, sqs_port, store)
        nodes.append(Node(f"node{i}", cfg, port, sqs_port, work / f"node{i}.log"))
    books = Books()
    stop = asyncio.Event()
    load = Load(nodes, books, stop)
    started = time.monotonic()
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as s:
        # The pull consumer is made once; it is stored, like the queues.
        nodes[0].start()
        await nodes[0].wait_up(s)
        status, answer = await load._post(
            s, nodes[0].url + f"{API}/pulled/consumers", {"type": "http_pull"}
        )
        if status != 200:
            raise RuntimeError(f"adding the pull consumer: {status} {answer}")
        load.sqs_url = await load.sqs_queue_url(s)
        load.fifo_url = await load.sqs_queue_url(s, "sqsjobs.fifo")
        tasks = load.tasks(s)
        try:
            extra = await _kill_cycles(nodes, cycles, up_s, s)
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
        restarts_clean = True
        for n in nodes:
            if n.proc is None:
                n.start()
        for n in nodes:
            await n.wait_up(s)
        # Drain: worker deliveries land in the record file; REST and SQS are pulled dry,
        # waiting out the leases of messages pulled just before a kill.
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while time.monotonic() < deadline:
            await load.rest_pull(s, until_empty=True)
            await load.sqs_receive(s, until_empty=True)
            await load.sqs_receive(s, until_empty=True, fifo=True)
            delivered = {
                r["body"]["n"]
                for r in _records(work / "record.jsonl")
                if isinstance(r.get("body"), dict) and "n" in r["body"]
            }
            missing = (
                len(books.confirmed_worker - delivered)
                + len(books.confirmed_rest - set(books.pulled))
                + len(books.confirmed_sqs - set(books.received))
                + len(books.confirmed_fifo - set(books.received_fifo))
            )
            if missing == 0:
                break
            await asyncio.sleep(0.5)  # leases of messages pulled before a kill run out
        for n in nodes:
            restarts_clean &= n.stop() == 0
    records = _records(work / "record.jsonl")
    by_n: dict[int, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in records:
        if isinstance(r.get("body"), dict) and "n" in r["body"]:
            by_n[r["body"]["n"]].append(r)
    worker_dupes = {k: v for k, v in by_n.items() if len(v) > 1}
    # A repeat within one process is not explained by a kill (in-process retries are off).
    worker_unexplained = sum(
        1 for rows in worker_dupes.values() if len({r["pid"] for r in rows}) < len(rows)
    )
    lost_worker = len(books.confirmed_worker - set(by_n))
    lost_rest = len(books.confirmed_rest - set(books.pulled))
    lost_sqs = len(books.confirmed_sqs - set(books.received))
    lost_fifo = len(books.confirmed_fifo - set(books.received_fifo))
    rest_dupes = sum(1 for c in books.pulled.values() if c > 1)
    sqs_dupes = sum(1 for c in books.received.values() if c > 1)
    fifo_dupes = sum(1 for c in books.received_fifo.values() if c > 1)
    kills = sum(n.kills for n in nodes)
    lost = lost_worker + lost_rest + lost_sqs + lost_fifo
    unexplained = (
        worker_unexplained
        + books.pulled_after_ack
        + books.received_after_delete
        + books.received_after_delete_fifo
    )
    in_order = books.fifo_out_of_order == 0
    return {
        "ok": lost == 0 and unexplained == 0 and in_order and restarts_clean and kills >= cycles,
        "lost": lost,
        "kills": kills,
        "starts": sum(n.starts for n in nodes),
        "nodes": node_count,
        "confirmed": {
            "worker": len(books.confirmed_worker),
            "rest": len(books.confirmed_rest),
            "sqs": len(books.confirmed_sqs),
            "sqs_fifo": len(books.confirmed_fifo),
        },
        "lost_by_surface": {
            "worker": lost_worker,
            "rest": lost_rest,
            "sqs": lost_sqs,
            "sqs_fifo": lost_fifo,
        },
        "duplicates": {
            "worker": len(worker_dupes),
            "rest": rest_dupes,
            "sqs": sqs_dupes,
            "sqs_fifo": fifo_dupes,
        },
        "fifo_out_of_order": books.fifo_out_of_order,
        "unexplained_duplicates": unexplained,
        "unexplained_by_surface": {
            "worker": worker_unexplained,
            "rest": books.pulled_after_ack,
            "sqs": books.received_after_delete,
            "sqs_fifo": books.received_after_delete_fifo,
        },
        "client_errors_during_outages": sum(books.errors.values()),
        "load_seconds": round(time.monotonic() - started, 1),
        "recovered": (
            f"{sum(n.starts for n in nodes)} starts after {kills} kill -9 "
            f"({extra['startup_kills']} during startup) all came up; the final clean stop "
            f"exited {'0' if restarts_clean else 'non-zero'}"
        ),
    }


async def run(quick: bool) -> dict[str, Any]:
    cycles = 4 if quick else 100
    with tempfile.TemporaryDirectory(prefix="ocd-chaos-kill9-") as tmp:
        return await _scenario(Path(tmp), "", 1, cycles, (0.3, 1.0) if quick else (0.5, 2.0))


async def run_pg(quick: bool, dsn: str | None = None) -> dict[str, Any]:
    """Two nodes on one PostgreSQL database: ``dsn``'s, else a throw-away cluster's."""
    if dsn is not None:
        return await _run_pg_on(quick, dsn)
    sys.path.insert(0, str(REPO))
    from tests import pg

    reason = pg.why_unavailable()
    if reason is not None:
        return {"skipped": reason}
    cluster = pg.start_cluster()
    try:
        return await _run_pg_on(quick, cluster.create_database("ocd_chaos_kill9"))
    finally:
        cluster.stop()


async def _run_pg_on(quick: bool, dsn: str) -> dict[str, Any]:
    store = f'[store]\nbackend = "postgres"\ndsn = {json.dumps(dsn)}\n'
    cycles = 4 if quick else 40
    with tempfile.TemporaryDirectory(prefix="ocd-chaos-kill9-pg-") as tmp:
        return await _scenario(Path(tmp), store, 2, cycles, (0.3, 1.0) if quick else (0.5, 2.0))
