"""The config file: its model (``model``), the loader that reads and checks it
(``loader``: every problem with file, key path, expected and got), the TOML and wrangler
file readers (``file``) and the wrangler binding checks (``bindings``)."""

from ocd.config.bindings import AssetsConfig, IgnoredBinding
from ocd.config.loader import load_cf_config, parse_size
from ocd.config.model import (
    DEFAULT_DISK_RESERVE,
    DEFAULT_LISTEN,
    JS_EXTENSIONS,
    LOCAL_ACCOUNT,
    RESERVED_ROUTE_PREFIXES,
    AccountConfig,
    Binding,
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
from ocd.config.project import PROJECT_FILES, find_project, load_config
from ocd.dsn import redact_dsn

__all__ = [
    "DEFAULT_DISK_RESERVE",
    "DEFAULT_LISTEN",
    "JS_EXTENSIONS",
    "LOCAL_ACCOUNT",
    "PROJECT_FILES",
    "RESERVED_ROUTE_PREFIXES",
    "AccountConfig",
    "AssetsConfig",
    "Binding",
    "Config",
    "ConsumerConfig",
    "D1DatabaseConfig",
    "DurableClassConfig",
    "DurableObjectConfig",
    "IgnoredBinding",
    "JsConfig",
    "KvNamespaceConfig",
    "ProducerConfig",
    "QueueConfig",
    "R2BucketConfig",
    "ServerConfig",
    "ServiceConfig",
    "SqsConfig",
    "SqsKey",
    "StoreConfig",
    "UiConfig",
    "WorkerConfig",
    "find_project",
    "load_cf_config",
    "load_config",
    "parse_size",
    "redact_dsn",
]
