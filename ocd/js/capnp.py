"""The workerd config ocd generates (text capnp), never the user's wrangler file: workerd's
own built-in queues would otherwise hold the messages.

One worker service per JS worker (``w_<name>``; its entry wraps the bundle so that
``console`` lines carry the worker's name), one external service per producer binding
pointing at ocd's producer socket (and one per KV, D1 or R2 binding at its own socket) with the
binding's identity and the start's secret injected, a ``disk`` service per worker defining
Durable Object classes (workerd keeps their objects in SQLite files there), service bindings
(to a JS worker's service natively, to a Python worker through ocd's services socket), the
bridge (``service_binding_extra_handlers``) with a service binding per worker, and
sockets: the bridge's, and one per worker with routes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ocd.config.model import DurableClassConfig, DurableObjectConfig
from ocd.services import SERVICE_SECRET, SERVICE_TARGET

# The bridge's own compatibility date: the oldest its features need, so that any recent
# workerd (wrangler's too) runs it. None of them is gated by a date: Fetcher.queue() and
# .scheduled() by the flag service_binding_extra_handlers, Response.json(),
# crypto.subtle.timingSafeEqual() and TextDecoder's fatal mode are there at every date.
BRIDGE_DATE = "2024-01-01"
LOG_TAG = "[ocd:{name}]"


@dataclass(frozen=True, slots=True)
class JsService:
    """A service binding of a JS worker: to another JS worker in the same workerd (native:
    fetch, RPC, a named entrypoint), or to a Python worker's fetch through ocd's socket."""

    binding: str
    worker: str
    entrypoint: str | None = None
    python: bool = False


@dataclass(frozen=True, slots=True)
class JsWorker:
    """What the config needs of one worker."""

    name: str
    module_path: str  # the bundle, relative to the config file
    compatibility_date: str
    compatibility_flags: tuple[str, ...]
    vars: Mapping[str, Any]
    producers: tuple[str, ...]  # binding names
    serves_http: bool
    kv: tuple[str, ...] = ()  # KV namespace binding names
    d1: tuple[str, ...] = ()  # D1 database binding names
    r2: tuple[str, ...] = ()  # R2 bucket binding names
    durable_objects: tuple[DurableObjectConfig, ...] = ()
    durable_classes: tuple[DurableClassConfig, ...] = ()  # the classes it defines
    durable_dir: str = ""  # absolute: where workerd keeps its objects
    services: tuple[JsService, ...] = ()


def service(name: str) -> str:
    return f"w_{name}"


def bridge_binding(name: str) -> str:
    return f"W_{name}"


def http_socket(name: str) -> str:
    return f"http_{name}"


def _text(value: str) -> str:
    """A capnp text literal."""
    out = ['"']
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


text_literal = _text  # for the other configs ocd writes (ocd.js.handlers)


def entry_module(name: str) -> str:
    """The wrapper each worker runs: its bundle's exports, with console lines tagged, and
    what its ``fetch``/``queue``/``scheduled`` throw reported to ocd (name, message, stack)
    before the error goes on as it would have: ``queue()`` and ``scheduled()`` rethrow, so
    workerd's outcome is unchanged; ``fetch()`` answers 500 itself, since workerd's own log
    line for it names no worker. The reporting binding is taken out of the Worker's env."""
    tag = json.dumps(LOG_TAG.format(name=name))
    return _ENTRY.replace("__TAG__", tag).replace("__REPORTER__", json.dumps(REPORTER))


