"""``ocd consume`` as a separate process against a real ``ocd serve``: an unchanged worker's
queue() handler fed over the REST pull API, with the in-daemon ack/retry rules, producer
bindings over REST, SIGTERM draining, kill -9 losing nothing, and --concurrency auto."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.acceptance.conftest import APPS, REPO, ocd_command, recorder_config, records
from tests.helpers import eventually

pytestmark = pytest.mark.timeout(120)


class Consume:
    """One ``ocd consume`` process; its JSON log lines go to a file."""

    def __init__(self, tmp: Path, port: int, queue: str, *args: str, name: str = "consume"):
        self.log_path = tmp / f"{name}.log"
        self.log_file = self.log_path.open("w")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            ocd_command(
                "consume",
                "--url",
                f"http://127.0.0.1:{port}",
                "--queue",
                queue,
                "--log-format",
                "json",
                *args,
            ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.log_file,
            env=env,
            cwd=REPO,
        )

    def events(self, name: str) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_text().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("event") == name:
                out.append(e)
        return out

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.log_file.close()


@pytest.fixture
def consumers():
    made: list[Consume] = []

    def start(*args: Any, **kw: Any) -> Consume:
        c = Consume(*args, **kw)
        made.append(c)
        return c

    yield start
    for c in made:
        c.close()


async def _api(s: aiohttp.ClientSession, port: int, method: str, path: str, body: Any = None):
    url = f"http://127.0.0.1:{port}/client/v4/accounts/local{path}"
    async with s.request(method, url, json=body) as r:
        out = await r.json()
        assert r.status == 200, out
        return out["result"]


async def _queue(s, port, name, **settings: Any) -> None:
    await _api(s, port, "POST", "/queues", {"queue_name": name})
    body = {"type": "http_pull", "dead_letter_queue": f"{name}-dlq", "settings": settings}
    await _api(s, port, "POST", f"/queues/{name}/consumers", body)


async def _send(s, port, queue, *bodies: Any) -> None:
    msgs = [{"body": b} for b in bodies]
    await _api(s, port, "POST", f"/queues/{queue}/messages/batch", {"messages": msgs})


def _recorder(tmp: Path) -> list[str]:
    return ["--worker", str(APPS / "recorder.py"), "--var", f"RECORD={tmp / 'record.jsonl'}"]


async def test_an_unchanged_worker_consumes_remotely_with_the_daemons_rules(
    tmp_path, ocd_processes, consumers
):
    port = ocd_processes(recorder_config(tmp_path, "")).wait_started()
    async with aiohttp.ClientSession() as s:
        await _queue(s, port, "remote", max_retries=1, retry_delay=0)
        await _send(s, port, "remote", {"n": 1}, {"retry": 0}, {"ack": True, "fail": True})
        c = consumers(tmp_path, port, "remote", *_recorder(tmp_path), "--batch-size", "10")

        def done() -> bool:
            return len(records(tmp_path)) >= 5

        await eventually(done, 30)

        async def settled() -> bool:
            dlq = await _api(s, port, "GET", "/queues/remote-dlq/metrics")
            src = await _api(s, port, "GET", "/queues/remote/metrics")
            return dlq["backlog_count"] == 1 and src["backlog_count"] == 0

        await eventually(settled, 30)
        seen: dict[str, list[int]] = {}
        for r in records(tmp_path):
            seen.setdefault(json.dumps(r["body"], sort_keys=True), []).append(r["attempts"])
            assert r["pid"] == c.proc.pid and r["queue"] == "remote" and r["type"] == "dict"
        # {"n": 1} acked by the handler's success; {"retry": 0} retried, then dead-lettered
        # after max_retries + 1 deliveries; an explicit ack() wins over the handler raising,
        # and the failure retried the rest of its batch (the first delivery of {"n": 1}
        # if they came together) -- exactly as an in-daemon consumer would.
        assert seen['{"retry": 0}'] == [1, 2]
        assert seen['{"ack": true, "fail": true}'] == [1]
        assert seen['{"n": 1}'][-1] == len(seen['{"n": 1}'])
        # the same batch lines as an in-daemon consumer's: one pipeline
        assert c.events("batch_acked") + c.events("batch_retried")
        c.proc.send_signal(signal.SIGTERM)
        assert c.proc.wait(30) == 0


async def test_producer_bindings_send_over_the_rest_api(tmp_path, ocd_processes, consumers):
    port = ocd_processes(recorder_config(tmp_path, "")).wait_started()
    async with aiohttp.ClientSession() as s:
        await _queue(s, port, "in")
        await _api(s, port, "POST", "/queues", {"queue_name": "out"})
        await _send(s, port, "in", {"hello": "world"})
        consumers(
            tmp_path, port, "in", "--worker", str(APPS / "forwarder.py"),
            "--producer", "OUT=out",
        )  # fmt: skip

        async def forwarded() -> bool:
            m = await _api(s, port, "GET", "/queues/out/metrics")
            return m["backlog_count"] == 2

        await eventually(forwarded, 30)
        await _api(s, port, "POST", "/queues/out/consumers", {"type": "http_pull"})
        got = await _api(s, port, "POST", "/queues/out/messages/peek", {"batch_size": 10})
        kinds = sorted(m["metadata"]["CF-Content-Type"] for m in got["messages"])
        assert kinds == ["json", "text"]

        async def acked() -> bool:  # the ack follows the handler's sends: wait for it too
            return (await _api(s, port, "GET", "/queues/in/metrics"))["backlog_count"] == 0

        await eventually(acked, 30)


async def test_sigterm_drains_the_batch_in_hand(tmp_path, ocd_processes, consumers):
    port = ocd_processes(recorder_config(tmp_path, "")).wait_started()
    async with aiohttp.ClientSession() as s:
        await _queue(s, port, "slow")
        await _send(s, port, "slow", {"sleep": 2})
        c = consumers(tmp_path, port, "slow", *_recorder(tmp_path))
        await eventually(lambda: records(tmp_path), 30)  # inside the handler now
        c.proc.send_signal(signal.SIGTERM)
        assert c.proc.wait(30) == 0
        m = await _api(s, port, "GET", "/queues/slow/metrics")
        assert m["backlog_count"] == 0  # finished and acknowledged before it exited
        assert len(records(tmp_path)) == 1
        assert c.events("consume_stopped")[0]["batches"] == 1


async def test_a_consumer_killed_with_9_loses_nothing(tmp_path, ocd_processes, consumers):
    port = ocd_processes(recorder_config(tmp_path, "")).wait_started()
    async with aiohttp.ClientSession() as s:
        await _queue(s, port, "fragile")
        await _send(s, port, "fragile", {"sleep": 60}, {"sleep": 60})
        c = consumers(tmp_path, port, "fragile", *_recorder(tmp_path), "--visibility-timeout", "2")
        await eventually(lambda: records(tmp_path), 30)
        c.proc.kill()
        c.proc.wait(10)

        async def back() -> list[dict[str, Any]]:
            got = await _api(
                s, port, "POST", "/queues/fragile/messages/pull",
                {"batch_size": 10, "wait_ms": 1000},
            )  # fmt: skip
            return list(got["messages"])

        returned = await eventually(back, 30)  # once the leases lapse
        again = await eventually(back, 10) if len(returned) < 2 else []
        assert sorted(m["attempts"] for m in returned + again) == [2, 2]


async def test_concurrency_auto_follows_the_backlog_up_to_its_cap(
    tmp_path, ocd_processes, consumers
):
    port = ocd_processes(recorder_config(tmp_path, "")).wait_started()
    spans = tmp_path / "spans.jsonl"
    async with aiohttp.ClientSession() as s:
        await _queue(s, port, "busy", batch_size=5)
        for _ in range(4):
            await _send(s, port, "busy", *[{"sleep": 0.3} for _ in range(50)])
        c = consumers(
            tmp_path, port, "busy", *_recorder(tmp_path), "--var", f"SPANS={spans}",
            "--concurrency", "auto", "--max-concurrency", "4",
        )  # fmt: skip

        async def drained() -> bool:
            m = await _api(s, port, "GET", "/queues/busy/metrics")
            return m["backlog_count"] == 0

        await eventually(drained, 90)
        scaled = [e["concurrency"] for e in c.events("consume_scaled")]
        assert max(scaled) == 4  # 200 messages / 5 a batch, capped at 4
        rows = [json.loads(line) for line in spans.read_text().splitlines()]
        edges = sorted([(r["start"], 1) for r in rows] + [(r["end"], -1) for r in rows])
        most = at = 0
        for _, step in edges:
            at += step
            most = max(most, at)
        assert 1 < most <= 4
        assert len(records(tmp_path)) == 200


async def test_mistakes_are_one_clear_line(tmp_path, ocd_processes):
    r = subprocess.run(
        ocd_command("consume", "--queue", "q", "--worker", str(tmp_path / "missing.py")),
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr
    port = ocd_processes(recorder_config(tmp_path, "")).wait_started()
    async with aiohttp.ClientSession() as s:
        await _api(s, port, "POST", "/queues", {"queue_name": "bare"})
    args = ["--url", f"http://127.0.0.1:{port}", "--queue", "bare", *_recorder(tmp_path)]
    r = subprocess.run(
        ocd_command("consume", *args), capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "queue bare has no HTTP pull consumer" in r.stderr
    r = subprocess.run(
        ocd_command("consume", *args[:2], "--queue", "nope", *_recorder(tmp_path)),
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert r.returncode == 1 and "queue nope" in r.stderr and "Traceback" not in r.stderr
