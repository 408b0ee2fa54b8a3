"""The ocd command as a user runs it: check-config, serve, exit codes, signals."""

from __future__ import annotations

import signal
import socket
import urllib.request

import pytest

from tests.acceptance.conftest import REPO, recorder_config, run_ocd
from tests.helpers import wait_sync

CONSUMER = """
[[workers.queues.consumers]]
queue = "jobs"
max_batch_timeout = 0
"""


run = run_ocd


def test_check_config_accepts_the_example():
    r = run("check-config", "-c", "config/ocd.toml")
    assert r.returncode == 0, r.stderr
    assert "OK (1 worker(s), 2 queue(s), 1 consumer(s))" in r.stdout


def test_check_config_names_file_key_path_expected_and_got(tmp_path):
    cfg = recorder_config(
        tmp_path, CONSUMER.replace("max_batch_timeout = 0", "max_batch_size = 500")
    )
    r = run("check-config", "-c", str(cfg))
    assert r.returncode == 2
    assert (
        f"{cfg}: workers[0].queues.consumers[0].max_batch_size: expected an integer 1..100, got 500"
        in r.stderr
    )


def test_worker_import_error_keeps_the_traceback(tmp_path):
    (tmp_path / "broken.py").write_text(
        "import json\n\ndef helper():\n    return 1 / 0\n\nhelper()\n"
    )
    cfg = tmp_path / "ocd.toml"
    cfg.write_text('[[workers]]\nname = "broken"\nmain = "broken.py"\n')
    r = run("check-config", "-c", str(cfg))
    assert r.returncode == 2
    assert "workers[0].main" in r.stderr and "raised an exception" in r.stderr
    assert "ZeroDivisionError" in r.stderr and "in helper" in r.stderr


def test_sync_handler_is_refused(tmp_path):
    (tmp_path / "w.py").write_text("def queue(batch, env, ctx):\n    pass\n")
    cfg = tmp_path / "ocd.toml"
    cfg.write_text(
        '[[workers]]\nname = "w"\nmain = "w.py"\n[[workers.queues.consumers]]\nqueue = "jobs"\n'
    )
    r = run("serve", "-c", str(cfg))
    assert r.returncode == 2
    assert "must be an 'async def' function" in r.stderr


def test_serve_flows_end_to_end_and_stops_cleanly_on_sigterm(tmp_path, ocd_processes):
    p = ocd_processes(recorder_config(tmp_path, CONSUMER))
    port = p.wait_started()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/send", data=b'{"body": {"hello": "world"}}', method="POST"
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200
    wait_sync(lambda: p.event("batch_acked"))
    ev = p.event("batch_acked")
    assert ev["queue"] == "jobs" and ev["acked"] == 1
    assert p.stop(signal.SIGTERM) == 0
    assert p.event("stopped") is not None


def test_example_app_make_run_flow(ocd_processes, tmp_path):
    # The README's quickstart config, with the data dir moved into tmp via a copy.
    text = (REPO / "config" / "ocd.toml").read_text()
    text = text.replace('listen = "127.0.0.1:8787"', 'listen = "127.0.0.1:0"')
    text = text.replace('data_dir = "../.ocd"', f'data_dir = "{tmp_path / "data"}"')
    text = text.replace(
        'main = "../examples/app/worker.py"', f'main = "{REPO}/examples/app/worker.py"'
    )
    cfg = tmp_path / "ocd.toml"
    cfg.write_text(text)
    p = ocd_processes(cfg)
    port = p.wait_started()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/", data=b'{"hello":"world"}', method="POST"
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 202
    wait_sync(lambda: any("received" in ln and "'hello': 'world'" in ln for ln in p.lines), 15)
    assert p.stop() == 0


def test_port_in_use_exits_3(tmp_path, ocd_processes):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = ocd_processes(recorder_config(tmp_path, CONSUMER, port=port))
        assert p.proc.wait(30) == 3
    assert "cannot listen on 127.0.0.1:" in p.log


@pytest.mark.sqlite_only
def test_second_daemon_on_the_same_data_dir_exits_3(tmp_path, ocd_processes):
    first = ocd_processes(recorder_config(tmp_path, CONSUMER))
    first.wait_started()
    second = ocd_processes(recorder_config(tmp_path, CONSUMER))
    assert second.proc.wait(30) == 3
    assert "in use by another ocd process" in second.log
    assert first.stop() == 0


@pytest.mark.sqlite_only
def test_unwritable_data_dir_exits_3(tmp_path, ocd_processes):
    blocker = tmp_path / "data"
    blocker.write_text("a file where the data dir should be")
    p = ocd_processes(recorder_config(tmp_path, CONSUMER))
    assert p.proc.wait(30) == 3
    assert "cannot use data directory" in p.log