REPORTER = "__OCD_ERRORS"  # the binding of ocd's error endpoint in each worker's env
ENTRY_MODULE = "ocd-entry.js"
_ENTRY = """import worker from "./index.js";
export * from "./index.js";
for (const level of ["log", "info", "warn", "error", "debug"]) {
  const original = console[level].bind(console);
  console[level] = (...args) => original(__TAG__, ...args);
}
const REPORTER = __REPORTER__;
const stripped = new WeakMap();
function userEnv(env) {
  if (!env || typeof env !== "object" || !(REPORTER in env)) return env;
  let out = stripped.get(env);
  if (out === undefined) {
    out = { ...env };
    delete out[REPORTER];
    stripped.set(env, out);
  }
  return out;
}
async function report(env, handler, error, extra) {
  try {
    const isError = error instanceof Error;
    const body = {
      handler,
      name: isError ? String(error.name) : typeof error,
      message: isError ? String(error.message) : String(error),
      stack: isError && typeof error.stack === "string" ? error.stack : "",
      ...extra,
    };
    await env[REPORTER].fetch("http://ocd/error", { method: "POST", body: JSON.stringify(body) });
  } catch {
    // ocd's own channel failing must not change what the Worker's error does
  }
}
const context = {
  fetch: (request) => ({ method: request.method, url: request.url }),
  queue: (batch) => ({ queue: batch.queue, ids: batch.messages.map((m) => m.id) }),
  scheduled: (controller) => ({ cron: controller.cron, scheduledTime: controller.scheduledTime }),
};
let entry = worker;
if (worker && typeof worker === "object") {
  entry = { ...worker };
  // handlers may be inherited (an instance of a class), which a spread leaves out
  const names = new Set([...Object.keys(worker), "fetch", "queue", "scheduled", "tail", "email"]);
  for (const name of names) {
    const original = worker[name];
    if (typeof original !== "function") continue;
    entry[name] = async function (event, env, ...rest) {
      try {
        return await original.call(worker, event, userEnv(env), ...rest);
      } catch (e) {
        if (!(name in context)) throw e;
        await report(env, name, e, context[name](event));
        if (name === "fetch") return new Response("Worker threw exception\\n", { status: 500 });
        throw e;
      }
    };
  }
}
export default entry;
"""


def config_text(
    workers: Sequence[JsWorker],
    producer_address: str,
    bridge_address: str,
    http_addresses: Mapping[str, str],
    secret: str,
    bridge_path: str,
    kv_address: str = "",
    d1_address: str = "",
    r2_address: str = "",
    services_address: str = "",
    services_secret: str = "",
) -> str:
    services: list[str] = []
    for w in workers:
        bindings = [_var(k, v) for k, v in w.vars.items()]
        bindings.append(f"(name = {_text(REPORTER)}, service = {_text(_error_service(w.name))})")
        worker_only = _headers((("X-Ocd-Worker", w.name), ("Authorization", f"Bearer {secret}")))
        services.append(_external(_error_service(w.name), producer_address, worker_only))
        for b in w.producers:
            bindings.append(f"(name = {_text(b)}, queue = {_text(_producer_service(w.name, b))})")
            headers = _identity(w.name, b, secret)
            services.append(_external(_producer_service(w.name, b), producer_address, headers))
        for b in w.kv:
            bindings.append(f"(name = {_text(b)}, kvNamespace = {_text(_kv_service(w.name, b))})")
            services.append(
                _external(_kv_service(w.name, b), kv_address, _identity(w.name, b, secret))
            )
        for b in w.d1:
            # D1's binding is workerd's own JS module over a fetcher speaking D1's protocol
            bindings.append(
                f"(name = {_text(b)}, wrapped = (moduleName = "
                f'"cloudflare-internal:d1-api", innerBindings = [(name = "fetcher", '
                f"service = {_text(_d1_service(w.name, b))})]))"
            )
            services.append(
                _external(_d1_service(w.name, b), d1_address, _identity(w.name, b, secret))
            )
        for b in w.r2:
            bindings.append(f"(name = {_text(b)}, r2Bucket = {_text(_r2_service(w.name, b))})")
            services.append(
                _external(_r2_service(w.name, b), r2_address, _identity(w.name, b, secret))
            )
        bindings += [_durable_binding(d) for d in w.durable_objects]
        for svc in w.services:
            if not svc.python:
                target = f"name = {_text(service(svc.worker))}"
                if svc.entrypoint is not None:
                    target += f", entrypoint = {_text(svc.entrypoint)}"
                bindings.append(f"(name = {_text(svc.binding)}, service = ({target}))")
                continue
            name = _python_service(w.name, svc.binding)
            bindings.append(f"(name = {_text(svc.binding)}, service = {_text(name)})")
            headers = _headers(((SERVICE_TARGET, svc.worker), (SERVICE_SECRET, services_secret)))
            services.append(_external(name, services_address, headers))
        flags = ", ".join(_text(f) for f in w.compatibility_flags)
        services.append(
            f"(name = {_text(service(w.name))}, worker = (modules = ["
            f"(name = {_text(ENTRY_MODULE)}, esModule = {_text(entry_module(w.name))}), "
            f'(name = "index.js", esModule = embed {_text(w.module_path)})], '
            f"compatibilityDate = {_text(w.compatibility_date)}, "
            f"compatibilityFlags = [{flags}], bindings = [{', '.join(bindings)}]"
            f"{_durable_storage(w)}))"
        )
        if w.durable_classes:
            services.append(
                f"(name = {_text(_disk_service(w.name))}, disk = (path = "
                f"{_text(w.durable_dir)}, writable = true))"
            )
    bridge_bindings = [f'(name = "SECRET", text = {_text(secret)})'] + [
        f"(name = {_text(bridge_binding(w.name))}, service = {_text(service(w.name))})"
        for w in workers
    ]
    services.append(
        f'(name = "ocd-bridge", worker = (modules = [(name = "bridge.js", esModule = embed '
        f"{_text(bridge_path)})], compatibilityDate = {_text(BRIDGE_DATE)}, "
        f'compatibilityFlags = ["service_binding_extra_handlers"], '
        f"bindings = [{', '.join(bridge_bindings)}]))"
    )
    sockets = [
        f'(name = "bridge", address = {_text(bridge_address)}, http = (), service = "ocd-bridge")'
    ]
    for w in workers:
        if w.serves_http:
            sockets.append(
                f"(name = {_text(http_socket(w.name))}, address = "
                f"{_text(http_addresses[w.name])}, http = (), service = {_text(service(w.name))})"
            )
    return (
        'using Workerd = import "/workerd/workerd.capnp";\n\n'
        "const config :Workerd.Config = (\n  services = [\n    "
        + ",\n    ".join(services)
        + "\n  ],\n  sockets = [\n    "
        + ",\n    ".join(sockets)
        + "\n  ]\n);\n"
    )


