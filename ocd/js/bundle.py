"""Bundling a JS/TS worker with esbuild, with the options wrangler uses (ES modules,
conditions workerd/worker/browser, es2024), into the data directory."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from ocd.files import CHILD_UMASK, FILE_MODE, private_dir, write_file

# Kept external as wrangler and workerd keep them: provided by workerd at run time.
EXTERNAL = ("node:*", "cloudflare:*", "workerd:*", "__STATIC_CONTENT_MANIFEST")
MAP_NAME = "index.js.map"
_ESBUILD_ERROR = re.compile(r"^\s*(?:✘ )?\[ERROR\] (.*)$")
_ESBUILD_WHERE = re.compile(r"^\s+(\S+):(\d+):(\d+):\s*$")


class BundleError(Exception):
    """esbuild refused the worker: ``problems`` as "file:line:column: message" lines."""

    def __init__(self, main: Path, problems: list[str]) -> None:
        self.main = main
        self.problems = problems
        super().__init__("; ".join(problems))


def bundle(esbuild: Path, main: Path, out_dir: Path, no_bundle: bool = False) -> Path:
    """``main`` bundled into ``out_dir/index.js`` (or, with ``no_bundle``, copied as is);
    the path of the module workerd loads."""
    private_dir(out_dir, tighten=True)
    out = out_dir / "index.js"
    source_map = out_dir / MAP_NAME
    source_map.unlink(missing_ok=True)  # a stale map would tell wrong lines
    if no_bundle:
        write_file(out, main.read_bytes())
        return out
    args = [
        str(esbuild),
        str(main),
        "--bundle",
        "--format=esm",
        "--target=es2024",
        "--platform=neutral",
        "--main-fields=workerd,worker,browser,module,main",
        "--conditions=workerd,worker,browser",
        "--loader:.js=jsx",
        "--loader:.mjs=jsx",
        '--define:process.env.NODE_ENV="production"',
        "--log-level=error",
        "--color=false",
        # beside the bundle, for ocd to tell stack traces in the user's files
        "--sourcemap=external",
        "--sources-content=false",
        f"--outfile={out}",
        *(f"--external:{e}" for e in EXTERNAL),
    ]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=120, umask=CHILD_UMASK)
    except subprocess.TimeoutExpired:
        raise BundleError(main, [f"{main}: esbuild did not finish in 120 s"]) from None
    except OSError as e:
        raise BundleError(main, [f"{main}: cannot run esbuild ({esbuild}): {e}"]) from None
    if done.returncode != 0:
        raise BundleError(main, esbuild_problems(done.stderr, main))
    out.chmod(FILE_MODE)  # a bundle an older ocd wrote keeps its mode when esbuild rewrites it
    return out


def esbuild_problems(stderr: str, main: Path) -> list[str]:
    """esbuild's errors as "file:line:column: message", the way compilers print them."""
    problems: list[str] = []
    message: str | None = None
    for line in stderr.splitlines():
        m = _ESBUILD_ERROR.match(line)
        if m:
            if message is not None:
                problems.append(f"{main}: {message}")
            message = m.group(1).strip()
            continue
        w = _ESBUILD_WHERE.match(line)
        if w and message is not None:
            problems.append(f"{w.group(1)}:{w.group(2)}:{w.group(3)}: {message}")
            message = None
    if message is not None:
        problems.append(f"{main}: {message}")
    return problems or [f"{main}: esbuild failed: {stderr.strip()[:500]}"]
