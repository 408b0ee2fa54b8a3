"""Which handlers (``fetch``, ``queue``, ``scheduled``) each bundled worker exports, asked
of workerd itself: ``workerd test`` evaluates a probe module per worker that imports the
bundle and prints its default export's handler names, then exits. A bundle is JavaScript
ocd cannot read statically (a class, an object built at load), so only running it tells."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ocd.files import CHILD_UMASK, write_file
from ocd.js.capnp import JsWorker, text_literal
from ocd.js.workerd import environ as workerd_environ

_MARK = "ocd-handlers"
_LINE = re.compile(_MARK + r" ([A-Za-z0-9_-]+) (\[.*\])")
_PROBE = (
    'import worker from "./index.js";\n'
    "const target = typeof worker === 'function' ? worker.prototype : worker;\n"
    "const names = target ? Object.getOwnPropertyNames(target) : [];\n"
    "console.log(MARK, JSON.stringify(names.filter((n) => typeof target[n] === 'function')));\n"
    "export default {};\n"
)


def exported(
    workerd: Path, out_dir: Path, workers: Sequence[JsWorker]
) -> dict[str, frozenset[str]]:
    """Handler names by worker; a worker whose bundle did not load is left out (the trial
    start reports why, with workerd's words)."""
    services = []
    for w in workers:
        mark = json.dumps(f"{_MARK} {w.name}")
        flags = ", ".join(text_literal(f) for f in w.compatibility_flags)
        services.append(
            f"(name = {text_literal('h_' + w.name)}, worker = (modules = ["
            f'(name = "ocd-probe.js", esModule = {text_literal(_PROBE.replace("MARK", mark))}), '
            f'(name = "index.js", esModule = embed {text_literal(w.module_path)})], '
            f"compatibilityDate = {text_literal(w.compatibility_date)}, "
            f"compatibilityFlags = [{flags}]))"
        )
    cfg = out_dir / "handlers.capnp"
    write_file(
        cfg,
        'using Workerd = import "/workerd/workerd.capnp";\n'
        f"const config :Workerd.Config = (services = [{', '.join(services)}]);\n",
    )
    try:
        done = subprocess.run(
            [str(workerd), "test", str(cfg), "config", "--experimental"],
            capture_output=True,
            text=True,
            timeout=60,
            env=workerd_environ(os.environ),  # it runs the worker's top level code
            umask=CHILD_UMASK,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    found: dict[str, frozenset[str]] = {}
    for m in _LINE.finditer(done.stdout + done.stderr):
        try:
            found[m.group(1)] = frozenset(json.loads(m.group(2)))
        except ValueError:
            continue
    return found
