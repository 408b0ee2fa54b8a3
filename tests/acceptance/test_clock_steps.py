"""Steps of the wall clock a real ``ocd serve`` sees (through the OCD_TEST_WALL_OFFSET_FILE
test hook of ocd.clock), while it runs and across a restart: nothing expires, lapses, waits
or shows a negative age by the size of the step."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from ocd.retention import RETENTION_SWEEP_S
from tests.acceptance.conftest import OcdProcess, recorder_config
from tests.helpers import wait_sync

QUEUES = """
[[queues]]
name = "kept"
message_retention_period = 3600

[[queues]]
name = "leased"

[[queues]]
name = "delayed"

[[queues]]
name = "backlog"
"""


class Api:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.ids: dict[str, str] = {}

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def queue(self, name: str) -> str:
        if not self.ids:
            listed = self.call("GET", "/client/v4/accounts/local/queues")["result"]
            self.ids = {q["queue_name"]: q["queue_id"] for q in listed}
        return f"/client/v4/accounts/local/queues/{self.ids[name]}"

    def pull_consumer(self, name: str) -> None:
        self.call("POST", self.queue(name) + "/consumers", {"type": "http_pull", "settings": {}})

    def send(self, name: str, n: int, **options: Any) -> None:
        body = {"body": {"n": n}, "content_type": "json", **options}
        assert self.call("POST", self.queue(name) + "/messages", body)["success"]

    def pull(self, name: str, visibility_ms: int = 60_000) -> list[dict[str, Any]]:
        body = {"batch_size": 100, "visibility_timeout_ms": visibility_ms}
        messages: list[dict[str, Any]] = self.call(
            "POST", self.queue(name) + "/messages/pull", body
        )["result"]["messages"]
        return messages

    def status(self, name: str) -> dict[str, Any]:
        queues = self.call("GET", "/__ocd/status")["queues"]
        found: dict[str, Any] = next(q for q in queues if q["name"] == name)
        return found


def step_to(offset_file: Path, seconds: int) -> None:
    offset_file.write_text(f"{seconds}\n")


def steps(p: OcdProcess) -> list[dict[str, Any]]:
    return [e for e in p.events if e.get("event") == "clock_step"]


@pytest.mark.timeout(120)
def test_wall_clock_steps_neither_expire_release_delay_nor_age_negatively(tmp_path, ocd_processes):
    offset = tmp_path / "wall-offset"
    step_to(offset, 0)
    cfg = recorder_config(tmp_path, "", extra=QUEUES)
    env = {"OCD_TEST_WALL_OFFSET_FILE": str(offset)}
    p = ocd_processes(cfg, extra_env=env)
    api = Api(p.wait_started())
    for name in ("kept", "leased", "delayed", "backlog"):
        api.pull_consumer(name)
    for n in range(3):
        api.send("kept", n)
    api.send("leased", 0)
    api.send("delayed", 0, delay_seconds=3600)
    for n in range(5):
        api.send("backlog", n)
    assert len(api.pull("leased", visibility_ms=60_000)) == 1

    # Forward two hours while running.
    step_to(offset, 7200)
    wait_sync(lambda: steps(p), 10)
    assert api.pull("leased") == [], "the 60 s lease lapsed at the step"
    assert api.pull("delayed") == [], "the 3600 s delay was cut short by the step"
    # Wait until the daemon's own clock has run a retention sweep's period past the step,
    # so that at least one sweep saw the stepped wall clock.
    at_step = api.status("kept")["oldest_age_s"]
    wait_sync(lambda: api.status("kept")["oldest_age_s"] >= at_step + RETENTION_SWEEP_S + 1, 30)
    kept = api.status("kept")
    assert kept["backlog"] == 3, "messages of a 1 h retention queue expired at a 2 h step"
    assert kept["oldest_age_s"] < 600  # the age did not jump by two hours either
    assert p.event("messages_expired") is None

    # Back three hours (an hour behind where it started) while running.
    step_to(offset, -3600)
    wait_sync(lambda: len(steps(p)) == 2, 10)
    assert len(api.pull("backlog")) == 5, "the queued backlog waits for the clock"
    assert api.status("backlog")["oldest_age_s"] > 0
    assert api.status("kept")["oldest_age_s"] > at_step
    assert api.pull("leased") == []  # the lease still runs
    forward, back = steps(p)
    assert forward["direction"] == "forward" and forward["step_ms"] > 7_100_000
    assert back["direction"] == "back" and back["step_ms"] < -10_700_000
    age_before_restart = api.status("kept")["oldest_age_s"]
    assert p.stop() == 0

    # Restart with the wall clock yet another hour back: carried on from the mark.
    step_to(offset, -7200)
    p2 = ocd_processes(cfg, extra_env=env)
    api2 = Api(p2.wait_started())
    (start_step,) = steps(p2)
    assert start_step["at"] == "start" and start_step["step_ms"] < -7_100_000
    assert api2.status("kept")["oldest_age_s"] >= age_before_restart
    assert len(api2.pull("kept")) == 3, "messages sent before the restart wait for the clock"
    api2.send("backlog", 99)
    assert len(api2.pull("backlog")) == 1  # the new one; the five are still leased
    assert api2.status("backlog")["oldest_age_s"] >= 0
    assert p2.stop() == 0
