"""What a wrangler file may bind that ocd does not run, and cron triggers.

ocd runs queues, vars and crons. Any other binding in a wrangler file is refused when the
config is loaded (``check-config`` and ``serve`` alike) with its file, key path and a
sentence naming the feature, instead of passing the check and failing at request time on
``env.DB``. A worker entry's ``ignore_unsupported_bindings = true`` turns each refusal into
a warning; the binding is then in ``env`` as a placeholder that raises NotImplementedError
naming it when used.
"""

from __future__ import annotations

from dataclasses import dataclass

from ocd import cron
from ocd.configfile import Table

SUPPORTED = "only queues, vars and crons"
ADVICE = "remove it or run this worker under wrangler dev"

# wrangler key -> what it binds, as the sentence names it. Keys whose value is one table
# (``ai``, ``browser``) bind one name; the others are arrays of bindings.
UNSUPPORTED: dict[str, str] = {
    "kv_namespaces": "KV bindings",
    "d1_databases": "D1 bindings",
    "r2_buckets": "R2 bindings",
    "durable_objects": "Durable Object bindings",
    "services": "service bindings",
    "workflows": "Workflow bindings",
    "ai": "Workers AI bindings",
    "ai_search": "AI Search bindings",
    "ai_search_namespaces": "AI Search bindings",
    "agent_memory": "Agent Memory bindings",
    "analytics_engine_datasets": "Analytics Engine bindings",
    "artifacts": "Artifacts bindings",
    "assets": "Static assets",
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


@dataclass(frozen=True, slots=True)
class IgnoredBinding:
    """A binding refused but let through by ``ignore_unsupported_bindings``."""

    name: str  # the env name, e.g. "DB"; "" when the entry names none
    feature: str  # "D1 bindings"


def unsupported_bindings(src: Table, ignore: bool, warnings: list[str]) -> list[IgnoredBinding]:
    """Refuse (or, with ``ignore``, warn about) every unsupported binding in wrangler file
    ``src``; returns the ones let through."""
    ignored: list[IgnoredBinding] = []
    for key, feature in UNSUPPORTED.items():
        if key not in src:
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
