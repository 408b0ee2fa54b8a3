"""Every file and directory ocd creates is owner-only, whatever the umask: the database and
everything beside it, a backup (which holds every message body and the dashboard's keys),
a restored database, JavaScript workers' bundles, generated config and sockets. And workerd
is started with a short list of ocd's environment, never its secrets; a secret_file others
can read is refused."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import aiohttp
import pytest

from tests.acceptance.conftest import APPS, REPO, OcdProcess, ocd_command
from tests.helpers import wait_sync
from tests.js import JS_APP, js_section, why_unavailable
from tests.pg import store_config_toml

pytestmark = [pytest.mark.sqlite_only, pytest.mark.timeout(120)]

SECRET_ENV = "OCD_TEST_SQS_SECRET"
SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"

PY_WORKER = f"""
[[workers]]
name = "app"
main = "{APPS / "recorder.py"}"
routes = ["/send"]

[[workers.queues.producers]]
binding = "QUEUE"
queue = "jobs"
"""

JS_WORKER = f"""
{js_section()}
[[workers]]
name = "jsapp"
main = "{JS_APP / "src" / "index.ts"}"
compatibility_date = "2026-11-01"
routes = ["/js"]

[[workers.queues.producers]]
binding = "QUEUE"
queue = "to-js"
"""


def _config(tmp: Path, data_dir: Path, js: bool, store: str = "") -> Path:
    cfg = tmp / f"ocd-{data_dir.parent.name}.toml"
    cfg.write_text(
        f'[server]\nlisten = "127.0.0.1:0"\ndata_dir = "{data_dir}"\nshutdown_timeout = 5\n'
        + store
        + PY_WORKER
        + (JS_WORKER if js else "")
    )
    return cfg


def _open_to_others(*roots: Path) -> list[str]:
    """Every path under ``roots`` (the roots included) that group or others may use."""
    loose = []
    for root in roots:
        paths = [root]
        if root.is_dir():
            for dirpath, dirnames, filenames in os.walk(root):
                paths += [Path(dirpath) / n for n in dirnames + filenames]
        for p in paths:
            mode = stat.S_IMODE(os.lstat(p).st_mode)
            if mode & 0o077:
                loose.append(f"{p} {mode:04o}")
    return loose


def _ocd(umask: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ocd_command(*args),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        preexec_fn=lambda: os.umask(umask),
    )


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


@pytest.fixture(params=[False, True], ids=["python", "js"])
def js(request: pytest.FixtureRequest) -> bool:
    if request.param:
        reason = why_unavailable()
        if reason is not None:
            pytest.skip(f"the JavaScript half needs workerd and esbuild: {reason}")
    return bool(request.param)


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask022", "umask000"])
async def test_everything_ocd_creates_is_owner_only(tmp_path, umask, js):
    data = tmp_path / "state" / "data"  # its parent too is ocd's to create
    # workerd's sockets go under $TMPDIR: one short enough for them (a deeper one sends
    # them to /tmp, files.socket_dir)
    run = Path(tempfile.mkdtemp(prefix="ocd-modes-", dir="/tmp"))
    backups = tmp_path / "backups"
    backups.mkdir(mode=0o700)
    backups.chmod(0o700)  # the test's own, whatever its umask
    cfg = _config(tmp_path, data, js)
    p = OcdProcess(cfg, extra_env={"TMPDIR": str(run)}, preexec_fn=lambda: os.umask(umask))
    try:
        port = p.wait_started(60)
        async with aiohttp.ClientSession() as s:
            sends = ["/send"] + (["/js/send"] if js else [])
            for path in sends:
                async with s.post(f"http://127.0.0.1:{port}{path}", json={"body": "x"}) as r:
                    assert r.status == 200, await r.text()
        done = _ocd(umask, "backup", "-c", str(cfg), "--to", str(backups / "b.sqlite"))
        assert done.returncode == 0, done.stderr
        # while it runs: the WAL, shared memory, reserve, mark, and workerd's sockets
        assert (data / "scheduler.sqlite-wal").exists()
        if js:
            assert list(run.glob("*/*.sock"))
        assert _open_to_others(tmp_path / "state", backups, *run.iterdir()) == []
        assert p.stop() == 0
    finally:
        p.close()
        shutil.rmtree(run, ignore_errors=True)
    assert _open_to_others(tmp_path / "state", backups) == []

    restored = tmp_path / "restored" / "data"
    done = _ocd(
        umask, "restore", "-c", str(_config(tmp_path, restored, False)), "--from",
        str(backups / "b.sqlite"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _open_to_others(tmp_path / "restored") == []


async def _send_one_and_stop(p: OcdProcess) -> None:
    """Start ``p``, send a message through the producer worker, stop it cleanly."""
    try:
        port = p.wait_started(60)
        async with aiohttp.ClientSession() as s:
            async with s.post(f"http://127.0.0.1:{port}/send", json={"body": "x"}) as r:
                assert r.status == 200, await r.text()
        assert p.stop() == 0
    finally:
        p.close()


async def test_ocd_starts_under_a_tmpdir_too_deep_for_a_unix_socket(tmp_path):
    """Its private sockets go to /tmp then: under such a $TMPDIR, binding them failed
    with "AF_UNIX path too long" and ocd exited with a traceback."""
    deep = tmp_path / ("d" * 80)
    deep.mkdir()
    cfg = _config(tmp_path, tmp_path / "state" / "data", False)
    await _send_one_and_stop(OcdProcess(cfg, extra_env={"TMPDIR": str(deep)}))


async def test_migrating_out_and_a_postgresql_node_leave_owner_only_files(tmp_path, pg_dsn):
    """``ocd migrate-store`` reads a stopped SQLite node out (its export); a node on
    PostgreSQL keeps ``postgres.mark`` in its own data directory."""
    umask = 0o022
    data = tmp_path / "sqlite" / "data"
    await _send_one_and_stop(
        OcdProcess(_config(tmp_path, data, False), preexec_fn=lambda: os.umask(umask))
    )
    done = _ocd(umask, "migrate-store", "--from", str(data), "--to", pg_dsn)
    assert done.returncode == 0, done.stderr
    assert _open_to_others(tmp_path / "sqlite") == []

    pg_data = tmp_path / "pg" / "data"
    cfg = _config(tmp_path, pg_data, False, store_config_toml("postgres", pg_dsn))
    p = OcdProcess(cfg, preexec_fn=lambda: os.umask(umask))
    try:
        p.wait_started(60)
        assert p.stop() == 0
    finally:
        p.close()
    assert (pg_data / "postgres.mark").exists()
    assert _open_to_others(tmp_path / "pg") == []


async def test_workerd_gets_a_short_environment_without_ocds_secrets(tmp_path):
    reason = why_unavailable()
    if reason is not None:
        pytest.skip(f"needs workerd and esbuild: {reason}")
    cfg = _config(tmp_path, tmp_path / "data", True)
    p = OcdProcess(cfg, extra_env={SECRET_ENV: SECRET, "LANG": "C.UTF-8"})
    try:
        p.wait_started(60)

        def workerd_environ() -> dict[str, str] | None:
            for child in _children(p.proc.pid):
                if Path(f"/proc/{child}/exe").resolve().name == "workerd":
                    raw = Path(f"/proc/{child}/environ").read_bytes()
                    return dict(e.split("=", 1) for e in raw.decode().split("\0") if "=" in e)
            return None

        env = wait_sync(workerd_environ, 20)
        assert SECRET_ENV not in env
        assert SECRET not in "\0".join(env.values())
        assert env["PATH"] == os.environ["PATH"]
        assert env["LANG"] == "C.UTF-8"
        assert p.stop() == 0
    finally:
        p.close()


def test_check_config_refuses_a_secret_file_others_can_read(tmp_path):
    secret = tmp_path / "acme.secret"
    secret.write_text("wJalrXUtnFEMI\n")
    secret.chmod(0o644)
    cfg = tmp_path / "ocd.toml"
    cfg.write_text(
        '[server]\nlisten = "127.0.0.1:0"\n\n[[accounts]]\nid = "acme"\n'
        f'token_sha256 = ["{"0" * 64}"]\nsqs_account_id = "111122223333"\n'
        'sqs_keys = [{ access_key_id = "AKIAACMEFILEKEY0", secret_file = "acme.secret" }]\n'
    )
    done = _ocd(0o022, "check-config", "-c", str(cfg))
    assert done.returncode == 2
    assert f"{cfg}: accounts[0].sqs_keys[0].secret_file: {secret} is open to group or " in (
        done.stderr
    )
    assert "expected 0600 or 0400 (owner only), got 0644" in done.stderr
    secret.chmod(0o600)
    done = _ocd(0o022, "check-config", "-c", str(cfg))
    assert done.returncode == 0, done.stderr
