"""systemd integration: the unit file verifies, and the notify protocol over a real socket."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.acceptance.conftest import REPO, recorder_config
from tests.helpers import wait_sync

UNIT = REPO / "systemd" / "ocd.service"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_unit_file_verifies(tmp_path):
    # As installed: the ocd command where the unit expects it (here, this venv's).
    ocd_bin = Path(sys.executable).parent / "ocd"
    unit = tmp_path / "ocd.service"
    unit.write_text(UNIT.read_text().replace("/opt/ocd/bin/ocd", str(ocd_bin)))
    r = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    text = UNIT.read_text()
    for line in (
        "Type=notify",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "StateDirectory=ocd",
        "DynamicUser=yes",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
    ):
        assert line in text


class NotifySocket:
    """A unix datagram socket like systemd's, recording (time, message) pairs."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.path = path
        self.messages: list[tuple[float, str]] = []
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            self.messages.append((time.monotonic(), data.decode()))

    def seen(self, field: str) -> list[float]:
        return [t for t, m in self.messages if field in m.split("\n")]

    def close(self) -> None:
        self._stop = True
        self._thread.join(2)
        self.sock.close()


@pytest.fixture
def notify_socket(tmp_path):
    s = NotifySocket(tmp_path / "notify.sock")
    yield s
    s.close()


def test_ready_watchdog_and_stopping_over_notify_socket(tmp_path, ocd_processes, notify_socket):
    cfg = recorder_config(tmp_path, "")
    p = ocd_processes(
        cfg, extra_env={"NOTIFY_SOCKET": str(notify_socket.path), "WATCHDOG_USEC": "200000"}
    )
    port = p.wait_started()
    wait_sync(lambda: notify_socket.seen("READY=1"))
    ready_msg = next(m for _, m in notify_socket.messages if "READY=1" in m)
    assert "STATUS=1 worker(s), 1 queue(s), 0 message(s) in backlog" in ready_msg
    # READY only after the listener is bound: the port answers by then.
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/__ocd/readyz", timeout=5) as r:
        assert r.status == 200
    wait_sync(lambda: len(notify_socket.seen("WATCHDOG=1")) >= 3)
    assert not notify_socket.seen("STOPPING=1")
    assert p.stop() == 0
    assert notify_socket.seen("STOPPING=1")


def test_a_frozen_event_loop_stops_the_watchdog_pings(tmp_path, ocd_processes, notify_socket):
    cfg = recorder_config(tmp_path, "")
    p = ocd_processes(
        cfg, extra_env={"NOTIFY_SOCKET": str(notify_socket.path), "WATCHDOG_USEC": "200000"}
    )
    port = p.wait_started()
    wait_sync(lambda: len(notify_socket.seen("WATCHDOG=1")) >= 2)
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/freeze", data=b'{"seconds": 1.5}', method="POST"
    )
    started = time.monotonic()
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.read() == b"thawed"
    pings = notify_socket.seen("WATCHDOG=1")
    during = [t for t in pings if started + 0.2 < t < started + 1.4]
    assert during == []  # a wedged loop sends no pings, so systemd would restart it
    wait_sync(lambda: any(t > started + 1.5 for t in notify_socket.seen("WATCHDOG=1")))
    assert p.stop() == 0


def test_notifier_does_nothing_outside_systemd():
    from ocd.notify import Notifier

    n = Notifier({})
    assert not n.enabled and n.send("READY=1") is False and n.watchdog_s is None


def test_reload_is_announced_with_reloading_then_ready(tmp_path, ocd_processes, notify_socket):
    env = {"NOTIFY_SOCKET": str(notify_socket.path)}
    p = ocd_processes(recorder_config(tmp_path, ""), extra_env=env)
    p.wait_started()
    wait_sync(lambda: notify_socket.seen("READY=1"))
    p.proc.send_signal(signal.SIGHUP)
    wait_sync(lambda: len(notify_socket.seen("READY=1")) == 2)
    reloading = next(m for _, m in notify_socket.messages if "RELOADING=1" in m)
    usec = next(f for f in reloading.split("\n") if f.startswith("MONOTONIC_USEC="))
    assert int(usec.split("=")[1]) > 0
    assert notify_socket.seen("RELOADING=1")[0] < notify_socket.seen("READY=1")[1]
    assert p.stop() == 0
