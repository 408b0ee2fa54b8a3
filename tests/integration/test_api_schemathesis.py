"""Schemathesis against a real daemon: every operation of the OpenAPI document ocd serves at
/client/v4/openapi.json, fuzzed from that document alone, over a real socket.

Any 5xx fails, and so does any response the document does not describe: a status it does not
list for the operation, a content type other than the documented one, or a body that does not
match the documented schema for its status. The run is derandomized (the same requests every
time) and bounded (at least 10,000 requests, well under 90 s on a CI machine).

Path parameters are drawn mostly from what exists (account ``local``, the ids of a queue
with a pull consumer and messages, of a FIFO queue, of one without a consumer), so that the
fuzz reaches the handlers rather than stopping at 403 and 404.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import resource
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ocd.http.cloudflare.app import PREFIX
from ocd.http.cloudflare.openapi import document
from tests.integration.conftest import Running

ROOT = Path(__file__).resolve().parents[2]
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
)
MIN_REQUESTS = 10_000
EXAMPLES_PER_OPERATION = 250
SHARDS = 2


async def _ok(running: Running, method: str, path: str, body: Any = None) -> Any:
    url = running.base + PREFIX + "/accounts/local" + path
    async with running.session.request(method, url, json=body) as r:
        out = await r.json()
        assert r.status == 200, (method, path, out)
        return out["result"]


async def _world(running: Running) -> dict[str, str]:
    """Queue ids by role; ``work`` has a pull consumer, messages and live leases."""
    ids = {}
    for name in ("work", "bare", "doomed", "work-dlq", "orders.fifo"):
        ids[name] = (await _ok(running, "POST", "/queues", {"queue_name": name}))["queue_id"]
    await _ok(
        running,
        "POST",
        f"/queues/{ids['work']}/consumers",
        {"type": "http_pull", "dead_letter_queue": "work-dlq"},
    )
    await _ok(running, "POST", f"/queues/{ids['orders.fifo']}/consumers", {"type": "http_pull"})
    for _ in range(4):
        batch = [{"body": {"n": i}} for i in range(25)]
        await _ok(running, "POST", f"/queues/{ids['work']}/messages/batch", {"messages": batch})
    await _ok(running, "POST", f"/queues/{ids['work']}/messages/pull", {"batch_size": 10})
    return ids


def _config(tmp: Path, ids: dict[str, str]) -> Path:
    # Deletes go to a queue of their own, so that the others stay for the rest of the run;
    # "work" twice: the queue where most operations can succeed is drawn most.
    kept = [ids[n] for n in ("work", "work", "bare", "work-dlq", "orders.fifo")]
    values = ", ".join(json.dumps(v) for v in kept)
    checks = "".join(f"{c}.enabled = true\n" for c in CHECKS)
    text = f"""
hooks = "tests.integration.schemathesis_hooks"
seed = 35
# one worker thread a process: with more, CPython 3.11's ast.parse (hypothesis calls it)
# races with itself ("AST constructor recursion depth mismatch")
workers = 1
request-timeout = 10
suppress-health-check = ["all"]

[generation]
deterministic = true

[checks]
enabled = false
{checks}
[reports.json]
enabled = true

[parameters]
"path.account_id" = "local"
"path.queue_id" = {{ dictionary = "queues", probability = 0.9 }}

[dictionaries.queues]
values = [{values}]

[[operations]]
include-operation-id = "queues-delete"
parameters = {{ "path.queue_id" = {{ dictionary = "doomed", probability = 0.9 }} }}

[dictionaries.doomed]
values = ["{ids["doomed"]}"]

# documented as always 501 (FEATURE_NOT_SUPPORTED): a server error by design
[[operations]]
include-path-regex = "/event_subscriptions/"
checks.not_a_server_error.enabled = false
"""
    path = tmp / "schemathesis.toml"
    path.write_text(text)
    return path


def _environment(count: Path) -> dict[str, str]:
    """A small environment: requests reads every variable twice a request (proxies)."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    return {**keep, "PYTHONPATH": str(ROOT), "OCD_FUZZ_COUNT": str(count)}


class Shard:
    """One ``st run`` over every ``SHARDS``-th operation: schemathesis spends a few
    milliseconds of CPU on each request it makes up, in one process whatever its worker
    threads, so the operations are split over processes to use the machine's cores."""

    def __init__(self, tmp: Path, index: int, operations: list[str]) -> None:
        self.dir = tmp / f"shard{index}"
        self.dir.mkdir()
        self.operations = operations
        self.report = self.dir / "report.json"
        self.count = self.dir / "count"
        self.output = ""
        self.returncode: int | None = None

    async def run(self, config: Path, url: str) -> None:
        ops = "|".join(re.escape(op) for op in self.operations)
        proc = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).parent / "st"),
            "--config-file",
            str(config),
            "run",
            url,
            "--include-operation-id-regex",
            f"^({ops})$",
            "--max-examples",
            str(EXAMPLES_PER_OPERATION),
            "--report-json-path",
            str(self.report),
            "--no-color",
            cwd=self.dir,  # where schemathesis keeps its cache
            env=_environment(self.count),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await proc.communicate()
        self.output = out.decode(errors="replace")
        self.returncode = proc.returncode

    @property
    def sent(self) -> int:
        return int(self.count.read_text()) if self.count.exists() else 0


@pytest.mark.timeout(300)
async def test_schemathesis_finds_nothing_the_document_does_not_say(start_daemon, tmp_path):
    running = await start_daemon()
    ids = await _world(running)
    config = _config(tmp_path, ids)
    operations = sorted(
        op["operationId"]
        for path, item in document()["paths"].items()
        for method, op in item.items()
        if method != "parameters" and path != "/openapi.json"
    )
    shards = [Shard(tmp_path, i, operations[i::SHARDS]) for i in range(SHARDS)]
    started = time.monotonic()
    cpu_daemon = time.process_time()
    cpu_st = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    url = running.base + PREFIX + "/openapi.json"
    await asyncio.gather(*(s.run(config, url) for s in shards))
    elapsed = time.monotonic() - started
    cpu_daemon = time.process_time() - cpu_daemon
    cpu_st = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - cpu_st
    sent = sum(s.sent for s in shards)
    print(
        f"schemathesis: {sent} requests in {elapsed:.1f} s; CPU: daemon {cpu_daemon:.1f} s, "
        f"schemathesis {cpu_st:.1f} s"
    )
    for shard in shards:
        assert shard.returncode == 0, shard.output[-20_000:]
        run = json.loads(shard.report.read_text())
        assert run["failures"] == [] and run["errors"] == [], shard.output[-20_000:]
        assert run["operations"]["tested"] == len(shard.operations), shard.output[-5000:]
    assert sent >= MIN_REQUESTS
