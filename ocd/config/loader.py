"""ocd's config file (and any wrangler files it names), parsed once into frozen dataclasses.

Validation is pure: the only I/O is reading the config and wrangler files, checking that
each worker's ``main`` file exists and reading the environment variables the config names.
Worker modules are never imported and no database is opened here. Every problem found is
collected and raised together in one ConfigError. Reading files and typed access to their
tables live in ``ocd.configfile``; this module says what the keys mean.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ocd import limits
from ocd.config import cf_config, durable
from ocd.config.bindings import IgnoredBinding, assets, crons, unsupported_bindings
from ocd.config.file import (
    File,
    Table,
    absolute_path,
    is_loopback,
    parse_listen,
    read_secret_file,
)
from ocd.config.model import (
    DEFAULT_DISK_RESERVE,
    DEFAULT_LISTEN,
    FIFO_SUFFIX,
    JS_EXTENSIONS,
    LOCAL_ACCOUNT,
    MAX_DISK_RESERVE,
    RESERVED_ROUTE_PREFIXES,
    AccountConfig,
    Config,
    ConsumerConfig,
    D1DatabaseConfig,
    DurableClassConfig,
    DurableObjectConfig,
    JsConfig,
    KvNamespaceConfig,
    ProducerConfig,
    QueueConfig,
    R2BucketConfig,
    ServerConfig,
    ServiceConfig,
    SqsConfig,
    SqsKey,
    StoreConfig,
    UiConfig,
    WorkerConfig,
)
from ocd.dsn import redact_dsn
from ocd.errors import ConfigError, Problem
from ocd.names import QUEUE_NAME_RULE, is_queue_name

_SIZE = re.compile(r"\s*(\d+)\s*(B|KiB|MiB|GiB|KB|MB|GB)?\s*", re.IGNORECASE)
_UNITS = {
    "": 1,
    "b": 1,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "kb": 1000,
    "mb": 10**6,
    "gb": 10**9,
}


def load_ocd_toml(
    path: Path, environ: Mapping[str, str] | None = None, port: int | None = None
) -> Config:
    """Read and validate the ocd config file at ``path``.

    ``environ`` (default ``os.environ``) supplies ``STATE_DIRECTORY``, the default data
    directory, and the variable ``[store] dsn_env`` names; ``port`` (``--port``) replaces
    the port of ``[server] listen``. Raises ConfigError listing every problem found.
    """
    loader = _Loader(path, os.environ if environ is None else environ, port)
    return loader.checked(loader.load())


def load_wrangler_project(
    path: Path, environ: Mapping[str, str] | None = None, port: int | None = None
) -> Config:
    """A wrangler file as the whole project, as ``wrangler dev`` runs it: its one worker on
    ``127.0.0.1:8787`` (or ``port``), its data in ``.ocd/`` beside it, and its ``fetch``
    on every path (the worker has no routes, so it is the catch-all)."""
    loader = _Loader(path, os.environ if environ is None else environ, port)
    return loader.checked(loader.load({"workers": [{"wrangler": path.name}]}))


def load_cf_config(
    path: str | Path, environ: Mapping[str, str] | None = None, port: int | None = None
) -> Config:
    """A ``cf.config.ts`` (``.js``, ``.mjs``) project run on its own: ocd's defaults, and its
    Worker as if an ocd.toml said ``[[workers]] cf_config = "cf.config.ts"`` with
    ``routes = ["/"]``, listening on 127.0.0.1:8787, its port replaced by ``port``
    (``--port``), as a wrangler project is. Raises ConfigError listing every problem found."""
    path = Path(path)
    environ = os.environ if environ is None else environ
    project: dict[str, Any] = {"workers": [{"cf_config": path.name, "routes": ["/"]}]}
    loader = _Loader(path, environ, port)
    return loader.checked(loader.load(project))


_NAME = re.compile(r"[A-Za-z0-9_-]{1,63}")
_ACCOUNT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_DSN_KEYWORD = re.compile(r"(?:^|\s)(?:host|dbname)\s*=")

_QUEUE_NAME = f"a queue name ({QUEUE_NAME_RULE})"
_DEDUP_SCOPES = ("queue", "message_group")
_IDENTIFIER_NAME = "name matching [A-Za-z_][A-Za-z0-9_]*"
_ACCOUNT_REF = 'an account id ("local" or a configured [[accounts]] id)'
_DSN = 'a PostgreSQL connection string ("postgresql://..." or "host=... dbname=...")'
_DURABILITY = ("full", "normal")

_TOP_KEYS = ("server", "store", "accounts", "workers", "queues", "ui", "sqs", "js")
_JS_KEYS = ("workerd", "esbuild", "node")
_COMPAT_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_COMPAT_FLAG = re.compile(r"[a-z0-9_]{1,100}")
_UI_KEYS = ("enabled", "read_only", "base_path", "search_scan_limit")
_TOKEN_KEYS = ("sha256", "role")
_BASE_PATH = re.compile(r"(/[A-Za-z0-9._~-]+)+")
_SQS_KEYS = ("listen", "region", "public_url")
_SQS_KEY_KEYS = ("access_key_id", "secret_env", "secret_file")
_ACCESS_KEY_ID = re.compile(r"[A-Z0-9]{16,128}")
_SQS_ACCOUNT_ID = re.compile(r"[0-9]{12}")
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]+")
_SERVER_KEYS = (
    "listen",
    "data_dir",
    "durability",
    "shutdown_timeout",
    "header_timeout",
    "body_timeout",
    "keepalive_timeout",
    "max_connections",
    "disk_reserve",
)
_STORE_KEYS = ("backend", "dsn", "dsn_env", "pool_size", "node_heartbeat", "durability", "data_dir")
_ACCOUNT_KEYS = ("id", "token_sha256", "sqs_account_id", "sqs_keys")
_ACCOUNT_REQUIRED = ("id", "token_sha256")
_WORKER_KEYS = (
    "name", "main", "module", "routes", "vars", "account", "handler_timeout", "wrangler", "queues",
    "crons", "ignore_unsupported_bindings", "assets", "compatibility_date", "compatibility_flags",
    "no_bundle", "cf_config", "kv_namespaces", "d1_databases", "r2_buckets", "durable_objects",
    "migrations", "services",
)  # fmt: skip
_SERVICE_KEYS = ("binding", "service", "entrypoint")
# wrangler's: ``environment`` (of a deployed service) and ``remote`` mean nothing here
_WRANGLER_SERVICE_KEYS = (*_SERVICE_KEYS, "environment", "remote")
_KV_KEYS = ("binding", "id")
_WRANGLER_KV_KEYS = ("binding", "id", "preview_id", "remote", "experimental_remote")
_D1_KEYS = ("binding", "database_name", "database_id", "migrations_dir", "migrations_table")
_WRANGLER_D1_KEYS = (
    *_D1_KEYS, "preview_database_id", "remote", "experimental_remote", "database_internal_env",
)  # fmt: skip
_D1_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_D1_ID_NAME = "a database id (1..128 of A-Z a-z 0-9 _ . -, not starting with . _ or -)"
D1_ON_POSTGRES = 'D1 databases are a node\'s own: not available with [store] backend = "postgres"'
_R2_KEYS = ("binding", "bucket_name")
_WRANGLER_R2_KEYS = (
    "binding", "bucket_name", "preview_bucket_name", "jurisdiction", "remote",
    "experimental_remote",
)  # fmt: skip
# R2's own rule for bucket names, which also makes each a safe directory name
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")
_PRODUCER_KEYS = ("binding", "queue")
_CONSUMER_KEYS = (
    "queue", "max_batch_size", "max_batch_timeout", "max_retries", "dead_letter_queue",
    "max_concurrency", "retry_delay",
)  # fmt: skip
_QUEUE_KEYS = (
    "name", "account", "delivery_delay", "message_retention_period", "delivery_paused",
    "content_based_deduplication", "deduplication_scope",
)  # fmt: skip
# Keys wrangler accepts that ocd checks but ignores.
_WRANGLER_PRODUCER_KEYS = (*_PRODUCER_KEYS, "delivery_delay", "remote")
_WRANGLER_CONSUMER_KEYS = (*_CONSUMER_KEYS, "type", "visibility_timeout_ms")
# A worker entry key, and the wrangler key that sets the same thing.
_WRANGLER_OVERLAP = (
    ("main", "main"), ("module", "main"), ("vars", "vars"), ("queues", "queues"),
    ("assets", "assets"), ("compatibility_date", "compatibility_date"),
    ("compatibility_flags", "compatibility_flags"), ("no_bundle", "no_bundle"),
)  # fmt: skip


def parse_size(value: object) -> int | None:
    """Bytes from an integer or a string such as "16MiB", "512 KiB", "1GB"; None if not."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if not isinstance(value, str):
        return None
    m = _SIZE.fullmatch(value)
    if m is None:
        return None
    return int(m.group(1)) * _UNITS[(m.group(2) or "").lower()]


