"""Finding workerd and esbuild, pinned to the versions ocd's tests ran on.

Each is looked for in this order: ``[js] workerd = "..."`` / ``esbuild = "..."`` in the
config, ``$OCD_WORKERD`` / ``$OCD_ESBUILD``, ``node_modules/.bin/`` in the config file's
directory or any parent, then ``PATH``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ocd.files import CHILD_UMASK, private_dir, write_file
from ocd.js.workerd import environ as workerd_environ

WORKERD_VERSION = "1.20261123.1"
ESBUILD_VERSION = "0.28.2"
INSTALL_HINT = f"npm install workerd@{WORKERD_VERSION} esbuild@{ESBUILD_VERSION}"
_ENV = {"workerd": "OCD_WORKERD", "esbuild": "OCD_ESBUILD", "node": "OCD_NODE"}
_NEWEST = re.compile(r'newest date supported by this server binary is "(\d{4}-\d{2}-\d{2})"')


class ToolMissing(Exception):
    """A tool of the JS toolchain is not installed where ocd looks."""


@dataclass(frozen=True, slots=True)
class Toolchain:
    workerd: Path
    esbuild: Path


def find(tool: str, configured: str | None, config_dir: Path, environ: Mapping[str, str]) -> Path:
    """The ``tool`` binary ("workerd", "esbuild" or "node"); ``ToolMissing`` saying what to run."""
    tried: list[str] = []
    if configured:
        path = Path(configured)
        path = path if path.is_absolute() else config_dir / path
        if _runnable(path):
            return path
        raise ToolMissing(f"[js] {tool} = {configured!r}: no executable at {path}")
    env = environ.get(_ENV[tool])
    if env:
        if _runnable(Path(env)):
            return Path(env)
        raise ToolMissing(f"${_ENV[tool]} = {env!r}: no executable there")
    for d in (config_dir, *config_dir.parents):
        candidate = d / "node_modules" / ".bin" / tool
        if _runnable(candidate):
            return candidate
    tried.append(f"node_modules/.bin beside {config_dir} and above")
    on_path = shutil.which(tool)
    if on_path:
        return Path(on_path)
    if tool == "node":
        raise ToolMissing(
            "node is not installed (looked in [js] node, $OCD_NODE, node_modules/.bin, PATH); "
            "cf.config.ts files need it to be evaluated: install Node.js (apt-get install nodejs)"
        )
    raise ToolMissing(
        f"{tool} is not installed (looked in [js] {tool}, ${_ENV[tool]}, {tried[0]}, PATH); "
        f"JavaScript workers need it: run `{INSTALL_HINT}` beside the config file"
    )


def _runnable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def binary_version(workerd: Path) -> str:
    """What ``workerd --version`` says (``2026-11-17``), or ``unknown``."""
    try:
        out = subprocess.run(
            [str(workerd), "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            env=workerd_environ(os.environ),
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.strip().removeprefix("workerd ").strip() or "unknown"


def newest_compatibility_date(workerd: Path, probe_dir: Path) -> str | None:
    """The newest compatibility date ``workerd`` supports, from its refusal of a far-future
    one (its ``--version`` prints the release date, which is not that maximum)."""
    private_dir(probe_dir, tighten=True)
    cfg = probe_dir / "date-probe.capnp"
    write_file(
        cfg,
        'using Workerd = import "/workerd/workerd.capnp";\n'
        'const config :Workerd.Config = (services = [(name = "p", worker = (modules = [(name '
        '= "p.js", esModule = "export default {}")], compatibilityDate = "2999-12-31"))], '
        'sockets = [(name = "s", address = "127.0.0.1:0", http = (), service = "p")]);\n',
    )
    try:
        out = subprocess.run(
            [str(workerd), "serve", str(cfg), "config", "--experimental"],
            capture_output=True,
            text=True,
            timeout=30,
            env=workerd_environ(os.environ),
            umask=CHILD_UMASK,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = _NEWEST.search(out.stderr + out.stdout)
    return m.group(1) if m else None
