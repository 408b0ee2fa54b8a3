"""A reload can never weaken the checks on a listener that is already bound (issue 18, 2)."""

from __future__ import annotations

import hashlib
import json
import signal
import urllib.error
import urllib.request
from pathlib import Path

from ocd.config import load_config
from ocd.posture import weakenings
from tests.helpers import wait_sync

TOKEN = "s3cret-token-for-the-reload-test"
DIGEST = hashlib.sha256(TOKEN.encode()).hexdigest()
READER = "a-read-only-token-for-the-reload-test"
READER_DIGEST = hashlib.sha256(READER.encode()).hexdigest()

ACCOUNTS = f'[[accounts]]\nid = "acme"\ntoken_sha256 = ["{DIGEST}"]\n'


def write(cfg: Path, listen: str, accounts: str) -> Path:
    cfg.write_text(f'[server]\nlisten = "{listen}"\ndata_dir = "data"\n\n{accounts}')
    return cfg


def create_queue(port: int, account: str, token: str | None) -> int:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/client/v4/accounts/{account}/queues",
        data=json.dumps({"queue_name": "sneaky"}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"}
        | ({"Authorization": f"Bearer {token}"} if token else {}),
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_a_reload_dropping_accounts_on_a_public_listener_is_rejected_and_tokens_still_checked(
    tmp_path, ocd_processes
):
    cfg = write(tmp_path / "ocd.toml", "0.0.0.0:0", ACCOUNTS)
    p = ocd_processes(cfg)
    port = p.wait_started()
    assert create_queue(port, "local", None) == 403
    # The config a user would write to "go back to loopback": valid on its own, so
    # check-config accepts it, but the socket stays on 0.0.0.0 until a restart.
    write(cfg, f"127.0.0.1:{port}", "")
    p.proc.send_signal(signal.SIGHUP)
    rejected = wait_sync(lambda: p.event("reload_rejected"))
    assert "accounts" in rejected["msg"] and "0.0.0.0" in rejected["msg"]
    assert "without a token" in rejected["msg"]
    assert p.event("reload_applied") is None
    assert create_queue(port, "local", None) == 403
    assert create_queue(port, "acme", None) == 403
    assert create_queue(port, "acme", TOKEN) == 200
    assert p.stop() == 0


def test_a_reload_rotating_tokens_on_a_public_listener_is_applied(tmp_path, ocd_processes):
    cfg = write(tmp_path / "ocd.toml", "0.0.0.0:0", ACCOUNTS)
    p = ocd_processes(cfg)
    port = p.wait_started()
    new = "the-rotated-token"
    rotated = hashlib.sha256(new.encode()).hexdigest()
    write(cfg, f"0.0.0.0:{port}", f'[[accounts]]\nid = "acme"\ntoken_sha256 = ["{rotated}"]\n')
    p.proc.send_signal(signal.SIGHUP)
    wait_sync(lambda: p.event("reload_applied"))
    assert create_queue(port, "acme", TOKEN) == 403
    assert create_queue(port, "acme", new) == 200
    assert p.stop() == 0


def _config(tmp_path: Path, name: str, listen: str, body: str):
    return load_config(write(tmp_path / name, listen, body))


def test_weakenings_name_each_loosened_check_only_on_public_listeners(tmp_path):
    reader = (
        f'[[accounts]]\nid = "acme"\ntoken_sha256 = ["{DIGEST}",'
        f' {{ sha256 = "{READER_DIGEST}", role = "read" }}]\n[ui]\nread_only = true\n'
    )
    running = _config(tmp_path, "a.toml", "0.0.0.0:8787", reader)
    promoted = _config(
        tmp_path,
        "b.toml",
        "0.0.0.0:8787",
        f'[[accounts]]\nid = "acme"\ntoken_sha256 = ["{DIGEST}", "{READER_DIGEST}"]\n',
    )
    open_local = _config(tmp_path, "c.toml", "127.0.0.1:8787", "")
    found = weakenings(running, promoted, {"server": "0.0.0.0"})
    assert [p.key_path for p in found] == ["accounts", "ui.read_only"]
    assert 'role = "read"' in found[0].message and "read_only" in found[1].message
    assert [p.key_path for p in weakenings(running, open_local, {"server": "0.0.0.0"})] == [
        "accounts"
    ]
    # The same changes on a loopback-bound daemon are what a restart would allow anyway.
    assert weakenings(running, open_local, {"server": "127.0.0.1"}) == []
    assert weakenings(running, promoted, {"server": "::1"}) == []
    # A public SQS listener is held to the same rule.
    assert weakenings(running, open_local, {"server": "127.0.0.1", "sqs": "0.0.0.0"})
