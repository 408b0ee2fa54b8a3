"""The workerd config ocd generates (text capnp), never the user's wrangler file: workerd's
own built-in queues would otherwise hold the messages.

One worker service per JS worker (``w_<name>``; its entry wraps the bundle so that
``console`` lines carry the worker's name), one external service per producer binding
pointing at ocd's producer socket with the binding's identity and the start's secret
injected, the bridge (``service_binding_extra_handlers``) with a service binding per worker,
and sockets: the bridge's, and one per worker with routes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

BRIDGE_DATE = "2026-11-01"  # the bridge's own compatibility date (the pinned workerd has it)
LOG_TAG = "[ocd:{name}]"


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


def entry_module(name: str) -> str:
    """The wrapper each worker runs: its bundle's exports, with console lines tagged."""
    tag = json.dumps(LOG_TAG.format(name=name))
    return (
        'import worker from "./index.js";\n'
        'export * from "./index.js";\n'
        'for (const level of ["log", "info", "warn", "error", "debug"]) {\n'
        "  const original = console[level].bind(console);\n"
        f"  console[level] = (...args) => original({tag}, ...args);\n"
        "}\n"
        "export default worker;\n"
    )


def config_text(
    workers: Sequence[JsWorker],
    producer_address: str,
    bridge_address: str,
    http_addresses: Mapping[str, str],
    secret: str,
    bridge_path: str,
) -> str:
    services: list[str] = []
    for w in workers:
        bindings = [_var(k, v) for k, v in w.vars.items()]
        for b in w.producers:
            bindings.append(f"(name = {_text(b)}, queue = {_text(_producer_service(w.name, b))})")
            headers = ", ".join(
                f"(name = {_text(k)}, value = {_text(v)})"
                for k, v in (
                    ("X-Ocd-Worker", w.name),
                    ("X-Ocd-Binding", b),
                    ("Authorization", f"Bearer {secret}"),
                )
            )
            services.append(
                f"(name = {_text(_producer_service(w.name, b))}, external = (address = "
                f"{_text(producer_address)}, http = (injectRequestHeaders = [{headers}])))"
            )
        flags = ", ".join(_text(f) for f in w.compatibility_flags)
        services.append(
            f"(name = {_text(service(w.name))}, worker = (modules = ["
            f'(name = "ocd-entry.js", esModule = {_text(entry_module(w.name))}), '
            f'(name = "index.js", esModule = embed {_text(w.module_path)})], '
            f"compatibilityDate = {_text(w.compatibility_date)}, "
            f"compatibilityFlags = [{flags}], bindings = [{', '.join(bindings)}]))"
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


def _producer_service(worker: str, binding: str) -> str:
    return f"q_{worker}_{binding}"


def _var(name: str, value: Any) -> str:
    if isinstance(value, str):
        return f"(name = {_text(name)}, text = {_text(value)})"
    return f"(name = {_text(name)}, json = {_text(json.dumps(value))})"
