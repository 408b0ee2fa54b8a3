"""An existing Cloudflare Python Worker project (wrangler.toml + src/) runs unchanged."""

from __future__ import annotations

import urllib.request

from tests.acceptance.conftest import APPS
from tests.helpers import wait_sync


def test_wrangler_project_runs_unchanged(tmp_path, ocd_processes):
    cfg = tmp_path / "ocd.toml"
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:0"
data_dir = "data"

[[workers]]
wrangler = "{APPS / "wrangler_project" / "wrangler.toml"}"
routes = ["/"]
"""
    )
    p = ocd_processes(cfg)
    port = p.wait_started()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/hello", timeout=10) as resp:
        assert resp.read() == b"Sent!"
    line = wait_sync(
        lambda: next((ln for ln in p.stdout if ln.startswith("consumed cf-jobs ")), None), 15
    )
    assert "attempt=1 body={'path': '/hello'}" in line
    assert p.stop() == 0
