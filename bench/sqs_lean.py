"""The SQS endpoint from the lean raw-socket generator (``load.py``), scenarios of
``bench/run.py``; SQLite, ``durability = "full"``, no ``[[accounts]]`` (unsigned requests):

* sqs_raw        -- SendMessageBatch(10) of pre-built AWS JSON 1.0 requests from
                    ``sqs_raw_senders`` keep-alive connections until ``sqs_raw_total``
                    messages are stored (answers read only as far as their status and
                    length; the queue's ``ApproximateNumberOfMessages`` is checked after),
                    then ReceiveMessage(10) + DeleteMessageBatch from ``sqs_raw_receivers``
                    (32) connections until every message is deleted (each receive's answer is
                    parsed for its receipt handles, every delete's checked): messages/s of
                    each phase.
* sqs_idle_polls -- ``sqs_idle_polls`` ReceiveMessage with WaitTimeSeconds=20 held open on
                    an empty queue: the daemon's CPU over ``sqs_idle_window_s`` (longer than
                    the wait, so every poll also lapses and is sent again within it); then
                    ``sqs_wakeups`` single SendMessage calls, one at a time while the polls
                    wait, each timed from the send's answer to the answer of the receive
                    that got it (``wake_p99_ms``), and from the send's start
                    (``send_to_receive_p99_ms``).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

import load
from harness import Bench, BenchError, CpuWindow, Setup, free_port, percentile, timeout_for

if TYPE_CHECKING:
    from run import Sizes

BODY = "x" * 92  # with an 8-digit batch number: 100-byte bodies, as sqs.py sends
VISIBILITY_S = 600  # no receipt lapses during a run, so nothing is received twice
POLL_WAIT_S = 20
SETTLE_S = 1.0  # for the long polls to reach the daemon before the idle window opens
WAKE_GAP_S = 0.01  # between one wake-up and the next send: the last receiver re-polls


def sqs_request(port: int, op: str, body: dict[str, Any]) -> bytes:
    headers = f"Content-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.{op}\r\n"
    return load.raw_request(port, "/", load.dumps(body), headers)


async def call(conn: load.RawExchange, port: int, op: str, body: dict[str, Any]) -> Any:
    status, answer = await conn.exchange(sqs_request(port, op, body))
    if status != 200:
        raise BenchError(f"SQS {op}: {status} {answer[:500]!r}")
    return json.loads(answer)


def sqs_setup(work: Any, port: int) -> Setup:
    return Setup(work / "data", {}, extra_toml=f'[sqs]\nlisten = "127.0.0.1:{port}"\n')


async def depth(conn: load.RawExchange, port: int, url: str) -> int:
    attrs = await call(
        conn, port, "GetQueueAttributes",
        {"QueueUrl": url, "AttributeNames": ["ApproximateNumberOfMessages"]},
    )  # fmt: skip
    return int(attrs["Attributes"]["ApproximateNumberOfMessages"])


async def receive_and_delete(port: int, url: str, receivers: int, total: int) -> load.Load:
    """``receivers`` loops of ReceiveMessage(10) -> DeleteMessageBatch of what came, each
    until a receive comes back empty (nothing lapses: every message is then taken)."""
    receive = sqs_request(
        port, "ReceiveMessage",
        {"QueueUrl": url, "MaxNumberOfMessages": 10, "VisibilityTimeout": VISIBILITY_S,
         "WaitTimeSeconds": 0},
    )  # fmt: skip
    conns = [await load.RawExchange.open(port) for _ in range(receivers)]
    latencies: list[float] = []
    counts = {"requests": 0, "deleted": 0}

    async def receiver(conn: load.RawExchange) -> None:
        while True:
            sent = time.perf_counter()
            status, answer = await conn.exchange(receive)
            if status != 200:
                raise BenchError(f"SQS ReceiveMessage: {status} {answer[:500]!r}")
            got = json.loads(answer).get("Messages")
            counts["requests"] += 1
            if not got:
                return
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in
                       enumerate(got)]  # fmt: skip
            delete = {"QueueUrl": url, "Entries": entries}
            out = await call(conn, port, "DeleteMessageBatch", delete)
            counts["requests"] += 1
            if out.get("Failed") or len(out.get("Successful", ())) != len(got):
                raise BenchError(f"DeleteMessageBatch: {out}")
            counts["deleted"] += len(got)
            latencies.append(time.perf_counter() - sent)

    try:
        started = time.perf_counter()
        await load.together([receiver(c) for c in conns])
        seconds = time.perf_counter() - started
    finally:
        for c in conns:
            c.close()
    if counts["deleted"] != total:
        raise BenchError(f"received and deleted {counts['deleted']} messages, expected {total}")
    return load.Load(counts["requests"], counts["deleted"], seconds, latencies)


async def sqs_raw(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    n = sizes.sqs_raw_total
    with bench.workdir("sqs_raw") as work:
        port = free_port()
        async with bench.daemon(f"sqs_raw-{run}", work, sqs_setup(work, port)) as d:
            admin = await load.RawExchange.open(port)
            try:
                url = (await call(admin, port, "CreateQueue", {"QueueName": "raw"}))["QueueUrl"]
                sends = [
                    sqs_request(
                        port, "SendMessageBatch",
                        {"QueueUrl": url, "Entries": [
                            {"Id": str(i), "MessageBody": f"{b:08d}{BODY}"} for i in range(10)
                        ]},
                    )
                    for b in range(n // 10)
                ]  # fmt: skip
                async with load.RawLoad(port, sizes.sqs_raw_senders) as gen:
                    warm = sqs_request(port, "GetQueueUrl", {"QueueName": "raw"})
                    await gen.drive([warm] * sizes.sqs_raw_senders)
                    cpu = CpuWindow(d)
                    sent = await asyncio.wait_for(gen.drive(sends, 10), timeout_for(n))
                    send_usage = cpu.usage()
                stored = await depth(admin, port, url)
                if stored != len(sends) * 10:
                    raise BenchError(f"{stored} messages stored, {len(sends) * 10} sent")
                cpu = CpuWindow(d)
                got = await asyncio.wait_for(
                    receive_and_delete(port, url, sizes.sqs_raw_receivers, stored),
                    timeout_for(n),
                )
                receive_usage = cpu.usage()
                if await depth(admin, port, url) != 0:
                    raise BenchError("messages left in the queue after the receive phase")
            finally:
                admin.close()
    return {"send": _with_cpu(sent, send_usage), "receive_delete": _with_cpu(got, receive_usage)}


def _with_cpu(done: load.Load, usage: dict[str, float]) -> dict[str, Any]:
    """A phase's figures, and the daemon's CPU per message: steadier than the rate when
    other work on the machine takes CPU from it."""
    out: dict[str, Any] = {**done.summary(), **usage}
    out["cpu_us_per_msg"] = round(usage["daemon_cpu_pct"] * 1e4 / out["msg_s"], 1)
    return out


async def sqs_idle_polls(bench: Bench, sizes: Sizes, run: int) -> dict[str, Any]:
    with bench.workdir("sqs_idle") as work:
        port = free_port()
        async with bench.daemon(f"sqs_idle_polls-{run}", work, sqs_setup(work, port)) as d:
            admin = await load.RawExchange.open(port)
            polls = [await load.RawExchange.open(port) for _ in range(sizes.sqs_idle_polls)]
            try:
                url = (await call(admin, port, "CreateQueue", {"QueueName": "idle"}))["QueueUrl"]
                return await _idle_and_wake(d, port, url, admin, polls, sizes)
            finally:
                for c in [admin, *polls]:
                    c.close()


async def _idle_and_wake(
    d: Any,
    port: int,
    url: str,
    admin: load.RawExchange,
    polls: list[load.RawExchange],
    sizes: Sizes,
) -> dict[str, Any]:
    receive = sqs_request(
        port, "ReceiveMessage",
        {"QueueUrl": url, "MaxNumberOfMessages": 1, "VisibilityTimeout": VISIBILITY_S,
         "WaitTimeSeconds": POLL_WAIT_S},
    )  # fmt: skip
    loop = asyncio.get_running_loop()
    arrived: dict[str, asyncio.Future[float]] = {}
    lapsed = [0]

    async def poller(conn: load.RawExchange) -> None:
        while True:
            status, answer = await conn.exchange(receive)
            at = time.perf_counter()
            if status != 200:
                raise BenchError(f"SQS ReceiveMessage: {status} {answer[:500]!r}")
            got = json.loads(answer).get("Messages") or []
            if not got:
                lapsed[0] += 1
            for m in got:
                waiter = arrived.setdefault(m["Body"], loop.create_future())
                if not waiter.done():
                    waiter.set_result(at)
                await call(conn, port, "DeleteMessage",
                           {"QueueUrl": url, "ReceiptHandle": m["ReceiptHandle"]})  # fmt: skip

    tasks = [asyncio.ensure_future(poller(c)) for c in polls]
    try:
        await asyncio.sleep(SETTLE_S)
        cpu = CpuWindow(d)
        await asyncio.sleep(sizes.sqs_idle_window_s)
        _check(tasks)
        idle = cpu.usage()
        lapsed_in_window = lapsed[0]
        wake_ms, whole_ms = [], []
        for i in range(sizes.sqs_wakeups):
            body = f"wake-{i}"
            waiter = arrived.setdefault(body, loop.create_future())
            started = time.perf_counter()
            await call(admin, port, "SendMessage", {"QueueUrl": url, "MessageBody": body})
            answered = time.perf_counter()
            got_at = await asyncio.wait_for(asyncio.shield(waiter), 30)
            wake_ms.append((got_at - answered) * 1000)
            whole_ms.append((got_at - started) * 1000)
            _check(tasks)
            await asyncio.sleep(WAKE_GAP_S)
    finally:
        for t in tasks:
            t.cancel()
    return {
        "polls": len(polls),
        "idle_window_s": sizes.sqs_idle_window_s,
        "lapsed_in_window": lapsed_in_window,
        "idle": idle,
        "wakeups": len(wake_ms),
        "wake_p50_ms": round(percentile(wake_ms, 50), 2),
        "wake_p99_ms": round(percentile(wake_ms, 99), 2),
        "wake_max_ms": round(max(wake_ms), 2),
        "send_to_receive_p50_ms": round(percentile(whole_ms, 50), 2),
        "send_to_receive_p99_ms": round(percentile(whole_ms, 99), 2),
    }


def _check(tasks: list[asyncio.Future[None]]) -> None:
    """A poller that failed fails the run."""
    for t in tasks:
        if t.done() and not t.cancelled() and t.exception() is not None:
            raise BenchError(f"a long poll failed: {t.exception()}")
