"""What a wrangler file may bind that ocd does not run, and cron triggers.

ocd runs queues, KV namespaces, D1 databases, R2 buckets, Durable Objects
(``ocd.config.durable``; in JavaScript workers), service bindings, vars and crons. Any other
binding in a wrangler file is refused when the config is loaded (``check-config`` and
``serve`` alike) with its file, key path and a sentence naming the feature, instead of
passing the check and failing at request time on ``env.AI``. A worker entry's
``ignore_unsupported_bindings = true`` turns each refusal into a warning; the binding is
then in ``env`` as a placeholder that raises NotImplementedError naming it when used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ocd import cron
from ocd.config.file import Table, absolute_path

SUPPORTED = (
    "only queues, KV namespaces, D1 databases, R2 buckets, service bindings, vars and crons; "
    "Durable Objects in JavaScript workers"
)
ADVICE = "remove it or run this worker under wrangler dev"

# wrangler key -> what it binds, as the sentence names it. Keys whose value is one table
# (``ai``, ``browser``) bind one name; the others are arrays of bindings.
UNSUPPORTED: dict[str, str] = {
    "durable_objects": "Durable Object bindings in Python workers",  # JS: ocd.config.durable
    "workflows": "Workflow bindings",
    "ai": "Workers AI bindings",
    "ai_search": "AI Search bindings",
    "ai_search_namespaces": "AI Search bindings",
    "agent_memory": "Agent Memory bindings",
    "analytics_engine_datasets": "Analytics Engine bindings",
    "artifacts": "Artifacts bindings",
    "browser": "Browser Rendering bindings",
    "containers": "Containers",
    "dispatch_namespaces": "dispatch namespace bindings",
    "flagship": "Flagship bindings",
    "hyperdrive": "Hyperdrive bindings",
    "images": "Images bindings",
    "k2": "K2 bindings",
    "media": "Media bindings",
    "mtls_certificates": "mTLS certificate bindings",
    "pipelines": "Pipelines bindings",
    "ratelimits": "rate limiting bindings",
    "secrets_store_secrets": "Secrets Store bindings",
    "send_email": "Email bindings",
    "site": "Workers Sites",
    "stream": "Stream bindings",
    "tail_consumers": "tail consumers",
    "streaming_tail_consumers": "tail consumers",
    "unsafe": "unsafe bindings",
    "vectorize": "Vectorize bindings",
    "version_metadata": "version metadata bindings",
    "vpc_networks": "VPC bindings",
    "vpc_services": "VPC bindings",
    "worker_loaders": "Worker Loader bindings",
    "logfwdr": "logfwdr bindings",
}
_NAME_KEYS = ("binding", "name")


NotFound = Literal["none", "404-page", "single-page-application"]
HtmlHandling = Literal["auto-trailing-slash", "force-trailing-slash", "drop-trailing-slash", "none"]
NOT_FOUND: tuple[NotFound, ...] = ("none", "404-page", "single-page-application")
HTML_HANDLING: tuple[HtmlHandling, ...] = (
    "auto-trailing-slash", "force-trailing-slash", "drop-trailing-slash", "none"
)  # fmt: skip
ASSETS_KEYS = ("directory", "binding", "not_found_handling", "html_handling", "run_worker_first")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class AssetsConfig:
    """Static assets served from a worker's routes, as wrangler's ``assets`` serves them."""

    directory: Path
    binding: str | None = None  # env.ASSETS.fetch(request)
    not_found_handling: NotFound = "none"
    html_handling: HtmlHandling = "auto-trailing-slash"
    # True: the worker runs first for every request; a tuple: for paths matching one of
    # these patterns ("/api/*"; "!/api/docs" excludes)
    run_worker_first: bool | tuple[str, ...] = False


@dataclass(frozen=True, slots=True)
class IgnoredBinding:
    """A binding refused but let through by ``ignore_unsupported_bindings``."""

    name: str  # the env name, e.g. "DB"; "" when the entry names none
    feature: str  # "D1 bindings"


def unsupported_bindings(
    src: Table, ignore: bool, warnings: list[str], js: bool = False
) -> list[IgnoredBinding]:
    """Refuse (or, with ``ignore``, warn about) every unsupported binding in wrangler file
    ``src`` of a Python (or, ``js``, a JavaScript) worker; returns the ones let through."""
    ignored: list[IgnoredBinding] = []
    for key, feature in UNSUPPORTED.items():
        if key not in src or (js and key == "durable_objects"):
            continue
        value = src.get(key)
        entries: list[tuple[str, object]]
        if key == "durable_objects" and isinstance(value, dict):
            sub = src.file.table(value, src.key_path(key), allowed=None)
            entries = sub.items("bindings") if sub is not None else []
        elif isinstance(value, list):
            entries = src.items(key)
        elif value in (None, {}, False):
            entries = []
        else:
            entries = [(src.key_path(key), value)]
        for kp, entry in entries:
            message = f"{feature} are not supported by ocd ({SUPPORTED}); {ADVICE}"
            if not ignore:
                src.file.problem(kp, message)
                continue
            name = _binding_name(entry)
            warnings.append(
                f"{src.file.shown}: {kp}: {message}; ignored (ignore_unsupported_bindings)"
                + (f": env.{name} raises an error when used" if name else "")
            )
            ignored.append(IgnoredBinding(name, feature))
    return ignored


def _binding_name(entry: object) -> str:
    if isinstance(entry, dict):
        for key in _NAME_KEYS:
            if isinstance(entry.get(key), str):
                return str(entry[key])
    return ""


def crons(t: Table, key: str) -> list[str]:
    """The cron expressions of the array at ``key``, each checked as Cloudflare would."""
    out: list[str] = []
    for kp, item in t.items(key):
        if not isinstance(item, str):
            t.file.expected(kp, "a cron expression string", item)
            continue
        try:
            cron.parse(item)
        except cron.CronError as e:
            t.file.expected(kp, f"a cron expression ({e})", item)
            continue
        if item in out:
            t.file.problem(kp, f'cron "{item}" is listed twice')
            continue
        out.append(item)
    return out


def assets(src: Table) -> AssetsConfig | None:
    """The ``assets`` table of ``src``, its directory resolved against ``src``'s file."""
    a = src.table("assets", ASSETS_KEYS)
    if a is None or "assets" not in src:
        return None
    value = a.get("directory")
    directory: Path | None = None
    if not isinstance(value, str) or not value:
        a.expected("directory", "a path to a directory of static files", value)
    else:
        directory = absolute_path(src.file.path.parent, value)
        if not directory.is_dir():
            a.problem("directory", f"directory not found: {directory}")
            directory = None
    binding = a.text("binding", _IDENTIFIER.fullmatch, "a binding name like ASSETS")
    not_found = a.get("not_found_handling", "none")
    if not_found not in NOT_FOUND:
        a.expected("not_found_handling", " or ".join(f'"{v}"' for v in NOT_FOUND), not_found)
        not_found = "none"
    html = a.get("html_handling", "auto-trailing-slash")
    if html not in HTML_HANDLING:
        a.expected("html_handling", " or ".join(f'"{v}"' for v in HTML_HANDLING), html)
        html = "auto-trailing-slash"
    first: bool | tuple[str, ...] = False
    raw = a.get("run_worker_first", False)
    if isinstance(raw, bool):
        first = raw
    elif isinstance(raw, list) and all(
        isinstance(r, str) and r.lstrip("!").startswith("/") for r in raw
    ):
        first = tuple(raw)
    else:
        a.expected(
            "run_worker_first", 'true, false or an array of path patterns like "/api/*"', raw
        )
    if directory is None:
        return None
    return AssetsConfig(directory, binding, not_found, html, first)
