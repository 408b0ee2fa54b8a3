"""The SQS endpoint under boto3, beside moto's server in the same run (scenario ``sqs_boto3``
of ``bench/run.py``; also ``python bench/sqs.py [--quick]`` on its own).

The load is the peer figure's: 8 threads of boto3 clients, SendMessageBatch of 10 until
``total`` messages are stored, then ReceiveMessage of 10 + DeleteMessageBatch until they
are all received and deleted. ocd (SQLite, ``durability = "full"``) runs it on queues that
already hold a backlog of 1k, 10k and 100k messages (filled over the REST API, faster) to
show the rates stay flat as the backlog grows; moto (``moto_server``, from moto[server]) runs
it once, bounded to ``moto_total`` messages (1,600), since it slows as its queue grows.
Skipped with the reason when moto is not installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from harness import Bench, BenchError, Setup, free_port

THREADS = 8
API = "/client/v4/accounts/local/queues"


def client(endpoint: str) -> Any:
    cfg = Config(
        retries={"max_attempts": 1, "mode": "standard"},
        max_pool_connections=THREADS,
    )  # signed (any key): moto routes requests by their credential scope
    return boto3.session.Session().client(
        "sqs",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=cfg,
    )


def send_phase(endpoint: str, url: str, total: int) -> float:
    """SendMessageBatch(10) from 8 threads until ``total`` are stored; messages/s."""
    batches = total // 10
    body = "x" * 100

    def work(n: int) -> None:
        c = client(endpoint)
        entries = [{"Id": str(i), "MessageBody": body} for i in range(10)]
        for _ in range(n):
            out = c.send_message_batch(QueueUrl=url, Entries=entries)
            if out.get("Failed"):
                raise BenchError(f"send failed: {out['Failed'][0]}")

    shares = [batches // THREADS + (1 if i < batches % THREADS else 0) for i in range(THREADS)]
    started = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        for f in [pool.submit(work, n) for n in shares]:
            f.result()
    return batches * 10 / (time.perf_counter() - started)


def receive_phase(endpoint: str, url: str, total: int) -> float:
    """ReceiveMessage(10) + DeleteMessageBatch from 8 threads until ``total`` are deleted."""
    lock = threading.Lock()
    done = [0]

    def work() -> None:
        c = client(endpoint)
        while True:
            with lock:
                if done[0] >= total:
                    return
            got = c.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60, WaitTimeSeconds=1
            ).get("Messages", [])
            if not got:
                continue
            entries = [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)
            ]
            out = c.delete_message_batch(QueueUrl=url, Entries=entries)
            with lock:
                done[0] += len(out.get("Successful", []))

    started = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        for f in [pool.submit(work) for _ in range(THREADS)]:
            f.result()
    return done[0] / (time.perf_counter() - started)


async def fill(d: Any, name: str, n: int) -> None:
    """``n`` messages in queue ``name`` over the REST API (100 a request, 8 at a time)."""
    batch = {"messages": [{"body": "x" * 100, "content_type": "text"}] * 100}

    async def one(k: int) -> None:
        for _ in range(k):
            await d.post(f"{API}/{name}/messages/batch", batch)

    requests = n // 100
    await asyncio.gather(*(one(requests // 8 + (1 if i < requests % 8 else 0)) for i in range(8)))


class MotoMissing(Exception):
    pass


def moto_command(port: int) -> list[str] | None:
    """moto's server: ``$OCD_BENCH_MOTO`` (a ``moto_server`` executable), else the moto of
    this Python (a dev dependency)."""
    given = os.environ.get("OCD_BENCH_MOTO")
    if given:
        return [given, "-H", "127.0.0.1", "-p", str(port)]
    if importlib.util.find_spec("moto") is not None:
        return [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    return None


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    port = free_port()
    cmd = moto_command(port)
    if cmd is None:
        raise MotoMissing("moto is not installed (pip install 'moto[server]')")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise BenchError(f"moto_server exited {proc.returncode}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if time.monotonic() > deadline:
                raise BenchError("moto_server did not start within 60 s")
            time.sleep(0.1)  # the pace of polling a starting server
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def phases(endpoint: str, name: str, total: int) -> dict[str, float]:
    url = client(endpoint).create_queue(QueueName=name)["QueueUrl"]
    send = send_phase(endpoint, url, total)
    receive = receive_phase(endpoint, url, total)
    return {"send_msg_s": round(send), "receive_delete_msg_s": round(receive)}


async def sqs_boto3_run(
    bench: Bench, run: int, total: int, backlogs: tuple[int, ...], moto_total: int
) -> dict[str, Any]:
    out: dict[str, Any] = {"total": total, "moto_total": moto_total}
    with bench.workdir("sqs_boto3") as work:
        sqs_port = free_port()
        setup = Setup(work / "data", {}, extra_toml=f'[sqs]\nlisten = "127.0.0.1:{sqs_port}"\n')
        async with bench.daemon(f"sqs_boto3-{run}", work, setup) as d:
            endpoint = f"http://127.0.0.1:{sqs_port}"
            for b in backlogs:
                name = f"backlog-{b}"
                client(endpoint).create_queue(QueueName=name)
                await fill(d, name, b)
                out[f"ocd_{b}"] = await asyncio.to_thread(phases, endpoint, name, total)
    first = out[f"ocd_{backlogs[0]}"]
    for b in backlogs[1:]:
        for k in ("send_msg_s", "receive_delete_msg_s"):
            out[f"ocd_{b}"][f"{k.removesuffix('_msg_s')}_vs_{backlogs[0]}"] = round(
                out[f"ocd_{b}"][k] / first[k], 3
            )
    try:
        with moto_server() as endpoint:
            out["moto"] = await asyncio.to_thread(phases, endpoint, "bench", moto_total)
    except MotoMissing as e:
        out["moto_skipped"] = str(e)
        return out
    for k in ("send_msg_s", "receive_delete_msg_s"):
        out[f"{k.removesuffix('_msg_s')}_vs_moto"] = round(first[k] / out["moto"][k], 1)
    return out


def main() -> int:
    import json
    import tempfile

    quick = "--quick" in sys.argv
    with tempfile.TemporaryDirectory(prefix="ocd-bench-") as root:
        bench = Bench(Path(root), False)
        result = asyncio.run(
            sqs_boto3_run(
                bench,
                1,
                2_000 if quick else 20_000,
                (1_000, 10_000) if quick else (1_000, 10_000, 100_000),
                1_600,
            )
        )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