def _disk_reserve(s: Table) -> int:
    value = s.get("disk_reserve", DEFAULT_DISK_RESERVE)
    size = parse_size(value)
    if size is None or size > MAX_DISK_RESERVE:
        what = 'a size in bytes, or a string such as "64MiB" ("0" turns the reserve off)'
        s.expected("disk_reserve", what, value)
        return DEFAULT_DISK_RESERVE
    return size


def _is_module_name(value: str) -> bool:
    return all(part.isidentifier() for part in value.split("."))


def _is_dsn(value: str) -> bool:
    return value.startswith(("postgresql://", "postgres://")) or bool(_DSN_KEYWORD.search(value))


def _is_var_value(value: object) -> bool:
    if isinstance(value, list):
        return all(_is_var_value(v) for v in value)
    if isinstance(value, dict):
        return all(_is_var_value(v) for v in value.values())
    return isinstance(value, str | int | float | bool)


class _Loader:
    """One pass over the config file; cross-entry checks keep their state here."""

    def __init__(self, file: Path, environ: Mapping[str, str], port: int | None = None) -> None:
        self.problems: list[Problem] = []
        self.config = File(file, Path(os.path.abspath(file)), self.problems, wrangler=False)
        self.environ = environ
        self.port = port
        self.warnings: list[str] = []
        self.account_ids: dict[str, str] = {}  # id -> key path of its entry
        self.token_owners: dict[str, str] = {}  # token hash -> account id
        self.sqs_account_owners: dict[str, str] = {}  # sqs_account_id -> account id
        self.sqs_key_owners: dict[str, str] = {}  # access key id -> account id
        self.worker_names: dict[str, str] = {}  # name -> key path
        self.route_owners: dict[str, str] = {}  # route -> worker
        self.consumer_owners: dict[tuple[str, str], tuple[str, str]] = {}  # -> (worker, key path)
        self.declared_queues: dict[tuple[str, str], str] = {}  # (account, name) -> key path
        self.service_refs: list[_ServiceRef] = []  # checked once every worker is known
        self.js = JsConfig()
        self.backend = "sqlite"  # [store] backend, read before the workers: D1, R2, DOs need it
        self.durable_sites: list[durable.BindingSite] = []

    def checked(self, config: Config | None) -> Config:
        if self.problems or config is None:
            raise ConfigError(self.problems)
        return config

    def load(self, project: dict[str, Any] | None = None) -> Config | None:
        """The config file, or (``project``) the tables a project file stands for."""
        if project is None:
            top = self.config.read(_TOP_KEYS)
        else:
            top = self.config.table(project, "", _TOP_KEYS)
        if top is None:
            return None
        self.js = self._js(top)  # before the workers: a cf.config file needs the toolchain
        store_table = top.table("store", _STORE_KEYS)
        server = self._server(top, store_table)
        store = self._store(store_table, server) if store_table and server is not None else None
        self.backend = store.backend if store is not None else "sqlite"
        accounts = [self._account(p, item) for p, item in top.items("accounts")]
        workers = [self._worker(p, item) for p, item in top.items("workers")]
        declared = [self._queue(p, item) for p, item in top.items("queues")]
        durable.check_classes([w for w in workers if w is not None], self.durable_sites)
        ui = self._ui(top)
        sqs = self._sqs(top)
        self._check_services({w.name: w for w in workers if w is not None})
        if self.problems or server is None or store is None:
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
            store=store,
            workers=tuple(w for w in workers if w is not None),
            queues=tuple(queues[key] for key in sorted(queues)),
            accounts=tuple(a for a in accounts if a is not None),
            warnings=tuple(self.warnings),
            ui=ui,
            sqs=sqs,
            js=self.js,
            port_override=self.port,
        )

    def _js(self, top: Table) -> JsConfig:
        t = top.table("js", _JS_KEYS) if "js" in top else None
        if t is None:
            return JsConfig()
        paths = {}
        for key in _JS_KEYS:
            value = t.get(key)
            if value is not None and (not isinstance(value, str) or not value):
                t.expected(key, f"a path to the {key} binary", value)
            elif value is not None:
                paths[key] = value
        return JsConfig(**paths)

    def _sqs(self, top: Table) -> SqsConfig | None:
        if "sqs" not in top:
            return None
        s = top.table("sqs", _SQS_KEYS)
        if s is None:
            return None
        listen = s.get("listen", "127.0.0.1:9324")
        host_port = parse_listen(listen) if isinstance(listen, str) else None
        if host_port is None:
            what = '"host:port" with an IP address or "localhost" and a port 0..65535'
            s.expected("listen", what, listen)
        elif not top.get("accounts") and not is_loopback(host_port[0]):
            # Without accounts the SQS listener accepts any credentials (or none): it must
            # not leave the machine. With accounts every request must be signed (SigV4).
            what = "a loopback address when no [[accounts]] are configured"
            s.expected("listen", f"{what} (the SQS endpoint would accept any credentials)", listen)
        region = s.text("region", _REGION.fullmatch, 'an AWS region name like "us-east-1"')
        public_url = s.text(
            "public_url",
            lambda v: re.fullmatch(r"https?://[^/\s]+", v.rstrip("/")),
            'an http(s) origin like "https://sqs.example.internal"',
        )
        host, port = host_port or ("", 0)
        return SqsConfig(
            host, port, region or "us-east-1", public_url.rstrip("/") if public_url else None
        )

    def _server(self, top: Table, store: Table | None) -> ServerConfig | None:
        s = top.table("server", _SERVER_KEYS)
        if s is None:
            return None
        listen = s.get("listen", DEFAULT_LISTEN)
        host_port = parse_listen(listen) if isinstance(listen, str) else None
        if host_port is None:
            what = '"host:port" with an IP address or "localhost" and a port 0..65535'
            s.expected("listen", what, listen)
        elif not top.get("accounts") and not is_loopback(host_port[0]):
            what = "a loopback address when no [[accounts]] are configured"
            s.expected("listen", f"{what} (ocd would serve its API without authentication)", listen)
        data_dir = self._shared(s, store, "data_dir", bool, "a directory path")
        state_dir = self.environ.get("STATE_DIRECTORY", "").split(":")[0]
        durability = self._shared(
            s, store, "durability", _DURABILITY.__contains__, '"full" or "normal"'
        )
        host, port = host_port or ("", 0)
        return ServerConfig(
            host=host,
            port=port if self.port is None else self.port,
            data_dir=absolute_path(self.config.path.parent, data_dir or state_dir or ".ocd"),
            durability="normal" if durability == "normal" else "full",
            shutdown_timeout_s=s.number("shutdown_timeout", 0, 3600, 30.0),
            header_timeout_s=s.number("header_timeout", 1, 3600, 10.0),
            body_timeout_s=s.number("body_timeout", 1, 3600, 30.0),
            keepalive_timeout_s=s.number("keepalive_timeout", 1, 86400, 60.0),
            max_connections=(
                s.integer("max_connections", 16, 1_000_000, 1000)
                if "max_connections" in s
                else None
            ),
            disk_reserve_bytes=_disk_reserve(s),
        )

    def _shared(
        self, s: Table, store: Table | None, key: str, ok: Callable[[str], object], what: str
    ) -> str | None:
        """``key`` of [server], or of [store]; set in both, the two must agree."""
        value = s.text(key, ok, what)
        other = store.text(key, ok, what) if store is not None else None
        if store is None or value is None or other is None:
            return value or other
        base = self.config.path.parent
        same = (
            absolute_path(base, value) == absolute_path(base, other)
            if key == "data_dir"
            else value == other
        )
        if not same:
            store.expected(key, f'the same value as {s.key_path(key)} ("{value}")', other)
        return value

    def _store(self, st: Table, server: ServerConfig) -> StoreConfig | None:
        # _server has read data_dir and durability from here too, and checked they agree.
        backend = st.get("backend", "sqlite")
        if backend not in ("sqlite", "postgres"):
            st.expected("backend", '"sqlite" or "postgres"', backend)
            return None
        heartbeat = st.number("node_heartbeat", 1, 3600, 15.0)  # sqlite: accepted, unused
        if backend == "sqlite":
            for key in ("dsn", "dsn_env", "pool_size"):
                if key in st:
                    st.problem(key, 'only for backend = "postgres"')
            return StoreConfig(
                server.data_dir, "sqlite", None, None, 10, heartbeat, server.durability
            )
        if "data_dir" in st:  # the database lives on the PostgreSQL server
            st.problem("data_dir", 'only for backend = "sqlite"')
        dsn, dsn_env = self._dsn(st)
        pool_size = st.integer("pool_size", 1, 100, 10)
        return StoreConfig(
            server.data_dir, "postgres", dsn, dsn_env, pool_size, heartbeat, server.durability
        )

    def _dsn(self, st: Table) -> tuple[str | None, str | None]:
        """(dsn, dsn_env), the DSN read from the environment if so configured; never shown whole."""
        if "dsn" in st and "dsn_env" in st:
            st.problem("dsn_env", 'expected one of "dsn" or "dsn_env", got both')
            return None, None
        if "dsn" in st:
            dsn = st.get("dsn")
            if isinstance(dsn, str) and _is_dsn(dsn):
                return dsn, None
            st.expected("dsn", _DSN, redact_dsn(dsn) if isinstance(dsn, str) else dsn)
            return None, None
        if "dsn_env" not in st:
            message = 'missing required key "dsn" (or "dsn_env") for backend = "postgres"'
            self.config.problem(st.path, message)
            return None, None
        what = f"an environment variable {_IDENTIFIER_NAME}"
        name = st.text("dsn_env", _IDENTIFIER.fullmatch, what)
        if name is None:
            return None, None
        value = self.environ.get(name, "")
        if not value:
            unset = "empty" if name in self.environ else "not set"
            st.problem("dsn_env", f'environment variable "{name}" is {unset}')
            return None, name
        if not _is_dsn(value):
            st.expected(
                "dsn_env", f'environment variable "{name}" to hold {_DSN}', redact_dsn(value)
            )
            return None, name
        return value, name

    def _account(self, path: str, item: object) -> AccountConfig | None:
        a = self.config.table(item, path, _ACCOUNT_KEYS, required=_ACCOUNT_REQUIRED)
        if a is None:
            return None
        account_id = a.text("id", _ACCOUNT_ID.fullmatch, "an account id (1..64 of A-Z a-z 0-9 _ -)")
        first = self.account_ids.setdefault(account_id, path) if account_id else path
        if first != path:
            a.problem("id", f'account "{account_id}" is already declared by {first}')
        hashes: list[str] = []
        read_only: list[str] = []
        for kp, entry in a.items("token_sha256"):
            digest: object = entry
            if isinstance(entry, dict):  # { sha256 = "...", role = "read" }
                t = self.config.table(entry, kp, _TOKEN_KEYS, required=("sha256",))
                digest = entry.get("sha256")
                role = entry.get("role", "admin")
                if t is not None and role not in ("admin", "read"):
                    t.expected("role", '"admin" or "read"', role)
                if role == "read" and isinstance(digest, str):
                    read_only.append(digest.lower())
                kp = f"{kp}.sha256"
            if not (isinstance(digest, str) and _SHA256.fullmatch(digest)):
                self.config.expected(kp, "a SHA-256 hex digest (64 hex digits)", digest)
                continue
            owner = self.token_owners.setdefault(digest.lower(), account_id or path)
            if owner != (account_id or path):
                self.config.problem(kp, f'this token is already listed for account "{owner}"')
            hashes.append(digest.lower())
        sqs_id, keys = self._sqs_identity(a, account_id or path)
        if not account_id:
            return None
        return AccountConfig(account_id, tuple(hashes), tuple(read_only), sqs_id, keys)

    def _sqs_identity(self, a: Table, owner: str) -> tuple[str | None, tuple[SqsKey, ...]]:
        """An account's ``sqs_account_id`` and ``sqs_keys``, each unique across accounts."""
        sqs_id = a.text("sqs_account_id", _SQS_ACCOUNT_ID.fullmatch, "a 12-digit AWS account id")
        if sqs_id == "000000000000":
            a.problem("sqs_account_id", "000000000000 is the account id of account local")
        elif sqs_id is not None:
            first = self.sqs_account_owners.setdefault(sqs_id, owner)
            if first != owner:
                a.problem("sqs_account_id", f'{sqs_id} is already the id of account "{first}"')
        keys: list[SqsKey] = []
        for kp, entry in a.items("sqs_keys"):
            k = self.config.table(entry, kp, _SQS_KEY_KEYS, required=("access_key_id",))
            if k is None:
                continue
            key_id = k.text(
                "access_key_id", _ACCESS_KEY_ID.fullmatch, "an access key id (16..128 of A-Z 0-9)"
            )
            secret = self._secret(k)
            if key_id is not None:
                first = self.sqs_key_owners.setdefault(key_id, owner)
                if first != owner:
                    k.problem("access_key_id", f'this key is already listed for account "{first}"')
            if key_id is not None and secret is not None:
                keys.append(SqsKey(key_id, secret))
        if keys and sqs_id is None and "sqs_account_id" not in a:
            a.problem("sqs_keys", 'an account with sqs_keys needs "sqs_account_id" too')
        return sqs_id, tuple(keys)

    def _secret(self, k: Table) -> str | None:
        """An SQS key's secret, from ``secret_env`` or ``secret_file`` (exactly one)."""
        if ("secret_env" in k) == ("secret_file" in k):
            self.config.problem(k.path, 'expected exactly one of "secret_env" or "secret_file"')
            return None
        if "secret_env" in k:
            what = f"an environment variable {_IDENTIFIER_NAME}"
            name = k.text("secret_env", _IDENTIFIER.fullmatch, what)
            if name is None:
                return None
            value = self.environ.get(name, "")
            if not value:
                unset = "empty" if name in self.environ else "not set"
                k.problem("secret_env", f'environment variable "{name}" is {unset}')
                return None
            return value
        path_text = k.text("secret_file", bool, "a file path")
        if path_text is None:
            return None
        try:
            return read_secret_file(absolute_path(self.config.path.parent, path_text))
        except ValueError as e:
            k.problem("secret_file", str(e))
            return None

    def _ui(self, top: Table) -> UiConfig:
        u = top.table("ui", _UI_KEYS)
        if u is None:
            return UiConfig()
        what = 'a URL path like "/__ocd/ui" or "/ops/ocd" (no trailing "/")'
        base = u.text("base_path", _BASE_PATH.fullmatch, what)
        return UiConfig(
            enabled=u.boolean("enabled", True),
            read_only=u.boolean("read_only", False),
            base_path=base or "/__ocd/ui",
            search_scan_limit=u.integer("search_scan_limit", 1, 10_000_000, 100_000),
        )

    def _account_ref(self, t: Table) -> str:
        account = t.get("account", LOCAL_ACCOUNT)
        if account != LOCAL_ACCOUNT and account not in self.account_ids:
            t.expected("account", _ACCOUNT_REF, account)
        return account if isinstance(account, str) else LOCAL_ACCOUNT

    def _queue(self, path: str, item: object) -> QueueConfig | None:
        q = self.config.table(item, path, _QUEUE_KEYS, required=("name",))
        if q is None:
            return None
        name = q.text("name", is_queue_name, _QUEUE_NAME)
        account = self._account_ref(q)
        first = self.declared_queues.setdefault((account, name), path) if name else path
        if first != path:
            where = "" if account == LOCAL_ACCOUNT else f' in account "{account}"'
            q.problem("name", f'queue "{name}"{where} is already declared by {first}')
        return QueueConfig(
            name=name or "",
            account=account,
            delivery_delay_s=q.integer("delivery_delay", *limits.DELAY_S, 0),
            message_retention_period_s=q.integer(
                "message_retention_period", *limits.RETENTION_S, limits.RETENTION_DEFAULT_S
            ),
            delivery_paused=q.boolean("delivery_paused", False),
            **self._fifo_settings(q, name),
            declared=True,
        )

    def _fifo_settings(self, q: Table, name: str | None) -> dict[str, Any]:
        """A [[queues]] entry's FIFO settings; on a standard queue only their defaults."""
        content = q.boolean("content_based_deduplication", False)
        scope = q.get("deduplication_scope", "queue")
        if scope not in _DEDUP_SCOPES:
            q.expected("deduplication_scope", '"queue" or "message_group"', scope)
            scope = "queue"
        if name is not None and not name.endswith(FIFO_SUFFIX):
            for key, value, default in (
                ("content_based_deduplication", content, False),
                ("deduplication_scope", scope, "queue"),
            ):
                if value != default:
                    q.problem(
                        key,
                        f'only valid on FIFO queues (names ending in ".fifo"); "{name}" is a '
                        "standard queue",
                    )
        return {"content_based_deduplication": content, "deduplication_scope": scope}

    def _worker(self, path: str, item: object) -> WorkerConfig | None:
        w = self.config.table(item, path, _WORKER_KEYS)
        if w is None:
            return None
        project = "wrangler" if "wrangler" in w else "cf_config" if "cf_config" in w else None
        if "wrangler" in w and "cf_config" in w:
            w.problem("cf_config", 'expected one of "wrangler" or "cf_config", got both')
        wrangler = None
        if project == "wrangler":
            wrangler = self._wrangler(w)
        elif project == "cf_config":
            wrangler = self._cf_config(w)
        lenient = project is not None and wrangler is None  # a broken file: no "missing" too

        def pick(key: str) -> Table:
            return wrangler if wrangler is not None and key in wrangler else w

        for key, wkey in _WRANGLER_OVERLAP:
            if wrangler is not None and key in w and wkey in wrangler:
                w.problem(key, f'"{wkey}" is already set in {wrangler.file.shown}; set it once')
        named = w if "name" in w or wrangler is None else wrangler  # the entry may override
        name = named.text("name", _NAME.fullmatch, "a worker name (1..63 of A-Z a-z 0-9 _ -)")
        if "name" not in named and not lenient:
            self._missing(path, wrangler, "name")
        first = self.worker_names.setdefault(name, path) if name else path
        if first != path:
            named.problem("name", f'worker "{name}" is already declared by {first}')
        owner = f'worker "{name}"' if name else path

        code = pick("main")
        main, module = None, None
        js = isinstance(code.get("main"), str) and code.get("main").endswith(JS_EXTENSIONS)
        if "main" in w and "module" in w:
            w.problem("module", 'expected one of "main" or "module", got both')
        elif "main" in code:
            main = self._main(code)
        elif "module" in w:
            module = w.text("module", _is_module_name, 'a dotted module name like "app.worker"')
        elif not lenient:
            self._missing(path, wrangler, "main")

        account = self._account_ref(w)
        vars_ = self._vars(pick("vars"))
        producers, consumers = self._worker_queues(pick("queues"), vars_, account, owner)
        kv = self._kv_namespaces(pick("kv_namespaces"), vars_, producers)
        bound = set(vars_) | {p.binding for p in producers} | {k.binding for k in kv}
        d1 = self._d1_databases(pick("d1_databases"), bound)
        bound |= {d.binding for d in d1}
        r2 = self._r2_buckets(pick("r2_buckets"), js, bound)
        bound |= {b.binding for b in r2}
        objects, classes = self._durable_objects(pick, js, name or "", bound)
        bound |= {o.binding for o in objects}
        services = self._services(pick("services"), bound, (name or "", account), js)
        static = assets(pick("assets"))
        bound |= {s.binding for s in services}
        if static is not None and static.binding in bound:
            src = pick("assets")
            message = f'binding "{static.binding}" is already used by a var or another binding'
            src.file.problem(f"{src.key_path('assets')}.binding", message)
        ignore = w.boolean("ignore_unsupported_bindings", False)
        ignored: list[IgnoredBinding] = []
        schedules = crons(w, "crons")
        if wrangler is not None:
            ignored = unsupported_bindings(wrangler, ignore, self.warnings, js)
            triggers = wrangler.table("triggers", ("crons",))
            if triggers is not None and "crons" in triggers:
                if "crons" in w:
                    where = wrangler.file.shown
                    w.problem("crons", f'"triggers.crons" is already set in {where}; set it once')
                schedules = crons(triggers, "crons")
        return WorkerConfig(
            name=name or "",
            key_path=path,
            source=code.file.shown,
            wrangler=None if wrangler is None else wrangler.file.shown,
            main=main,
            module=module,
            routes=self._routes(w, owner),
            vars=MappingProxyType(vars_),
            producers=producers,
            consumers=consumers,
            kv_namespaces=kv,
            d1_databases=d1,
            r2_buckets=r2,
            durable_objects=objects,
            durable_classes=classes,
            services=services,
            account=account,
            handler_timeout_s=w.number("handler_timeout", 1, 86400, 900.0),
            crons=tuple(schedules),
            ignore_unsupported_bindings=ignore,
            ignored_bindings=tuple(ignored),
            assets=static,
            **(self._js_worker(pick, wrangler) if js else {}),
        )

    def _durable_objects(
        self,
        pick: Callable[[str], Table],
        js: bool,
        worker: str,
        taken: set[str],
    ) -> tuple[tuple[DurableObjectConfig, ...], tuple[DurableClassConfig, ...]]:
        """A worker's Durable Object bindings and the classes its migrations define."""
        src = pick("durable_objects")
        if not js:  # a wrangler file's are refused with its other unsupported bindings
            if not src.file.wrangler:
                durable.refuse(src, durable.PYTHON)
            return (), ()
        if self.backend == "postgres":
            durable.refuse(src, durable.POSTGRES)
            return (), ()
        objects = durable.bindings(src, taken, self.durable_sites, worker)
        return objects, durable.classes(pick("migrations"))

    def _missing(self, path: str, wrangler: Table | None, key: str) -> None:
        what = f'"{key}"' if key == "name" else '"main" (or "module")'
        if wrangler is None:
            self.config.problem(path, f"missing required key {what}")
        else:  # where wrangler users set it
            wrangler.file.problem("", f'missing required key "{key}"')

    def _js_worker(self, pick: Callable[[str], Table], wrangler: Table | None) -> dict[str, Any]:
        """A JS/TS worker's own keys: compatibility date and flags, no_bundle. Without a
        date the worker runs on the newest one the workerd in use supports, as ``wrangler
        dev`` does (``ocd.js.host`` resolves it), with a warning."""
        src = pick("compatibility_date")
        date = src.get("compatibility_date")
        if date is None:
            where = wrangler or src  # a wrangler project sets it in its wrangler file
            self.warnings.append(
                f"{where.file.shown}: {where.key_path('compatibility_date')}: not set; the worker "
                "runs on the newest date the installed workerd supports (as wrangler dev does); "
                'set e.g. compatibility_date = "2026-11-01" to keep it stable'
            )
        elif not isinstance(date, str) or not _COMPAT_DATE.fullmatch(date):
            src.expected("compatibility_date", 'a date such as "2026-11-01"', date)
            date = None
        flags_src = pick("compatibility_flags")
        flags: list[str] = []
        for kp, flag in flags_src.items("compatibility_flags"):
            if not isinstance(flag, str) or not _COMPAT_FLAG.fullmatch(flag):
                flags_src.file.expected(kp, 'a compatibility flag such as "nodejs_compat"', flag)
            else:
                flags.append(flag)
        return {
            "runtime": "workerd",
            "compatibility_date": date,
            "compatibility_flags": tuple(flags),
            "no_bundle": pick("no_bundle").boolean("no_bundle", False),
        }

    def _wrangler(self, w: Table) -> Table | None:
        value = w.get("wrangler")
        if not isinstance(value, str) or not value.endswith((".toml", ".json", ".jsonc")):
            w.expected("wrangler", "a path to a wrangler .toml, .json or .jsonc file", value)
            return None
        path = absolute_path(self.config.path.parent, value)
        if not path.is_file():
            w.problem("wrangler", f"file not found: {path}")
            return None
        # Only the keys ocd reads are checked; the rest (compatibility_date, ...) is ignored.
        shown = self.config.shown.parent / value
        return File(shown, path, self.problems, wrangler=True).read(allowed=None)

    def _cf_config(self, w: Table) -> Table | None:
        value = w.get("cf_config")
        if not isinstance(value, str) or not cf_config.is_cf_config(value):
            what = "a path to a " + ", ".join(cf_config.NAMES) + " file"
            w.expected("cf_config", what, value)
            return None
        path = absolute_path(self.config.path.parent, value)
        if not path.is_file():
            w.problem("cf_config", f"file not found: {path}")
            return None
        shown = self.config.shown.parent / value
        return cf_config.read(shown, path, self.problems, self.js, self.environ)

    def _main(self, code: Table) -> Path | None:
        value = code.get("main")
        if not isinstance(value, str) or not value.endswith((".py", *JS_EXTENSIONS)):
            what = "a path to a .py file, or a .js, .mjs, .ts, .mts, .jsx or .tsx file"
            code.expected("main", what, value)
            return None
        main = absolute_path(code.file.path.parent, value)
        if not main.is_file():
            code.problem("main", f"file not found: {main}")
            return None
        return main

    def _vars(self, src: Table) -> dict[str, Any]:
        v = src.table("vars", allowed=None)
        if v is None:
            return {}
        for key, value in v.data.items():
            if not _IDENTIFIER.fullmatch(key):
                v.expected(key, f"a var {_IDENTIFIER_NAME}", key)
            elif not _is_var_value(value):
                v.expected(key, f"a string, number, boolean, array or {v.file.noun}", value)
        return dict(v.data)

    def _routes(self, w: Table, owner: str) -> tuple[str, ...]:
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
        self, src: Table, vars_: Mapping[str, Any], account: str, owner: str
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

    def _kv_namespaces(
        self, src: Table, vars_: Mapping[str, Any], producers: tuple[ProducerConfig, ...]
    ) -> tuple[KvNamespaceConfig, ...]:
        """``kv_namespaces``: each a binding and a namespace id (in a wrangler file the id
        may be left out, as ``wrangler dev`` allows: the binding's name is the id)."""
        out: list[KvNamespaceConfig] = []
        keys = _WRANGLER_KV_KEYS if src.file.wrangler else _KV_KEYS
        required = ("binding",) if src.file.wrangler else ("binding", "id")
        for kp, item in src.items("kv_namespaces"):
            t = src.file.table(item, kp, keys, required=required)
            if t is None:
                continue
            binding = t.text("binding", _IDENTIFIER.fullmatch, f"a binding {_IDENTIFIER_NAME}")
            ns_id = t.text("id", _is_kv_id, "a namespace id (1..255 characters, no spaces)")
            if src.file.wrangler:
                t.boolean("remote", False)  # accepted; there is nothing remote here
                t.boolean("experimental_remote", False)
                t.get("preview_id")  # wrangler dev's; ocd has one namespace per id
            if not binding:
                continue
            used = (
                "a var" if binding in vars_
                else "a producer" if any(p.binding == binding for p in producers)
                else "another KV namespace" if any(k.binding == binding for k in out)
                else None
            )  # fmt: skip
            if used is not None:
                src.file.problem(f"{kp}.binding", f'binding "{binding}" is already used by {used}')
                continue
            if "id" not in t:
                ns_id = binding
            if ns_id:
                out.append(KvNamespaceConfig(binding, ns_id))
        return tuple(out)

    def _d1_databases(self, src: Table, taken: set[str]) -> tuple[D1DatabaseConfig, ...]:
        """``d1_databases``: a binding and its database; in a wrangler file the id and the
        name may be left out as ``wrangler dev`` allows (each falls back to the other, then
        to the binding)."""
        out: list[D1DatabaseConfig] = []
        if "d1_databases" in src and self.backend == "postgres":
            src.problem("d1_databases", D1_ON_POSTGRES)
            return ()
        keys = _WRANGLER_D1_KEYS if src.file.wrangler else _D1_KEYS
        required = ("binding",) if src.file.wrangler else ("binding", "database_id")
        for kp, item in src.items("d1_databases"):
            t = src.file.table(item, kp, keys, required=required)
            if t is None:
                continue
            binding = t.text("binding", _IDENTIFIER.fullmatch, f"a binding {_IDENTIFIER_NAME}")
            db_id = t.text("database_id", _D1_ID.fullmatch, _D1_ID_NAME)
            name = t.text("database_name", bool, "a database name")
            migrations = t.text("migrations_dir", bool, "a directory")
            table = t.text("migrations_table", _IDENTIFIER.fullmatch, "a table name")
            if src.file.wrangler:
                t.boolean("remote", False)  # accepted; there is nothing remote here
                t.boolean("experimental_remote", False)
                t.get("preview_database_id")  # wrangler dev's; ocd has one database per id
            if not binding:
                continue
            if binding in taken or any(d.binding == binding for d in out):
                src.file.problem(f"{kp}.binding", f'binding "{binding}" is already used')
                continue
            if "database_id" not in t:
                db_id = name if name and _D1_ID.fullmatch(name) else binding
            if not db_id:
                continue
            base = src.file.path.parent
            out.append(
                D1DatabaseConfig(
                    binding,
                    name or db_id,
                    db_id,
                    absolute_path(base, migrations or "migrations"),
                    table or "d1_migrations",
                )
            )
        return tuple(out)

    def _r2_buckets(self, src: Table, js: bool, taken: set[str]) -> tuple[R2BucketConfig, ...]:
        """``r2_buckets``: each a binding and a bucket name. A bucket's objects are files on
        this node, so neither a PostgreSQL store (shared by nodes) nor a Python worker (no
        binding yet) gets one; both are refused here, not at the first call."""
        out: list[R2BucketConfig] = []
        keys = _WRANGLER_R2_KEYS if src.file.wrangler else _R2_KEYS
        for kp, item in src.items("r2_buckets"):
            if self.backend == "postgres":
                src.file.problem(
                    kp,
                    'R2 buckets are a node\'s own: not available with [store] backend = "postgres"',
                )
                continue
            if not js:
                src.file.problem(
                    kp, "R2 buckets are bound for JavaScript/TypeScript workers only, not Python"
                )
                continue
            t = src.file.table(item, kp, keys, required=("binding", "bucket_name"))
            if t is None:
                continue
            binding = t.text("binding", _IDENTIFIER.fullmatch, f"a binding {_IDENTIFIER_NAME}")
            bucket = t.text(
                "bucket_name",
                _BUCKET_NAME.fullmatch,
                "an R2 bucket name (3..63 of a-z 0-9 -, starting and ending with a letter or "
                "digit)",
            )
            if src.file.wrangler:
                t.boolean("remote", False)  # accepted; there is nothing remote here
                t.boolean("experimental_remote", False)
                t.get("preview_bucket_name")  # wrangler dev's; ocd has one bucket per name
                t.get("jurisdiction")
            if not binding or not bucket:
                continue
            if binding in taken or any(b.binding == binding for b in out):
                src.file.problem(f"{kp}.binding", f'binding "{binding}" is already used')
                continue
            out.append(R2BucketConfig(binding, bucket))
        return tuple(out)

    def _services(
        self, src: Table, taken: set[str], owner: tuple[str, str], js: bool
    ) -> tuple[ServiceConfig, ...]:
        """``services``: each a binding to another worker of this config (which one exists
        is checked once all are read, ``_check_services``)."""
        out: list[ServiceConfig] = []
        keys = _WRANGLER_SERVICE_KEYS if src.file.wrangler else _SERVICE_KEYS
        for kp, item in src.items("services"):
            t = src.file.table(item, kp, keys, required=("binding", "service"))
            if t is None:
                continue
            binding = t.text("binding", _IDENTIFIER.fullmatch, f"a binding {_IDENTIFIER_NAME}")
            target = t.text("service", _NAME.fullmatch, "a worker name (1..63 of A-Z a-z 0-9 _ -)")
            entrypoint = t.text("entrypoint", _IDENTIFIER.fullmatch, "an exported class name")
            if src.file.wrangler:
                t.boolean("remote", False)  # accepted; there is nothing remote here
                t.text("environment", bool, "an environment name")
            if not binding or not target:
                continue
            if binding in taken or any(s.binding == binding for s in out):
                message = f'binding "{binding}" is already used by a var or another binding'
                src.file.problem(f"{kp}.binding", message)
                continue
            service = ServiceConfig(binding, target, entrypoint)
            self.service_refs.append(_ServiceRef(src.file, kp, *owner, js, service))
            out.append(service)
        return tuple(out)

    def _check_services(self, workers: Mapping[str, WorkerConfig]) -> None:
        """Each service binding names a worker of this config, in a way ocd can reach it:
        JavaScript to JavaScript natively in workerd (fetch, RPC, named entrypoints); from
        or to a Python worker through ``ocd.services``, its fetch only."""
        for ref in self.service_refs:
            s = ref.service
            target = workers.get(s.service)
            if target is None and s.service not in self.worker_names:
                known = ", ".join(f'"{n}"' for n in sorted(self.worker_names)) or "none"
                ref.file.problem(
                    f"{ref.key_path}.service",
                    f'no worker named "{s.service}" in this config (its workers: {known}); a '
                    "service binding reaches another worker ocd runs",
                )
            elif target is not None and target.account != ref.account:
                ref.file.problem(
                    f"{ref.key_path}.service",
                    f'worker "{s.service}" is in account "{target.account}", not in '
                    f'"{ref.account}" as worker "{ref.owner}" is: a service binding stays '
                    "within its account",
                )
            elif not ref.js and s.entrypoint is not None:
                ref.file.problem(
                    f"{ref.key_path}.entrypoint",
                    f'service binding "{s.binding}" of Python worker "{ref.owner}": a Python '
                    "worker's service binding reaches the other worker's fetch only; named "
                    "entrypoints and RPC are for JavaScript workers",
                )
            elif target is not None and not target.js and s.entrypoint is not None:
                ref.file.problem(
                    f"{ref.key_path}.entrypoint",
                    f'worker "{s.service}" is a Python worker: a service binding reaches its '
                    "fetch handler only, not a named entrypoint",
                )

    def _producer(self, file: File, path: str, item: object) -> ProducerConfig | None:
        if not file.wrangler:
            p = file.table(item, path, _PRODUCER_KEYS, required=("binding", "queue"))
        else:  # "queue" defaults to the binding name, as in Miniflare
            p = file.table(item, path, _WRANGLER_PRODUCER_KEYS, required=("binding",))
        if p is None:
            return None
        binding = p.text("binding", _IDENTIFIER.fullmatch, f"a binding {_IDENTIFIER_NAME}")
        if "queue" in p:
            queue = p.text("queue", is_queue_name, _QUEUE_NAME)
        else:  # Miniflare's default: the binding's name
            queue = binding
            if binding and file.wrangler and not is_queue_name(binding):
                what = f'"queue" (the binding name "{binding}" is not {_QUEUE_NAME})'
                file.problem(path, f"missing required key {what}")
                queue = None
        if file.wrangler and "delivery_delay" in p:
            p.number("delivery_delay", *limits.DELAY_S, 0)
            where = f"{file.shown}: {p.key_path('delivery_delay')}"
            self.warnings.append(
                f"{where}: deprecated and has no effect; set delivery_delay in [[queues]] instead"
            )
        if file.wrangler:
            p.boolean("remote", False)  # accepted; there is nothing remote here
        return ProducerConfig(binding, queue) if binding and queue else None

    def _consumer(self, file: File, path: str, item: object) -> ConsumerConfig | None:
        keys = _WRANGLER_CONSUMER_KEYS if file.wrangler else _CONSUMER_KEYS
        c = file.table(item, path, keys, required=("queue",))
        if c is None:
            return None
        if file.wrangler and c.get("type", "worker") != "worker":
            why = 'only "worker" consumers can be configured in your Wrangler configuration'
            c.expected("type", f'"worker" ({why})', c.get("type"))
        queue = c.text("queue", is_queue_name, _QUEUE_NAME)
        dlq = c.text("dead_letter_queue", is_queue_name, _QUEUE_NAME)
        if queue is not None and dlq == queue:
            message = f'dead letter queue for queue "{queue}" cannot be itself'
            c.problem("dead_letter_queue", message)
        elif queue and dlq and queue.endswith(FIFO_SUFFIX) != dlq.endswith(FIFO_SUFFIX):
            kind = "FIFO" if queue.endswith(FIFO_SUFFIX) else "standard"
            rule = 'a name ending in ".fifo"' if kind == "FIFO" else 'not ending in ".fifo"'
            what = f'a {kind} queue ({rule}) as the dead letter queue of the {kind} queue "{queue}"'
            c.expected("dead_letter_queue", what, dlq)
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
            retry_delay_s=c.integer("retry_delay", *limits.DELAY_S, 0),
        )
        return consumer if queue else None


@dataclass(frozen=True, slots=True)
class _ServiceRef:
    """A service binding, where it was written, for the checks that need every worker."""

    file: File
    key_path: str
    owner: str  # the binding's worker
    account: str  # and its account
    js: bool  # whether that worker runs in workerd
    service: ServiceConfig


def _is_kv_id(value: str) -> bool:
    return 0 < len(value) <= 255 and value.isprintable() and not any(c.isspace() for c in value)
