"""wrangler itself (from npm, pinned in tests/package.json) against a real ``ocd serve``,
with only the environment the README's "Using wrangler with ocd" gives it."""

from __future__ import annotations

import hashlib
import json
import re
import urllib.request
from pathlib import Path

import pytest

from tests import wrangler
from tests.acceptance.conftest import APPS

pytestmark = [pytest.mark.usefixtures("wrangler_cli"), pytest.mark.timeout(240)]

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def serve(tmp_path: Path, ocd_processes, extra: str = "") -> tuple[str, object]:
    cfg = tmp_path / "ocd.toml"
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:0"
data_dir = "data"
{extra}

[[workers]]
wrangler = "{APPS / "wrangler_project" / "wrangler.toml"}"
routes = ["/"]
"""
    )
    p = ocd_processes(cfg)
    port = p.wait_started()
    return f"http://127.0.0.1:{port}/client/v4", p


class Wrangler:
    def __init__(self, base_url: str, token: str, home: Path) -> None:
        self.base_url, self.token, self.home = base_url, token, home

    def __call__(self, *args: str, ok: bool = True) -> str:
        r = wrangler.run(*args, base_url=self.base_url, token=self.token, home=self.home)
        out = ANSI.sub("", r.stdout + r.stderr)
        assert (r.returncode == 0) == ok, f"wrangler {' '.join(args)} -> {r.returncode}\n{out}"
        return out


def get(base_url: str, path: str, token: str = "t") -> dict:
    req = urllib.request.Request(base_url + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_wrangler_queues_and_whoami_work_with_only_the_base_url_and_a_token(
    tmp_path, ocd_processes
):
    base, p = serve(tmp_path, ocd_processes)
    w = Wrangler(base, "any-token-will-do", tmp_path / "home")

    who = w("whoami")
    assert "User API Token" in who and re.search(r"│\s*ocd local\s*│\s*local\s*│", who)

    listed = w("queues", "list")
    assert "cf-jobs" in listed

    info = w("queues", "info", "cf-jobs")
    assert "Producers: worker:py-queue-worker" in info
    assert "Consumers: worker:py-queue-worker" in info  # not worker:undefined

    created = w("queues", "create", "made-here", "--delivery-delay-secs=5")
    assert "Created queue 'made-here'" in created
    w("queues", "update", "made-here", "--delivery-delay-secs=7")
    [made] = get(base, "/accounts/local/queues?name=made-here")["result"]
    assert made["settings"]["delivery_delay"] == 7

    w("queues", "consumer", "http", "add", "made-here", "--batch-size=5")
    assert "HTTP Pull Consumer" in w("queues", "info", "made-here")
    w("queues", "consumer", "http", "remove", "made-here")
    assert get(base, f"/accounts/local/queues/{made['queue_id']}/consumers")["result"] == []

    workers = w("queues", "consumer", "worker", "list", "cf-jobs")
    assert "py-queue-worker" in workers
    refused = w("queues", "consumer", "worker", "remove", "cf-jobs", "py-queue-worker", ok=False)
    assert "No worker consumer" not in refused  # found it, and ocd says why it stays
    assert "in ocd's config file" in refused and "11006" in refused

    w("queues", "pause-delivery", "made-here")
    assert get(base, "/accounts/local/queues/made-here")["result"]["settings"]["delivery_paused"]
    w("queues", "resume-delivery", "made-here")
    assert "Purged" in w("queues", "purge", "made-here", "--force")
    w("queues", "delete", "made-here")
    assert get(base, "/accounts/local/queues?name=made-here")["result"] == []

    refused = w("queues", "subscription", "list", "cf-jobs", ok=False)
    assert "Event subscriptions are not supported by ocd" in refused and "11011" in refused

    refused = w("queues", "create", "My_Queue", ok=False)
    assert "queue_name must be" in refused and "10207" in refused
    assert "Traceback" not in p.log


def test_wrangler_with_account_tokens_finds_the_tokens_account_and_refuses_a_wrong_token(
    tmp_path, ocd_processes
):
    token = "s3cret-token"
    digest = hashlib.sha256(token.encode()).hexdigest()
    accounts = f'[[accounts]]\nid = "acme"\ntoken_sha256 = ["{digest}"]\n'
    base, p = serve(tmp_path, ocd_processes, extra=accounts)

    w = Wrangler(base, token, tmp_path / "home")
    assert re.search(r"│\s*ocd acme\s*│\s*acme\s*│", w("whoami"))
    assert "Created queue 'acme-jobs'" in w("queues", "create", "acme-jobs")
    assert "acme-jobs" in w("queues", "list")

    wrong = Wrangler(base, "not-the-token", tmp_path / "home2")
    out = wrong("queues", "list", ok=False)
    assert "Authentication error" in out or "account" in out.lower()
    assert "Traceback" not in p.log
