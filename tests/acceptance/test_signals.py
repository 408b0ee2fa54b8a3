"""Stopping: SIGTERM drains; a second SIGINT stops waiting; unfinished work comes back."""

from __future__ import annotations

import json
import signal
import time
import urllib.request

from tests.acceptance.conftest import recorder_config, records
from tests.helpers import wait_sync

CONSUMER = """
[[workers.queues.consumers]]
queue = "jobs"
max_batch_timeout = 0
"""


def send(port: int, body: object) -> None:
    data = json.dumps({"body": body}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/send", data=data, method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200


def test_second_sigint_forces_and_returns_the_batch_unspent(tmp_path, ocd_processes):
    # shutdown_timeout = 60 s: without the second SIGINT the hung batch would hold us.
    cfg = recorder_config(tmp_path, CONSUMER, extra="").read_text()
    cfg = cfg.replace("shutdown_timeout = 5", "shutdown_timeout = 60")
    (tmp_path / "ocd.toml").write_text(cfg)
    p = ocd_processes(tmp_path / "ocd.toml")
    port = p.wait_started()
    send(port, {"hang": True})
    wait_sync(lambda: records(tmp_path))
    p.proc.send_signal(signal.SIGINT)
    wait_sync(lambda: p.event("stopping"))
    started = time.monotonic()
    p.proc.send_signal(signal.SIGINT)
    assert p.stop(timeout=20) == 0
    assert time.monotonic() - started < 20
    assert p.event("batch_released") is not None

    again = ocd_processes(tmp_path / "ocd.toml")
    again.wait_started()
    rows = wait_sync(lambda: len(records(tmp_path)) == 2 and records(tmp_path), 15)
    assert [r["attempts"] for r in rows] == [1, 1]  # the forced stop spent no attempt
    again.close()


def test_sigterm_lets_an_in_flight_batch_finish(tmp_path, ocd_processes):
    cfg = recorder_config(tmp_path, CONSUMER)
    p = ocd_processes(cfg)
    port = p.wait_started()
    send(port, {"sleep": 1.0})
    wait_sync(lambda: records(tmp_path))  # the handler is running
    assert p.stop(signal.SIGTERM) == 0
    assert p.event("batch_acked") is not None  # it finished and was acked while stopping
    assert p.event("batch_released") is None
    again = ocd_processes(cfg)
    port = again.wait_started()
    send(port, {"n": 2})
    wait_sync(lambda: len(records(tmp_path)) == 2)
    assert [r["body"] for r in records(tmp_path)] == [{"sleep": 1.0}, {"n": 2}]
