"""ocd's config file (and any wrangler files it names), parsed once into frozen dataclasses.

Validation is pure: the only I/O is reading the config and wrangler files and checking that
each worker's ``main`` file exists. Worker modules are never imported and no database is
opened here. Every problem found is collected and raised together in one ConfigError.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import re
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from ocd.errors import ConfigError, Problem

DEFAULT_LISTEN = "127.0.0.1:8787"
LOCAL_ACCOUNT = "local"
RESERVED_ROUTE_PREFIXES = ("/client/v4", "/__ocd")


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str
    port: int
    data_dir: Path
    durability: Literal["full", "normal"] = "full"
    shutdown_timeout_s: float = 30.0

    @property
    def listen(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    binding: str
    queue: str


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    queue: str
    max_batch_size: int = 10
    max_batch_timeout_s: float = 5.0
    max_retries: int = 3
    dead_letter_queue: str | None = None
    max_concurrency: int | None = None  # None: autoscale
    retry_delay_s: int = 0


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    name: str
    key_path: str  # "workers[0]", for messages about this worker
    source: Path  # config or wrangler file that set main/module, as the user named it
    main: Path | None
    module: str | None
    routes: tuple[str, ...]
    vars: Mapping[str, Any] = field(hash=False)  # read-only (MappingProxyType)
    producers: tuple[ProducerConfig, ...] = ()
    consumers: tuple[ConsumerConfig, ...] = ()
    account: str = LOCAL_ACCOUNT
    handler_timeout_s: float = 900.0


@dataclass(frozen=True, slots=True)
class QueueConfig:
    name: str
    account: str = LOCAL_ACCOUNT
    delivery_delay_s: int = 0
    message_retention_period_s: int = 345_600
    delivery_paused: bool = False
    declared: bool = False  # from a [[queues]] entry, not only named by a worker


@dataclass(frozen=True, slots=True)
class AccountConfig:
    id: str
    token_sha256: tuple[str, ...]  # lowercase hex


@dataclass(frozen=True, slots=True)
class Config:
    path: Path
    server: ServerConfig
    workers: tuple[WorkerConfig, ...]
    queues: tuple[QueueConfig, ...]  # every queue named anywhere, sorted by (account, name)
    accounts: tuple[AccountConfig, ...]
    warnings: tuple[str, ...] = ()

    def queue(self, name: str, account: str = LOCAL_ACCOUNT) -> QueueConfig | None:
        """Settings of queue ``name`` in ``account``; None if the config never names it."""
        return next((q for q in self.queues if (q.account, q.name) == (account, name)), None)

    def consumer_for(
        self, queue: str, account: str = LOCAL_ACCOUNT
    ) -> tuple[WorkerConfig, ConsumerConfig] | None:
        """The worker consuming ``queue`` in ``account``, with its consumer settings."""
        for worker in self.workers:
            for consumer in worker.consumers:
                if worker.account == account and consumer.queue == queue:
                    return worker, consumer
        return None


def load_config(path: str | Path, environ: Mapping[str, str] | None = None) -> Config:
    """Read and validate the config file at ``path``.

    ``environ`` (default ``os.environ``) supplies ``STATE_DIRECTORY``, the default data
    directory. Raises ConfigError listing every problem found.
    """
    loader = _Loader(Path(path), os.environ if environ is None else environ)
    config = loader.load()
    if loader.problems or config is None:
        raise ConfigError(loader.problems)
    return config


_NAME = re.compile(r"[A-Za-z0-9_-]{1,63}")
_ACCOUNT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")

_QUEUE_NAME = "a queue name (1..63 of A-Z a-z 0-9 _ -)"
_IDENTIFIER_NAME = "name matching [A-Za-z_][A-Za-z0-9_]*"
_ACCOUNT_REF = 'an account id ("local" or a configured [[accounts]] id)'

_TOP_KEYS = ("server", "accounts", "workers", "queues")
_SERVER_KEYS = ("listen", "data_dir", "durability", "shutdown_timeout")
_ACCOUNT_KEYS = ("id", "token_sha256")
_WORKER_KEYS = (
    "name", "main", "module", "routes", "vars", "account", "handler_timeout", "wrangler", "queues"
)  # fmt: skip
_PRODUCER_KEYS = ("binding", "queue")
_CONSUMER_KEYS = (
    "queue", "max_batch_size", "max_batch_timeout", "max_retries", "dead_letter_queue",
    "max_concurrency", "retry_delay",
)  # fmt: skip
_QUEUE_KEYS = ("name", "account", "delivery_delay", "message_retention_period", "delivery_paused")
# Keys wrangler accepts that ocd checks but ignores.
_WRANGLER_PRODUCER_KEYS = (*_PRODUCER_KEYS, "delivery_delay", "remote")
_WRANGLER_CONSUMER_KEYS = (*_CONSUMER_KEYS, "type", "visibility_timeout_ms")
# A worker entry key, and the wrangler key that sets the same thing.
_WRANGLER_OVERLAP = (("main", "main"), ("module", "main"), ("vars", "vars"), ("queues", "queues"))


def _join(path: str, key: str) -> str:
    key = key if _BARE_KEY.fullmatch(key) else json.dumps(key)
    return f"{path}.{key}" if path else key


def _show(value: object) -> str:
    if isinstance(value, datetime.date | datetime.time):  # TOML dates are written unquoted
        return value.isoformat()
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _absolute(base: Path, value: str) -> Path:
    return Path(os.path.normpath(os.path.join(base, value)))


def _is_module_name(value: str) -> bool:
    return all(part.isidentifier() for part in value.split("."))


def _is_var_value(value: object) -> bool:
    if isinstance(value, list):
        return all(_is_var_value(v) for v in value)
    if isinstance(value, dict):
        return all(_is_var_value(v) for v in value.values())
    return isinstance(value, str | int | float | bool)


class _File:
    """A config or wrangler file: where its problems go and how its relative paths resolve."""

    def __init__(self, shown: Path, path: Path, problems: list[Problem], wrangler: bool) -> None:
        self.shown = shown  # as the user named it, for messages
        self.path = path
        self.problems = problems
        self.wrangler = wrangler
        self.toml = not wrangler or path.suffix == ".toml"
        self.table_word, self.noun = ("a table", "table") if self.toml else ("an object", "object")

    def problem(self, key_path: str, message: str) -> None:
        self.problems.append(Problem(self.shown, key_path, message))

    def expected(self, key_path: str, what: str, got: object) -> None:
        self.problem(key_path, f"expected {what}, got {_show(got)}")

    def read(self, allowed: Collection[str] | None) -> _Table | None:
        try:
            text = self.path.read_text(encoding="utf-8")
            data = tomllib.loads(text) if self.toml else json.loads(_strip_jsonc(text))
        except FileNotFoundError:
            self.problem("", "file not found")
        except (OSError, UnicodeDecodeError) as e:
            self.problem("", f"cannot read file: {e}")
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
            self.problem("", f"invalid {'TOML' if self.toml else 'JSON'}: {e}")
        else:
            return self.table(data, "", allowed)
        return None

    def table(
        self,
        value: object,
        path: str,
        allowed: Collection[str] | None,  # None: any key
        required: Collection[str] = (),
    ) -> _Table | None:
        if not isinstance(value, dict):
            self.expected(path, self.table_word, value)
            return None
        for key in value:
            if allowed is not None and key not in allowed:
                self.problem(_join(path, key), f'unknown key "{key}"')
        for key in required:
            if key not in value:
                self.problem(path, f'missing required key "{key}"')
        return _Table(self, value, path)


class _Table:
    """Typed access to one table; a wrong value is recorded as a problem, never raised."""

    def __init__(self, file: _File, data: dict[str, Any], path: str) -> None:
        self.file = file
        self.data = data
        self.path = path

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def get(self, key: str, default: object = None) -> Any:
        return self.data.get(key, default)

    def key_path(self, key: str) -> str:
        return _join(self.path, key)

    def problem(self, key: str, message: str) -> None:
        self.file.problem(self.key_path(key), message)

    def expected(self, key: str, what: str, got: object) -> None:
        self.file.expected(self.key_path(key), what, got)

    def table(self, key: str, allowed: Collection[str] | None) -> _Table | None:
        return self.file.table(self.data.get(key, {}), self.key_path(key), allowed)

    def items(self, key: str) -> list[tuple[str, object]]:
        """(key path, item) for each item of the array at ``key``; absent means empty."""
        value = self.data.get(key, [])
        if not isinstance(value, list):
            self.expected(key, "an array", value)
            return []
        return [(f"{self.key_path(key)}[{i}]", item) for i, item in enumerate(value)]

    def text(self, key: str, ok: Callable[[str], object], what: str) -> str | None:
        """The string at ``key`` if ``ok`` accepts it; None if absent or wrong."""
        value = self.data.get(key)
        if value is None or (isinstance(value, str) and ok(value)):
            return value
        self.expected(key, what, value)
        return None

    def integer(self, key: str, lo: int, hi: int, default: int) -> int:
        value = self.data.get(key, default)
        if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
            return value
        self.expected(key, f"an integer {lo}..{hi}", value)
        return default

    def number(self, key: str, lo: int, hi: int, default: float) -> float:
        value = self.data.get(key, default)
        if isinstance(value, int | float) and not isinstance(value, bool) and lo <= value <= hi:
            return float(value)
        self.expected(key, f"a number {lo}..{hi}", value)
        return default

    def boolean(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if isinstance(value, bool):
            return value
        self.expected(key, "true or false", value)
        return default


def _strip_jsonc(text: str) -> str:
    """JSONC to JSON: blank out comments and trailing commas, keeping every line and column."""
    out = list(text)
    last = -1  # index of the last character that is neither whitespace nor comment
    i = 0
    while i < len(text):
        if text[i] == '"':
            end = i + 1
            while end < len(text) and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            last, i = end, end + 1
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:  # unterminated: left in place for json to report
                break
            end += 2
        else:
            if text[i] in "]}" and last >= 0 and out[last] == ",":
                out[last] = " "
            if not text[i].isspace():
                last = i
            i += 1
            continue
        out[i:end] = [c if c == "\n" else " " for c in text[i:end]]
        i = end
    return "".join(out)


def _parse_listen(listen: str) -> tuple[str, int] | None:
    if listen.startswith("["):
        host, sep, port = listen[1:].partition("]:")
        if not sep or not isinstance(_ip(host), ipaddress.IPv6Address):
            return None
    else:
        host, sep, port = listen.rpartition(":")
        if not sep or (host != "localhost" and not isinstance(_ip(host), ipaddress.IPv4Address)):
            return None
    if not (port.isascii() and port.isdigit() and len(port) <= 5 and int(port) <= 65535):
        return None
    return host, int(port)


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _is_loopback(host: str) -> bool:
    ip = _ip(host)
    return host == "localhost" or (ip is not None and ip.is_loopback)


class _Loader:
    """One pass over the config file; cross-entry checks keep their state here."""

    def __init__(self, file: Path, environ: Mapping[str, str]) -> None:
        self.problems: list[Problem] = []
        self.config = _File(file, Path(os.path.abspath(file)), self.problems, wrangler=False)
        self.environ = environ
        self.warnings: list[str] = []
        self.account_ids: dict[str, str] = {}  # id -> key path of its entry
        self.token_owners: dict[str, str] = {}  # token hash -> account id
        self.worker_names: dict[str, str] = {}  # name -> key path
        self.route_owners: dict[str, str] = {}  # route -> worker
        self.consumer_owners: dict[tuple[str, str], tuple[str, str]] = {}  # -> (worker, key path)
        self.declared_queues: dict[tuple[str, str], str] = {}  # (account, name) -> key path

    def load(self) -> Config | None:
        top = self.config.read(_TOP_KEYS)
        if top is None:
            return None
        server = self._server(top)
        accounts = [self._account(p, item) for p, item in top.items("accounts")]
        workers = [self._worker(p, item) for p, item in top.items("workers")]
        declared = [self._queue(p, item) for p, item in top.items("queues")]
        if self.problems or server is None:
            return None
        queues = {(q.account, q.name): q for q in declared if q is not None}
        for w in workers:
            assert w is not None  # else there would be a problem
            named = [p.queue for p in w.producers] + [c.queue for c in w.consumers]
            named += [c.dead_letter_queue for c in w.consumers if c.dead_letter_queue]
            for name in named:
                queues.setdefault((w.account, name), QueueConfig(name, w.account))
        return Config(
            path=self.config.path,
            server=server,
            workers=tuple(w for w in workers if w is not None),
            queues=tuple(queues[key] for key in sorted(queues)),
            accounts=tuple(a for a in accounts if a is not None),
            warnings=tuple(self.warnings),
        )

    def _server(self, top: _Table) -> ServerConfig | None:
        s = top.table("server", _SERVER_KEYS)
        if s is None:
            return None
        listen = s.get("listen", DEFAULT_LISTEN)
        host_port = _parse_listen(listen) if isinstance(listen, str) else None
        if host_port is None:
            what = '"host:port" with an IP address or "localhost" and a port 0..65535'
            s.expected("listen", what, listen)
        elif not top.get("accounts") and not _is_loopback(host_port[0]):
            what = "a loopback address when no [[accounts]] are configured"
            s.expected("listen", f"{what} (ocd would serve its API without authentication)", listen)
        state_dir = self.environ.get("STATE_DIRECTORY", "").split(":")[0]
        data_dir = s.text("data_dir", bool, "a directory path") or state_dir or ".ocd"
        durability = s.text("durability", ("full", "normal").__contains__, '"full" or "normal"')
        host, port = host_port or ("", 0)
        return ServerConfig(
            host=host,
            port=port,
            data_dir=_absolute(self.config.path.parent, data_dir),
            durability="normal" if durability == "normal" else "full",
            shutdown_timeout_s=s.number("shutdown_timeout", 0, 3600, 30.0),
        )

    def _account(self, path: str, item: object) -> AccountConfig | None:
        a = self.config.table(item, path, _ACCOUNT_KEYS, required=_ACCOUNT_KEYS)
        if a is None:
            return None
        account_id = a.text("id", _ACCOUNT_ID.fullmatch, "an account id (1..64 of A-Z a-z 0-9 _ -)")
        first = self.account_ids.setdefault(account_id, path) if account_id else path
        if first != path:
            a.problem("id", f'account "{account_id}" is already declared by {first}')
        hashes: list[str] = []
        for kp, digest in a.items("token_sha256"):
            if not (isinstance(digest, str) and _SHA256.fullmatch(digest)):
                self.config.expected(kp, "a SHA-256 hex digest (64 hex digits)", digest)
                continue
            owner = self.token_owners.setdefault(digest.lower(), account_id or path)
            if owner != (account_id or path):
                self.config.problem(kp, f'this token is already listed for account "{owner}"')
            hashes.append(digest.lower())
        return AccountConfig(account_id, tuple(hashes)) if account_id else None

    def _account_ref(self, t: _Table) -> str:
        account = t.get("account", LOCAL_ACCOUNT)
        if account != LOCAL_ACCOUNT and account not in self.account_ids:
            t.expected("account", _ACCOUNT_REF, account)
        return account if isinstance(account, str) else LOCAL_ACCOUNT

    def _queue(self, path: str, item: object) -> QueueConfig | None:
        q = self.config.table(item, path, _QUEUE_KEYS, required=("name",))
        if q is None:
            return None
        name = q.text("name", _NAME.fullmatch, _QUEUE_NAME)
        account = self._account_ref(q)
        first = self.declared_queues.setdefault((account, name), path) if name else path
        if first != path:
            where = "" if account == LOCAL_ACCOUNT else f' in account "{account}"'
            q.problem("name", f'queue "{name}"{where} is already declared by {first}')
        return QueueConfig(
            name=name or "",
            account=account,
            delivery_delay_s=q.integer("delivery_delay", 0, 86400, 0),
            message_retention_period_s=q.integer(
                "message_retention_period", 60, 1_209_600, 345_600
            ),
            delivery_paused=q.boolean("delivery_paused", False),
            declared=True,
        )

    def _worker(self, path: str, item: object) -> WorkerConfig | None:
        w = self.config.table(item, path, _WORKER_KEYS)
        if w is None:
            return None
        wrangler = self._wrangler(w) if "wrangler" in w else None
        lenient = "wrangler" in w and wrangler is None  # don't add "missing" to a broken wrangler

        def pick(key: str) -> _Table:
            return wrangler if wrangler is not None and key in wrangler else w

        for key, wkey in _WRANGLER_OVERLAP:
            if wrangler is not None and key in w and wkey in wrangler:
                w.problem(key, f'"{wkey}" is already set in {wrangler.file.shown}; set it once')
        named = w if "name" in w or wrangler is None else wrangler  # the entry may override
        name = named.text("name", _NAME.fullmatch, "a worker name (1..63 of A-Z a-z 0-9 _ -)")
        if "name" not in named and not lenient:
            self.config.problem(path, 'missing required key "name"')
        first = self.worker_names.setdefault(name, path) if name else path
        if first != path:
            named.problem("name", f'worker "{name}" is already declared by {first}')
        owner = f'worker "{name}"' if name else path

        code = pick("main")
        main, module = None, None
        if "main" in w and "module" in w:
            w.problem("module", 'expected one of "main" or "module", got both')
        elif "main" in code:
            main = self._main(code)
        elif "module" in w:
            module = w.text("module", _is_module_name, 'a dotted module name like "app.worker"')
        elif not lenient:
            self.config.problem(path, 'missing required key "main" (or "module")')

        account = self._account_ref(w)
        vars_ = self._vars(pick("vars"))
        producers, consumers = self._worker_queues(pick("queues"), vars_, account, owner)
        return WorkerConfig(
            name=name or "",
            key_path=path,
            source=code.file.shown,
            main=main,
            module=module,
            routes=self._routes(w, owner),
            vars=MappingProxyType(vars_),
            producers=producers,
            consumers=consumers,
            account=account,
            handler_timeout_s=w.number("handler_timeout", 1, 86400, 900.0),
        )

    def _wrangler(self, w: _Table) -> _Table | None:
        value = w.get("wrangler")
        if not isinstance(value, str) or not value.endswith((".toml", ".json", ".jsonc")):
            w.expected("wrangler", "a path to a wrangler .toml, .json or .jsonc file", value)
            return None
        path = _absolute(self.config.path.parent, value)
        if not path.is_file():
            w.problem("wrangler", f"file not found: {path}")
            return None
        # Only the keys ocd reads are checked; the rest (compatibility_date, ...) is ignored.
        shown = self.config.shown.parent / value
        return _File(shown, path, self.problems, wrangler=True).read(allowed=None)

    def _main(self, code: _Table) -> Path | None:
        value = code.get("main")
        if not isinstance(value, str) or not value.endswith(".py"):
            code.expected("main", "a path to a .py file", value)
            return None
        main = _absolute(code.file.path.parent, value)
        if not main.is_file():
            code.problem("main", f"file not found: {main}")
            return None
        return main

    def _vars(self, src: _Table) -> dict[str, Any]:
        v = src.table("vars", allowed=None)
        if v is None:
            return {}
        for key, value in v.data.items():
            if not _IDENTIFIER.fullmatch(key):
                v.expected(key, f"a var {_IDENTIFIER_NAME}", key)
            elif not _is_var_value(value):
                v.expected(key, f"a string, number, boolean, array or {v.file.noun}", value)
        return dict(v.data)

    def _routes(self, w: _Table, owner: str) -> tuple[str, ...]:
        routes: list[str] = []
        for kp, route in w.items("routes"):
            if not isinstance(route, str) or not route.startswith("/"):
                self.config.expected(kp, 'a path prefix starting with "/"', route)
            elif route.startswith(RESERVED_ROUTE_PREFIXES):
                what = 'a path prefix outside "/client/v4" and "/__ocd" (reserved for ocd)'
                self.config.expected(kp, what, route)
            elif self.route_owners.setdefault(route, owner) != owner or route in routes:
                message = f'route "{route}" is already claimed by {self.route_owners[route]}'
                self.config.problem(kp, message)
            else:
                routes.append(route)
        return tuple(routes)

    def _worker_queues(
        self, src: _Table, vars_: Mapping[str, Any], account: str, owner: str
    ) -> tuple[tuple[ProducerConfig, ...], tuple[ConsumerConfig, ...]]:
        q = src.table("queues", ("producers", "consumers"))
        if q is None:
            return (), ()
        producers: dict[str, ProducerConfig] = {}  # by binding
        for kp, item in q.items("producers"):
            p = self._producer(src.file, kp, item)
            if p is None:
                continue
            if p.binding in vars_ or p.binding in producers:
                used = "a var" if p.binding in vars_ else "another producer"
                message = f'binding "{p.binding}" is already used by {used}'
                src.file.problem(f"{kp}.binding", message)
            producers.setdefault(p.binding, p)
        consumers: list[ConsumerConfig] = []
        for kp, item in q.items("consumers"):
            c = self._consumer(src.file, kp, item)
            if c is None:
                continue
            first = self.consumer_owners.setdefault((account, c.queue), (owner, kp))
            if first != (owner, kp):
                message = f'queue "{c.queue}" already has a consumer ({first[0]})'
                src.file.problem(f"{kp}.queue", message)
            consumers.append(c)
        return tuple(producers.values()), tuple(consumers)

    def _producer(self, file: _File, path: str, item: object) -> ProducerConfig | None:
        if not file.wrangler:
            p = file.table(item, path, _PRODUCER_KEYS, required=("binding", "queue"))
        else:  # "queue" defaults to the binding name, as in Miniflare
            p = file.table(item, path, _WRANGLER_PRODUCER_KEYS, required=("binding",))
        if p is None:
            return None
        binding = p.text("binding", _IDENTIFIER.fullmatch, f"a binding {_IDENTIFIER_NAME}")
        queue = p.text("queue", _NAME.fullmatch, _QUEUE_NAME) if "queue" in p else binding
        if file.wrangler and "delivery_delay" in p:
            p.number("delivery_delay", 0, 86400, 0)
            where = f"{file.shown}: {p.key_path('delivery_delay')}"
            self.warnings.append(
                f"{where}: deprecated and has no effect; set delivery_delay in [[queues]] instead"
            )
        if file.wrangler:
            p.boolean("remote", False)  # accepted; there is nothing remote here
        return ProducerConfig(binding, queue) if binding and queue else None

    def _consumer(self, file: _File, path: str, item: object) -> ConsumerConfig | None:
        keys = _WRANGLER_CONSUMER_KEYS if file.wrangler else _CONSUMER_KEYS
        c = file.table(item, path, keys, required=("queue",))
        if c is None:
            return None
        if file.wrangler and c.get("type", "worker") != "worker":
            why = 'only "worker" consumers can be configured in your Wrangler configuration'
            c.expected("type", f'"worker" ({why})', c.get("type"))
        queue = c.text("queue", _NAME.fullmatch, _QUEUE_NAME)
        dlq = c.text("dead_letter_queue", _NAME.fullmatch, _QUEUE_NAME)
        if queue is not None and dlq == queue:
            message = f'dead letter queue for queue "{queue}" cannot be itself'
            c.problem("dead_letter_queue", message)
        concurrency = None  # absent, or null in JSON: autoscale
        if c.get("max_concurrency") is not None:
            concurrency = c.integer("max_concurrency", 1, 250, 1)
        consumer = ConsumerConfig(
            queue=queue or "",
            max_batch_size=c.integer("max_batch_size", 1, 100, 10),
            max_batch_timeout_s=c.number("max_batch_timeout", 0, 60, 5.0),
            max_retries=c.integer("max_retries", 0, 100, 3),
            dead_letter_queue=dlq,
            max_concurrency=concurrency,
            retry_delay_s=c.integer("retry_delay", 0, 86400, 0),
        )
        return consumer if queue else None
