"""The config's model: frozen dataclasses a config file becomes (``ocd.config.loader`` reads
and checks the file; nothing here does I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ocd import limits
from ocd.config.bindings import AssetsConfig, IgnoredBinding
from ocd.dsn import redact_dsn

DEFAULT_LISTEN = "127.0.0.1:8787"
DEFAULT_DISK_RESERVE = 64 * 2**20
MAX_DISK_RESERVE = 2**40
LOCAL_ACCOUNT = "local"
# A FIFO queue's name ends in ".fifo" (as ocd.store's FIFO_SUFFIX: config imports nothing of
# the store), exactly once, after a standard name.
FIFO_SUFFIX = ".fifo"
RESERVED_ROUTE_PREFIXES = ("/client/v4", "/__ocd")


# A worker whose main ends in one of these is JavaScript or TypeScript and runs in workerd.
JS_EXTENSIONS = (".js", ".mjs", ".ts", ".mts", ".jsx", ".tsx")


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str
    port: int
    data_dir: Path
    durability: Literal["full", "normal"] = "full"
    shutdown_timeout_s: float = 30.0
    header_timeout_s: float = 10.0  # a request's head must arrive within this
    body_timeout_s: float = 30.0  # and its body within this
    keepalive_timeout_s: float = 60.0  # an idle kept-alive connection is closed after this
    max_connections: int | None = None  # None: derived from the descriptor limit
    # kept free for pulls and acks when the disk fills (SQLite; at most 1/8 of the volume)
    disk_reserve_bytes: int = DEFAULT_DISK_RESERVE

    @property
    def listen(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Where queue state lives. ``data_dir`` and ``durability`` are ``[server]``'s, mirrored."""

    data_dir: Path  # the SQLite database's directory
    backend: Literal["sqlite", "postgres"] = "sqlite"
    dsn: str | None = field(default=None, repr=False)  # resolved from dsn_env; may hold a password
    dsn_env: str | None = None  # the environment variable dsn was read from
    pool_size: int = 10
    node_heartbeat_s: float = 15.0
    durability: Literal["full", "normal"] = "full"

    @property
    def dsn_redacted(self) -> str | None:
        """``dsn`` with any password replaced by ``***``, for logs and error messages."""
        return None if self.dsn is None else redact_dsn(self.dsn)


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    binding: str
    queue: str


@dataclass(frozen=True, slots=True)
class KvNamespaceConfig:
    """A ``kv_namespaces`` binding: ``env.<binding>`` reads and writes namespace ``id``."""

    binding: str
    id: str


@dataclass(frozen=True, slots=True)
class D1DatabaseConfig:
    """A ``d1_databases`` binding: ``env.<binding>`` is the SQLite database
    ``<data_dir>/d1/<database_id>.sqlite``; ``ocd d1`` names it by ``database_name``."""

    binding: str
    database_name: str
    database_id: str
    migrations_dir: Path  # absolute, against the file that declared it
    migrations_table: str = "d1_migrations"


@dataclass(frozen=True, slots=True)
class R2BucketConfig:
    """An ``r2_buckets`` binding: ``env.<binding>`` reads and writes bucket ``bucket_name``,
    kept under ``<data_dir>/r2/<bucket_name>/``."""

    binding: str
    bucket_name: str


@dataclass(frozen=True, slots=True)
class DurableObjectConfig:
    """A ``durable_objects.bindings`` entry: ``env.<binding>`` is the namespace of class
    ``class_name``, defined by this worker or (``script_name``) by another JS worker."""

    binding: str
    class_name: str
    script_name: str | None = None


@dataclass(frozen=True, slots=True)
class DurableClassConfig:
    """A Durable Object class the worker defines, as its ``migrations`` leave it.
    ``storage_key`` is the class's first name: a rename keeps its objects and their ids."""

    class_name: str
    storage_key: str
    sql: bool  # created by new_sqlite_classes: ctx.storage.sql is there


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """A ``services`` binding: ``env.<binding>`` reaches worker ``service`` of the same
    config (its ``entrypoint``, a named ``WorkerEntrypoint`` export, when given)."""

    binding: str
    service: str
    entrypoint: str | None = None

    @property
    def target(self) -> str:
        return self.service if self.entrypoint is None else f"{self.service}#{self.entrypoint}"


