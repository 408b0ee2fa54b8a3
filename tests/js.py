"""workerd and esbuild from npm, as ``tests/package.json`` pins them (the versions
``ocd.js.toolchain`` names). ``.ci/run`` installs them into ``tests/node_modules``;
elsewhere the JavaScript worker tests skip with the one line ``why_unavailable`` gives,
unless ``OCD_REQUIRE_NODE=1`` (CI) makes that a failure."""

from __future__ import annotations

import shutil
from pathlib import Path

from ocd.js.toolchain import ESBUILD_VERSION, WORKERD_VERSION

TESTS = Path(__file__).resolve().parent
BIN = TESTS / "node_modules" / ".bin"
WORKERD = BIN / "workerd"
ESBUILD = BIN / "esbuild"
# node evaluates cf.config.ts files; npm needs it, so wherever the toolchain is, so is node.
NODE = Path(shutil.which("node") or BIN / "node")
JS_APP = TESTS / "apps" / "js_worker"
# The workerd wrangler installs (tests/package.json pins wrangler, which pins its own), as a
# Worker project's `npm install` puts it in node_modules/.bin.
WRANGLER_WORKERD = TESTS / "node_modules" / "wrangler" / "node_modules" / ".bin" / "workerd"
# The oldest workerd ocd supports (docs/workers-javascript.md): its binary alone, from the
# platform package, so that its `workerd` command does not take the pinned one's place in
# node_modules/.bin. Linux x64 only (an optional dependency elsewhere).
OLDEST_WORKERD_VERSION = "1.20260426.1"
OLDEST_WORKERD = TESTS / "node_modules" / "workerd-20260426" / "bin" / "workerd"
INSTALL = "npm --prefix tests install"


def why_unavailable() -> str | None:
    """Why the JS worker tests cannot run here, in one line; None when they can."""
    if not WORKERD.exists() or not ESBUILD.exists() or not NODE.exists():
        npm = "" if shutil.which("npm") else " (npm is missing: apt-get install -y nodejs npm)"
        return (
            f"workerd {WORKERD_VERSION} and esbuild {ESBUILD_VERSION} are not installed in "
            f"tests/node_modules: run {INSTALL}{npm}"
        )
    return None


def js_section() -> str:
    """The ``[js]`` section pointing ocd at the pinned toolchain."""
    return f'[js]\nworkerd = "{WORKERD}"\nesbuild = "{ESBUILD}"\n'


def workerd_pid(ocd_pid: int) -> int:
    """The pid of the workerd that ocd process ``ocd_pid`` runs."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == ocd_pid and b"workerd" in cmd.split(b"\0")[0]:
            return int(entry.name)
    raise AssertionError(f"no workerd child of {ocd_pid}")
