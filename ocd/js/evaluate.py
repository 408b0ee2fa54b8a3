"""Evaluating a ``cf.config.ts`` (or ``.js``/``.mjs``) once, into the plain object it exports.

esbuild bundles it as it bundles Workers, with ``cf/config`` resolved to ocd's own module
(``cf_config.mjs``: ``defineConfig`` returns its argument, ``bindings.*`` return markers), and
node runs the bundle and prints the default export as JSON. Node rather than workerd: it
evaluates a module in one short process with stdout, where workerd would need a generated
config, a socket and a request; and whoever installed workerd and esbuild from npm has node.
"""

from __future__ import annotations

import json
import subprocess
from importlib import resources
from pathlib import Path

from ocd.files import CHILD_UMASK
from ocd.js.bundle import esbuild_problems

TIMEOUT_S = 60
# The entry point, fed to esbuild on stdin; a throw while evaluating is caught here so the
# error (with its source-mapped stack) is told from a crash of node itself.
_ENTRY = """\
try {
  const mod = await import(%s);
  const config = await mod.default;
  process.stdout.write(JSON.stringify(config === undefined ? null : config));
} catch (e) {
  process.stderr.write("__ocd_eval_error__" + (e && e.stack ? e.stack : String(e)));
  process.exitCode = 1;
}
"""


class EvaluateError(Exception):
    """The file did not bundle or threw while evaluated: ``lines`` say where and what."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("; ".join(lines))


def evaluate(path: Path, esbuild: Path, node: Path) -> object:
    """The default export of the config module at ``path``, as JSON values."""
    with resources.as_file(resources.files("ocd.js").joinpath("cf_config.mjs")) as shim:
        bundled = _run(
            [
                str(esbuild),
                "--bundle",
                "--format=esm",
                "--platform=node",
                "--target=node18",
                f"--alias:cf/config={shim}",
                "--sourcemap=inline",
                f"--sourcefile=ocd-evaluate-{path.name}.mjs",
                "--log-level=error",
                "--color=false",
            ],
            _ENTRY % json.dumps("./" + path.name),
            path.parent,
            f"esbuild ({esbuild})",
        )
    if bundled.returncode != 0:
        raise EvaluateError(esbuild_problems(bundled.stderr, path))
    ran = _run(
        [str(node), "--enable-source-maps", "--input-type=module"],
        bundled.stdout,
        path.parent,
        f"node ({node})",
    )
    if ran.returncode != 0:
        return _raise_js_error(path, ran.stderr)
    try:
        return json.loads(ran.stdout)
    except json.JSONDecodeError:
        raise EvaluateError([f"{path}: the default export is not JSON-serialisable"]) from None


def _run(args: list[str], stdin: str, cwd: Path, what: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            args,
            input=stdin,
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=TIMEOUT_S,
            umask=CHILD_UMASK,
        )
    except subprocess.TimeoutExpired:
        raise EvaluateError([f"{what} did not finish in {TIMEOUT_S} s"]) from None
    except OSError as e:
        raise EvaluateError([f"cannot run {what}: {e}"]) from None


def _raise_js_error(path: Path, stderr: str) -> object:
    _, marked, error = stderr.partition("__ocd_eval_error__")
    text = error if marked else stderr
    # The message and the frames in the user's own files; node's internals say nothing.
    lines = [
        line.strip()
        for line in text.strip().splitlines()
        if line.strip()
        and not any(s in line for s in ("node:internal", "ocd-evaluate-", "[eval1]"))
    ]
    raise EvaluateError(lines[:6] or [f"node exited without a message: {stderr.strip()[:300]}"])
