"""Dead-letter redrive against a real ``ocd serve``: ``ocd queues redrive`` from the shell,
and a move task that survives kill -9 of the daemon mid-move (it resumes from the chunk
it had committed, moving every message once)."""

from __future__ import annotations

import base64
import json
from typing import Any

import aiohttp
import pytest

from tests.acceptance.conftest import recorder_config
from tests.acceptance.test_cli_queues import start
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(120)


def test_redrive_from_the_shell(ocd_processes, tmp_path):
    ocd = start(ocd_processes, tmp_path)
    ocd("create", "work")
    ocd("consumer", "http", "add", "work", "--dead-letter-queue", "work-dlq")
    for i in range(3):
        ocd("send", "work-dlq", f'{{"n": {i}}}')
    r = ocd("redrive", "work-dlq")
    assert r.stdout.startswith("Redrive ")
    assert r.stdout.endswith(" from work-dlq to work completed: moved 3 of 3 message(s).\n")
    assert ocd.json("info", "work")["metrics"]["backlog_count"] == 3
    assert ocd.json("info", "work-dlq")["metrics"]["backlog_count"] == 0
    # --to another queue, a rate, --json: the task as the API shows it
    ocd("create", "elsewhere")
    ocd("send", "work-dlq", '"again"')
    task = ocd.json("redrive", "work-dlq", "--to", "elsewhere", "--rate", "100")
    assert (task["state"], task["done"], task["total"], task["rate"]) == ("completed", 1, 1, 100)
    assert task["destination"] == "elsewhere"
    # a queue that is no one's dead-letter queue needs --to
    r = ocd("redrive", "elsewhere", code=1)
    assert "name the destination" in r.stderr
    r = ocd("redrive", "work-dlq", "--rate", "0", code=2)
    assert "--rate" in r.stderr


async def _api(s: aiohttp.ClientSession, port: int, method: str, path: str, body: Any = None):
    url = f"http://127.0.0.1:{port}/client/v4/accounts/local{path}"
    async with s.request(method, url, json=body) as r:
        out = await r.json()
        assert r.status == 200, out
        return out["result"]


async def test_a_redrive_killed_mid_move_resumes_and_moves_every_message_once(
    tmp_path, ocd_processes
):
    n, rate = 3000, 300  # ten seconds of moving at that rate
    cfg = recorder_config(tmp_path, "")
    first = ocd_processes(cfg)
    port = first.wait_started()
    async with aiohttp.ClientSession() as s:
        await _api(s, port, "POST", "/queues", {"queue_name": "work"})
        await _api(
            s, port, "POST", "/queues/work/consumers",
            {"type": "http_pull", "dead_letter_queue": "work-dlq"},
        )  # fmt: skip
        for k in range(0, n, 100):
            msgs = [{"body": {"n": k + i}} for i in range(100)]
            await _api(s, port, "POST", "/queues/work-dlq/messages/batch", {"messages": msgs})
        task = await _api(
            s, port, "POST", "/queues/work-dlq/messages/move", {"action": "redrive", "rate": rate}
        )
        assert task["total"] == n

        async def progressed() -> dict[str, Any] | None:
            t = await _api(s, port, "GET", f"/move_tasks/{task['id']}")
            return t if t["done"] >= rate else None

        before = await eventually(progressed, 30)
        first.kill9()
        assert before["state"] == "running" and before["done"] < n

        second = ocd_processes(cfg)
        port = second.wait_started()

        async def finished() -> dict[str, Any] | None:
            t = await _api(s, port, "GET", f"/move_tasks/{task['id']}")
            return t if t["state"] not in ("running", "cancelling") else None

        after = await eventually(finished, 60)
        assert (after["state"], after["done"], after["total"]) == ("completed", n, n)
        resumed = second.event("move_resumed")
        assert resumed is not None and resumed["task"] == task["id"]
        work = await _api(s, port, "GET", "/queues/work/metrics")
        dlq = await _api(s, port, "GET", "/queues/work-dlq/metrics")
        assert (work["backlog_count"], dlq["backlog_count"]) == (n, 0)
        seen: list[int] = []
        cursor = None
        while True:
            page = await _api(
                s, port, "POST", "/queues/work/messages/browse",
                {"limit": 100, "cursor": cursor, "body_bytes": 100},
            )  # fmt: skip
            seen += [json.loads(base64.b64decode(m["body"]))["n"] for m in page["messages"]]
            cursor = page["cursor"]
            if cursor is None:
                break
        assert sorted(seen) == list(range(n))
        assert second.stop() == 0