@dataclass(frozen=True, slots=True)
class Binding:
    """One binding of a worker as the dashboard and ``ocd status`` list it."""

    kind: str  # "queue", "kv_namespace", "service", ...
    name: str  # env.<name>
    target: str  # the queue, namespace id, worker, ... it reaches


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
    wrangler: Path | None = field(default=None, kw_only=True)  # the wrangler file it reads
    main: Path | None
    module: str | None
    routes: tuple[str, ...]
    vars: Mapping[str, Any] = field(hash=False)  # read-only (MappingProxyType)
    producers: tuple[ProducerConfig, ...] = ()
    consumers: tuple[ConsumerConfig, ...] = ()
    kv_namespaces: tuple[KvNamespaceConfig, ...] = ()
    d1_databases: tuple[D1DatabaseConfig, ...] = ()
    r2_buckets: tuple[R2BucketConfig, ...] = ()
    durable_objects: tuple[DurableObjectConfig, ...] = ()
    durable_classes: tuple[DurableClassConfig, ...] = ()  # the classes it defines
    services: tuple[ServiceConfig, ...] = ()
    account: str = LOCAL_ACCOUNT
    handler_timeout_s: float = 900.0
    crons: tuple[str, ...] = ()  # cron triggers, checked by ocd.cron
    ignore_unsupported_bindings: bool = False
    ignored_bindings: tuple[IgnoredBinding, ...] = ()  # refused bindings let through
    assets: AssetsConfig | None = None  # static files served from the worker's routes
    # JavaScript and TypeScript workers (a main of JS_EXTENSIONS) run in workerd:
    runtime: Literal["python", "workerd"] = "python"
    compatibility_date: str | None = None  # None: the newest the workerd in use supports
    compatibility_flags: tuple[str, ...] = ()
    no_bundle: bool = False  # main is loaded as it is, not bundled by esbuild

    @property
    def js(self) -> bool:
        return self.runtime == "workerd"

    def bindings(self) -> tuple[Binding, ...]:
        """Every binding in ``env`` that reaches something, by kind: one line per kind."""
        return (
            *(Binding("queue", p.binding, p.queue) for p in self.producers),
            *(Binding("kv_namespace", k.binding, k.id) for k in self.kv_namespaces),
            *(Binding("d1_database", d.binding, d.database_name) for d in self.d1_databases),
            *(Binding("r2_bucket", r.binding, r.bucket_name) for r in self.r2_buckets),
            *(
                Binding("durable_object", o.binding, f"{o.script_name or self.name}#{o.class_name}")
                for o in self.durable_objects
            ),
            *(Binding("service", s.binding, s.target) for s in self.services),
        )


@dataclass(frozen=True, slots=True)
class QueueConfig:
    name: str
    account: str = LOCAL_ACCOUNT
    delivery_delay_s: int = 0
    message_retention_period_s: int = limits.RETENTION_DEFAULT_S
    delivery_paused: bool = False
    content_based_deduplication: bool = False  # FIFO queues only (names ending in ".fifo")
    deduplication_scope: str = "queue"  # FIFO queues only: or "message_group"
    declared: bool = False  # from a [[queues]] entry, not only named by a worker

    @property
    def fifo(self) -> bool:
        return self.name.endswith(FIFO_SUFFIX)


@dataclass(frozen=True, slots=True)
class SqsConfig:
    """``[sqs]``: the SQS-compatible listener (off unless the section is present)."""

    host: str
    port: int
    region: str = "us-east-1"
    public_url: str | None = None  # base of returned QueueUrls; default: the request's origin

    @property
    def listen(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class SqsKey:
    """An SQS key pair of an account: requests to the SQS endpoint signed (SigV4) with it
    act as that account. The secret comes from an env var or a file, never the config text."""

    access_key_id: str
    secret: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class AccountConfig:
    id: str
    token_sha256: tuple[str, ...]  # lowercase hex, every token of the account
    read_only_sha256: tuple[str, ...] = ()  # those of them with role = "read"
    sqs_account_id: str | None = None  # the 12-digit id SQS clients see in QueueUrls and ARNs
    sqs_keys: tuple[SqsKey, ...] = ()


@dataclass(frozen=True, slots=True)
class JsConfig:
    """``[js]``: where the JS toolchain is, when not found by itself (``ocd.js.toolchain``)."""

    workerd: str | None = None
    esbuild: str | None = None
    node: str | None = None  # evaluates cf.config.ts files


@dataclass(frozen=True, slots=True)
class UiConfig:
    """The dashboard at ``/__ocd/ui/``. ``base_path`` is where a browser reaches it (behind
    a rewriting proxy, e.g. ``/ops/__ocd/ui``): every link and asset is built from it."""

    enabled: bool = True
    read_only: bool = False
    base_path: str = "/__ocd/ui"
    search_scan_limit: int = 100_000


@dataclass(frozen=True, slots=True)
class Config:
    path: Path
    server: ServerConfig
    store: StoreConfig
    workers: tuple[WorkerConfig, ...]
    queues: tuple[QueueConfig, ...]  # every queue named anywhere, sorted by (account, name)
    accounts: tuple[AccountConfig, ...]
    warnings: tuple[str, ...] = ()
    ui: UiConfig = UiConfig()
    sqs: SqsConfig | None = None
    js: JsConfig = JsConfig()
    port_override: int | None = None  # ``--port``: a reload reads the file with it again

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
