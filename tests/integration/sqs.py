"""An in-process daemon with its SQS listener, and boto3 clients for it (run in threads:
boto3 blocks, the daemon shares the test's event loop)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import boto3
import botocore
from botocore.config import Config

from ocd.config import load_config
from ocd.daemon import Daemon, load_workers

APPS = Path(__file__).resolve().parent.parent / "apps"
T = TypeVar("T")


def client(endpoint: str, signed: bool = False, region: str = "us-east-1", **extra: Any) -> Any:
    cfg = Config(
        retries={"max_attempts": 1, "mode": "standard"},
        read_timeout=30,
        **({} if signed else {"signature_version": botocore.UNSIGNED}),
    )
    creds = {"aws_access_key_id": "AKIDTEST", "aws_secret_access_key": "secret"}
    return boto3.session.Session().client(
        "sqs", endpoint_url=endpoint, region_name=region, config=cfg, **creds, **extra
    )


class SqsDaemon:
    def __init__(self, daemon: Daemon, record: Path, session: aiohttp.ClientSession) -> None:
        self.daemon = daemon
        self.record = record
        self.session = session
        self.endpoint = f"http://127.0.0.1:{daemon.sqs_port}"
        self.base = f"http://127.0.0.1:{daemon.port}"
        self.sqs = client(self.endpoint)

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def raw(self, op: str, body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
        headers = {
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": f"AmazonSQS.{op}",
        }
        async with self.session.post(self.endpoint + "/", json=body, headers=headers) as r:
            return r.status, dict(r.headers), await r.json(content_type=None)

    async def worker_send(self, path: str, spec: dict[str, Any]) -> Any:
        async with self.session.post(self.base + path, json=spec) as r:
            assert r.status == 200, await r.text()
            return await r.json()


def sqs_config(tmp_path: Path, store_section: str, record: Path) -> Path:
    cfg = tmp_path / "ocd.toml"
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:0"
data_dir = "data"
shutdown_timeout = 5

[sqs]
listen = "127.0.0.1:0"
region = "us-east-1"

{store_section}

[[workers]]
name = "app"
main = "{APPS / "recorder.py"}"
routes = ["/"]
vars = {{ RECORD = "{record}" }}

[[workers.queues.producers]]
binding = "QUEUE"
queue = "jobs"

[[workers.queues.consumers]]
queue = "worked"
max_batch_size = 10
max_batch_timeout = 0.05
"""
    )
    return cfg


async def start(
    tmp_path: Path, store_section: str, session: aiohttp.ClientSession, clock: Any = None
) -> SqsDaemon:
    record = tmp_path / "record.jsonl"
    config = load_config(sqs_config(tmp_path, store_section, record))
    daemon = Daemon(config, load_workers(config), **({"clock": clock} if clock else {}))
    await daemon.start()
    return SqsDaemon(daemon, record, session)