def sockets_of(workers: Sequence[JsWorker]) -> list[str]:
    """The names of the sockets workerd reports listening on (``--control-fd``)."""
    return ["bridge", *(http_socket(w.name) for w in workers if w.serves_http)]


def unique_key(worker: str, storage_key: str) -> str:
    """A class's ``uniqueKey``: its objects' directory, and what their ids derive from;
    ``<worker>-<class's first name>``, as workerd names a wrangler project's."""
    return f"{worker}-{storage_key}"


def _durable_storage(w: JsWorker) -> str:
    """The worker's Durable Object classes and where their objects live."""
    if not w.durable_classes:
        return ""
    namespaces = ", ".join(
        f"(className = {_text(c.class_name)}, uniqueKey = "
        f"{_text(unique_key(w.name, c.storage_key))}, enableSql = {str(c.sql).lower()})"
        for c in w.durable_classes
    )
    return (
        f", durableObjectNamespaces = [{namespaces}], "
        f"durableObjectStorage = (localDisk = {_text(_disk_service(w.name))})"
    )


def _durable_binding(d: DurableObjectConfig) -> str:
    where = f", serviceName = {_text(service(d.script_name))}" if d.script_name else ""
    return (
        f"(name = {_text(d.binding)}, durableObjectNamespace = "
        f"(className = {_text(d.class_name)}{where}))"
    )


def _disk_service(worker: str) -> str:
    return f"disk_{worker}"  # not "d_": D1 services are d_<worker>_<binding>


def _error_service(worker: str) -> str:
    return f"e_{worker}"


def _kv_service(worker: str, binding: str) -> str:
    return f"k_{worker}_{binding}"


def _d1_service(worker: str, binding: str) -> str:
    return f"d_{worker}_{binding}"


def _r2_service(worker: str, binding: str) -> str:
    return f"r_{worker}_{binding}"


def _identity(worker: str, binding: str, secret: str) -> str:
    """The headers that tie a request on ocd's private socket to one binding."""
    auth = ("Authorization", f"Bearer {secret}")
    return _headers((("X-Ocd-Worker", worker), ("X-Ocd-Binding", binding), auth))


def _headers(pairs: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"(name = {_text(k)}, value = {_text(v)})" for k, v in pairs)


def _external(name: str, address: str, headers: str) -> str:
    """A service that is one of ocd's private sockets, each request carrying ``headers``."""
    return (
        f"(name = {_text(name)}, external = (address = {_text(address)}, "
        f"http = (injectRequestHeaders = [{headers}])))"
    )


def _python_service(worker: str, binding: str) -> str:
    return f"s_{worker}_{binding}"


def _producer_service(worker: str, binding: str) -> str:
    return f"q_{worker}_{binding}"


def _var(name: str, value: Any) -> str:
    if isinstance(value, str):
        return f"(name = {_text(name)}, text = {_text(value)})"
    return f"(name = {_text(name)}, json = {_text(json.dumps(value))})"
