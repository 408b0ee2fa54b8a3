"""ocd.config: every rule a user can break is reported with file, key path, expected and got."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import MappingProxyType

import pytest

from ocd.config import (
    DEFAULT_LISTEN,
    AccountConfig,
    Config,
    ConsumerConfig,
    ProducerConfig,
    QueueConfig,
    ServerConfig,
    StoreConfig,
    WorkerConfig,
    load_config,
    redact_dsn,
)
from ocd.errors import ConfigError
from ocd.names import QUEUE_NAME_RULE as QN

HASH = "ab" * 32
QUEUE_NAME_RULE = 'a queue name (1..63 of A-Z a-z 0-9 _ -, then ".fifo" for a FIFO queue)'
WORKER = """
[[workers]]
name = "app"
main = "app/worker.py"
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A directory with app/worker.py, where tests write ocd.toml."""
    write(tmp_path / "app" / "worker.py", "")
    return tmp_path


def load(root: Path, text: str, **environ: str) -> Config:
    return load_config(write(root / "ocd.toml", text), environ)


def problems(root: Path, text: str, **environ: str) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        load(root, text, **environ)
    return [(p.key_path, p.message) for p in info.value.problems]


# --- valid configs ---------------------------------------------------------------------------


def test_full_config_round_trips_into_dataclasses(root: Path) -> None:
    config = load(
        root,
        f"""
        [server]
        listen = "0.0.0.0:9000"
        data_dir = "/var/lib/ocd"
        durability = "normal"
        shutdown_timeout = 10

        [[accounts]]
        id = "acme"
        token_sha256 = ["{HASH.upper()}"]

        [[workers]]
        name = "queue-app"
        main = "app/worker.py"
        routes = ["/", "/api"]
        vars = {{ GREETING = "hi", LIMITS = {{ max = 3 }}, TAGS = ["a", 1, true, 2.5] }}
        account = "acme"
        handler_timeout = 60

        [[workers.queues.producers]]
        binding = "QUEUE"
        queue = "jobs"

        [[workers.queues.consumers]]
        queue = "jobs"
        max_batch_size = 50
        max_batch_timeout = 0.5
        max_retries = 0
        dead_letter_queue = "jobs-dlq"
        max_concurrency = 2
        retry_delay = 30

        [[workers]]
        name = "minimal"
        module = "app.other"

        [[workers.queues.consumers]]
        queue = "other"

        [[queues]]
        name = "jobs"
        account = "acme"
        delivery_delay = 5
        message_retention_period = 60
        delivery_paused = true
        """,
    )
    assert config.path == root / "ocd.toml"
    assert config.server == ServerConfig(
        host="0.0.0.0",
        port=9000,
        data_dir=Path("/var/lib/ocd"),
        durability="normal",
        shutdown_timeout_s=10.0,
    )
    assert config.accounts == (AccountConfig("acme", (HASH,)),)
    assert config.workers == (
        WorkerConfig(
            name="queue-app",
            key_path="workers[0]",
            source=root / "ocd.toml",
            main=root / "app" / "worker.py",
            module=None,
            routes=("/", "/api"),
            vars=MappingProxyType(
                {"GREETING": "hi", "LIMITS": {"max": 3}, "TAGS": ["a", 1, True, 2.5]}
            ),
            producers=(ProducerConfig("QUEUE", "jobs"),),
            consumers=(
                ConsumerConfig(
                    queue="jobs",
                    max_batch_size=50,
                    max_batch_timeout_s=0.5,
                    max_retries=0,
                    dead_letter_queue="jobs-dlq",
                    max_concurrency=2,
                    retry_delay_s=30,
                ),
            ),
            account="acme",
            handler_timeout_s=60.0,
        ),
        WorkerConfig(
            name="minimal",
            key_path="workers[1]",
            source=root / "ocd.toml",
            main=None,
            module="app.other",
            routes=(),
            vars=MappingProxyType({}),
            producers=(),
            consumers=(ConsumerConfig(queue="other"),),
        ),
    )
    assert config.queues == (
        QueueConfig("jobs", "acme", 5, 60, True, declared=True),
        QueueConfig("jobs-dlq", "acme"),
        QueueConfig("other", "local"),
    )
    assert config.warnings == ()


def test_empty_config_uses_defaults(root: Path) -> None:
    config = load(root, "")
    assert config.server == ServerConfig("127.0.0.1", 8787, root / ".ocd", "full", 30.0)
    assert config.server.listen == DEFAULT_LISTEN
    assert config.store == StoreConfig(root / ".ocd")
    assert (config.workers, config.queues, config.accounts) == ((), (), ())


def test_consumer_defaults_match_cloudflare(root: Path) -> None:
    config = load(root, WORKER + "[[workers.queues.consumers]]\nqueue = 'jobs'\n")
    consumer = config.workers[0].consumers[0]
    assert (consumer.max_batch_size, consumer.max_batch_timeout_s, consumer.max_retries) == (
        10,
        5.0,
        3,
    )
    assert (consumer.dead_letter_queue, consumer.max_concurrency, consumer.retry_delay_s) == (
        None,
        None,
        0,
    )
    assert config.workers[0].handler_timeout_s == 900.0
    assert config.queue("jobs") == QueueConfig("jobs", "local", 0, 345_600, False, False)


def test_data_dir_defaults_to_first_state_directory(root: Path) -> None:
    config = load(root, "", STATE_DIRECTORY="/var/lib/ocd:/var/lib/other")
    assert config.server.data_dir == Path("/var/lib/ocd")


def test_state_directory_is_read_from_the_process_environment_by_default(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATE_DIRECTORY", "/var/lib/ocd")
    config = load_config(write(root / "ocd.toml", ""))
    assert config.server.data_dir == Path("/var/lib/ocd")


def test_data_dir_setting_beats_state_directory(root: Path) -> None:
    config = load(root, "[server]\ndata_dir = 'here'\n", STATE_DIRECTORY="/var/lib/ocd")
    assert config.server.data_dir == root / "here"


def test_relative_paths_resolve_against_the_config_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "config" / "app" / "worker.py", "")
    write(
        tmp_path / "config" / "ocd.toml",
        '[server]\ndata_dir = "../state"\n' + WORKER,
    )
    monkeypatch.chdir(tmp_path)
    config = load_config("config/ocd.toml", {})
    assert config.path == tmp_path / "config" / "ocd.toml"
    assert config.server.data_dir == tmp_path / "state"
    assert config.workers[0].main == tmp_path / "config" / "app" / "worker.py"


def test_integer_is_accepted_where_a_number_is_expected(root: Path) -> None:
    config = load(
        root,
        "[server]\nshutdown_timeout = 5\n"
        + WORKER
        + "[[workers.queues.consumers]]\nqueue = 'jobs'\nmax_batch_timeout = 2\n",
    )
    timeout = config.workers[0].consumers[0].max_batch_timeout_s
    assert timeout == 2.0 and isinstance(timeout, float)
    assert isinstance(config.server.shutdown_timeout_s, float)


@pytest.mark.parametrize(
    ("listen", "host", "port"),
    [
        ("127.0.0.1:0", "127.0.0.1", 0),
        ("[::1]:9000", "::1", 9000),
        ("localhost:80", "localhost", 80),
    ],
)
def test_listen_forms(root: Path, listen: str, host: str, port: int) -> None:
    server = load(root, f'[server]\nlisten = "{listen}"\n').server
    assert (server.host, server.port, server.listen) == (host, port, listen)


def test_any_address_is_allowed_once_accounts_exist(root: Path) -> None:
    config = load(
        root,
        f'[server]\nlisten = "[::]:8787"\n[[accounts]]\nid = "a"\ntoken_sha256 = ["{HASH}"]\n',
    )
    assert config.server.listen == "[::]:8787"


def test_queue_and_consumer_lookups(root: Path) -> None:
    config = load(
        root,
        """
        [[accounts]]
        id = "acme"
        token_sha256 = []

        [[workers]]
        name = "a"
        module = "app.a"
        [[workers.queues.consumers]]
        queue = "jobs"

        [[workers]]
        name = "b"
        module = "app.b"
        account = "acme"
        [[workers.queues.consumers]]
        queue = "jobs"
        dead_letter_queue = "dlq"
        """,
    )
    assert [(q.account, q.name) for q in config.queues] == [
        ("acme", "dlq"),
        ("acme", "jobs"),
        ("local", "jobs"),
    ]
    found = config.consumer_for("jobs", "acme")
    assert found is not None and found[0].name == "b"
    assert config.consumer_for("dlq", "acme") is None
    assert config.queue("dlq") is None
    assert config.queue("dlq", "acme") == QueueConfig("dlq", "acme")


def test_worker_vars_are_read_only(root: Path) -> None:
    worker = load(root, WORKER + "vars = { A = 1 }\n").workers[0]
    with pytest.raises(TypeError):
        worker.vars["A"] = 2  # type: ignore[index]


# --- problems --------------------------------------------------------------------------------


def test_problem_names_the_file_as_given_and_the_key_path(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(root / "config" / "app" / "worker.py", "")
    write(
        root / "config" / "ocd.toml",
        WORKER + "[[workers.queues.consumers]]\nqueue = 'jobs'\nmax_batch_size = 500\n",
    )
    monkeypatch.chdir(root)
    with pytest.raises(ConfigError) as info:
        load_config("config/ocd.toml", {})
    assert str(info.value) == (
        "config/ocd.toml: workers[0].queues.consumers[0].max_batch_size:"
        " expected an integer 1..100, got 500"
    )


def test_every_problem_is_reported_at_once(root: Path) -> None:
    found = problems(
        root,
        """
        [server]
        durability = "fast"
        [[workers]]
        name = "bad name"
        main = "app/worker.py"
        [[queues]]
        name = "jobs"
        delivery_delay = -1
        """,
    )
    assert found == [
        ("server.durability", 'expected "full" or "normal", got "fast"'),
        ("workers[0].name", 'expected a worker name (1..63 of A-Z a-z 0-9 _ -), got "bad name"'),
        ("queues[0].delivery_delay", "expected an integer 0..86400, got -1"),
    ]


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.toml", {})
    assert [(p.key_path, p.message) for p in info.value.problems] == [("", "file not found")]
    assert str(info.value) == f"{tmp_path / 'nope.toml'}: file not found"


def test_invalid_toml_reports_line_and_column(root: Path) -> None:
    [(key_path, message)] = problems(root, "[server]\nlisten = \n")
    assert key_path == ""
    assert message.startswith("invalid TOML: ") and "line 2, column 10" in message


@pytest.mark.parametrize(
    ("text", "key_path"),
    [
        ("foo = 1\n", "foo"),
        ("[server]\nport = 1\n", "server.port"),
        (WORKER + "route = ['/']\n", "workers[0].route"),
        (WORKER + "[workers.queues]\npull = []\n", "workers[0].queues.pull"),
        (WORKER + "[[workers.queues.producers]]\nbinding='Q'\nqueue='q'\ndelivery_delay=1\n",
         "workers[0].queues.producers[0].delivery_delay"),
        (WORKER + "[[workers.queues.consumers]]\nqueue = 'q'\ntype = 'worker'\n",
         "workers[0].queues.consumers[0].type"),
        ("[[queues]]\nname = 'q'\n'max size' = 1\n", 'queues[0]."max size"'),
        (f"[[accounts]]\nid = 'a'\ntoken_sha256 = []\ntoken = '{HASH}'\n", "accounts[0].token"),
    ],
)  # fmt: skip
def test_unknown_keys_are_errors(root: Path, text: str, key_path: str) -> None:
    key = key_path.rsplit(".", 1)[-1].strip('"')
    assert (key_path, f'unknown key "{key}"') in problems(root, text)


CONSUMER = WORKER + "[[workers.queues.consumers]]\nqueue = 'jobs'\n"


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("max_batch_size = true", "expected an integer 1..100, got true"),
        ("max_batch_size = 10.0", "expected an integer 1..100, got 10.0"),
        ("max_batch_size = 0", "expected an integer 1..100, got 0"),
        ("max_batch_timeout = 61", "expected a number 0..60, got 61"),
        ("max_batch_timeout = '5'", 'expected a number 0..60, got "5"'),
        ("max_retries = 101", "expected an integer 0..100, got 101"),
        ("max_concurrency = 251", "expected an integer 1..250, got 251"),
        ("retry_delay = 1.5", "expected an integer 0..86400, got 1.5"),
        (
            "dead_letter_queue = 'a b'",
            f'expected a queue name ({QN}), got "a b"',
        ),
    ],
)
def test_consumer_setting_types_and_ranges(root: Path, setting: str, message: str) -> None:
    key = setting.split(" = ")[0]
    assert problems(root, CONSUMER + setting) == [
        (f"workers[0].queues.consumers[0].{key}", message)
    ]


@pytest.mark.parametrize(
    ("text", "key_path", "message"),
    [
        ("[server]\nshutdown_timeout = 3601", "server.shutdown_timeout",
         "expected a number 0..3600, got 3601"),
        ("[server]\ndata_dir = 5", "server.data_dir", "expected a directory path, got 5"),
        (WORKER + "handler_timeout = 0", "workers[0].handler_timeout",
         "expected a number 1..86400, got 0"),
        ("[[queues]]\nname = 'q'\nmessage_retention_period = 59",
         "queues[0].message_retention_period", "expected an integer 60..1209600, got 59"),
        ("[[queues]]\nname = 'q'\ndelivery_delay = 86401", "queues[0].delivery_delay",
         "expected an integer 0..86400, got 86401"),
        ("[[queues]]\nname = 'q'\ndelivery_paused = 'no'", "queues[0].delivery_paused",
         'expected true or false, got "no"'),
        ("[[queues]]\nname = 'x' \nname2 = 1", "queues[0].name2", 'unknown key "name2"'),
        ("[[queues]]\nname = 'q' \naccount = 'acme'", "queues[0].account",
         'expected an account id ("local" or a configured [[accounts]] id), got "acme"'),
        ("[[queues]]\nname = 'way-too-long-" + "x" * 60 + "'", "queues[0].name",
         f'expected a queue name ({QN}), got "way-too-long-{"x" * 60}"'),
        ("[server]\nlisten = 8787", "server.listen", 'expected "host:port" with an IP address or '
         '"localhost" and a port 0..65535, got 8787'),
        ("server = 1", "server", "expected a table, got 1"),
        ("workers = 1", "workers", "expected an array, got 1"),
    ],
)  # fmt: skip
def test_setting_types_and_ranges(root: Path, text: str, key_path: str, message: str) -> None:
    assert problems(root, text) == [(key_path, message)]


@pytest.mark.parametrize(
    "listen",
    ["8787", "localhost", "127.0.0.1:65536", "::1:8787", "example.com:80", "127.0.0.1:http", ":80"],
)
def test_listen_must_be_host_and_port(root: Path, listen: str) -> None:
    assert problems(root, f'[server]\nlisten = "{listen}"') == [
        (
            "server.listen",
            'expected "host:port" with an IP address or "localhost" and a port 0..65535,'
            f' got "{listen}"',
        )
    ]


def test_listen_must_be_loopback_without_accounts(root: Path) -> None:
    assert problems(root, '[server]\nlisten = "0.0.0.0:8787"') == [
        (
            "server.listen",
            "expected a loopback address when no [[accounts]] are configured"
            ' (ocd would serve its API without authentication), got "0.0.0.0:8787"',
        )
    ]


@pytest.mark.parametrize(
    ("entry", "key_path", "message"),
    [
        ("[[workers.queues.consumers]]\nmax_retries = 1", "workers[0].queues.consumers[0]",
         'missing required key "queue"'),
        ("[[workers.queues.producers]]\nqueue = 'jobs'", "workers[0].queues.producers[0]",
         'missing required key "binding"'),
        ("[[workers.queues.producers]]\nbinding = 'Q'", "workers[0].queues.producers[0]",
         'missing required key "queue"'),
    ],
)  # fmt: skip
def test_missing_required_keys(root: Path, entry: str, key_path: str, message: str) -> None:
    assert problems(root, WORKER + entry) == [(key_path, message)]


def test_missing_required_keys_of_top_level_entries(root: Path) -> None:
    assert problems(root, "[[workers]]\n[[queues]]\n[[accounts]]\nid = 'a'\n") == [
        ("accounts[0]", 'missing required key "token_sha256"'),
        ("workers[0]", 'missing required key "name"'),
        ("workers[0]", 'missing required key "main" (or "module")'),
        ("queues[0]", 'missing required key "name"'),
    ]


def test_a_queue_has_one_consumer_across_workers(root: Path) -> None:
    text = """
    [[workers]]
    name = "a"
    module = "app.a"
    [[workers.queues.consumers]]
    queue = "jobs"

    [[workers]]
    name = "b"
    module = "app.b"
    [[workers.queues.consumers]]
    queue = "other"
    [[workers.queues.consumers]]
    queue = "jobs"
    """
    assert problems(root, text) == [
        ("workers[1].queues.consumers[1].queue", 'queue "jobs" already has a consumer (worker "a")')
    ]


def test_a_worker_cannot_consume_a_queue_twice(root: Path) -> None:
    text = CONSUMER + "[[workers.queues.consumers]]\nqueue = 'jobs'\nmax_retries = 1\n"
    assert problems(root, text) == [
        (
            "workers[0].queues.consumers[1].queue",
            'queue "jobs" already has a consumer (worker "app")',
        )
    ]


def test_dead_letter_queue_cannot_be_the_queue_itself(root: Path) -> None:
    assert problems(root, CONSUMER + "dead_letter_queue = 'jobs'") == [
        (
            "workers[0].queues.consumers[0].dead_letter_queue",
            'dead letter queue for queue "jobs" cannot be itself',
        )
    ]


def test_a_queue_is_declared_once_per_account(root: Path) -> None:
    text = f"""
    [[accounts]]
    id = "acme"
    token_sha256 = ["{HASH}"]
    [[queues]]
    name = "jobs"
    [[queues]]
    name = "jobs"
    account = "acme"
    [[queues]]
    name = "jobs"
    """
    assert problems(root, text) == [
        ("queues[2].name", 'queue "jobs" is already declared by queues[0]')
    ]


def test_worker_names_are_unique(root: Path) -> None:
    assert problems(root, WORKER + WORKER) == [
        ("workers[1].name", 'worker "app" is already declared by workers[0]')
    ]


def test_account_ids_are_unique_and_valid(root: Path) -> None:
    text = f"""
    [[accounts]]
    id = "acme"
    token_sha256 = ["{HASH}"]
    [[accounts]]
    id = "acme"
    token_sha256 = []
    [[accounts]]
    id = "acme.corp"
    token_sha256 = []
    """
    assert problems(root, text) == [
        ("accounts[1].id", 'account "acme" is already declared by accounts[0]'),
        ("accounts[2].id", 'expected an account id (1..64 of A-Z a-z 0-9 _ -), got "acme.corp"'),
    ]


def test_token_hashes_must_be_sha256_hex(root: Path) -> None:
    text = f'[[accounts]]\nid = "a"\ntoken_sha256 = ["{HASH}", "secret", 1]\n'
    assert problems(root, text) == [
        (
            "accounts[0].token_sha256[1]",
            'expected a SHA-256 hex digest (64 hex digits), got "secret"',
        ),
        ("accounts[0].token_sha256[2]", "expected a SHA-256 hex digest (64 hex digits), got 1"),
    ]


def test_a_token_belongs_to_one_account(root: Path) -> None:
    text = f"""
    [[accounts]]
    id = "a"
    token_sha256 = ["{HASH}"]
    [[accounts]]
    id = "b"
    token_sha256 = ["{HASH.upper()}"]
    """
    assert problems(root, text) == [
        ("accounts[1].token_sha256[0]", 'this token is already listed for account "a"')
    ]


def test_worker_account_must_be_configured(root: Path) -> None:
    assert problems(root, WORKER + "account = 'acme'") == [
        (
            "workers[0].account",
            'expected an account id ("local" or a configured [[accounts]] id), got "acme"',
        )
    ]


def test_main_file_must_exist(root: Path) -> None:
    text = '[[workers]]\nname = "app"\nmain = "app/missing.py"\n'
    assert problems(root, text) == [
        ("workers[0].main", f"file not found: {root / 'app' / 'missing.py'}")
    ]


@pytest.mark.parametrize(
    ("code", "key_path", "message"),
    [
        ('main = "app/worker.rb"', "workers[0].main",
         'expected a path to a .py file, or a .js, .mjs, .ts, .mts, .jsx or .tsx file, got '
         '"app/worker.rb"'),
        ('main = "app/worker.py"\nmodule = "app.worker"', "workers[0].module",
         'expected one of "main" or "module", got both'),
        ('module = "app..worker"', "workers[0].module",
         'expected a dotted module name like "app.worker", got "app..worker"'),
        ("", "workers[0]", 'missing required key "main" (or "module")'),
    ],
)  # fmt: skip
def test_exactly_one_of_main_or_module(root: Path, code: str, key_path: str, message: str) -> None:
    assert problems(root, f'[[workers]]\nname = "app"\n{code}\n') == [(key_path, message)]


@pytest.mark.parametrize(
    ("routes", "message"),
    [
        ('["api"]', 'expected a path prefix starting with "/", got "api"'),
        ('["/client/v4/accounts"]', 'expected a path prefix outside "/client/v4" and "/__ocd"'
         ' (reserved for ocd), got "/client/v4/accounts"'),
        ('["/__ocd"]', 'expected a path prefix outside "/client/v4" and "/__ocd"'
         ' (reserved for ocd), got "/__ocd"'),
    ],
)  # fmt: skip
def test_routes_are_path_prefixes_outside_ocds_api(root: Path, routes: str, message: str) -> None:
    assert problems(root, WORKER + f"routes = {routes}") == [("workers[0].routes[0]", message)]


def test_two_workers_cannot_claim_one_route(root: Path) -> None:
    text = (
        WORKER + 'routes = ["/", "/api"]\n[[workers]]\nname = "b"\nmodule = "b"\nroutes = ["/api"]'
    )
    assert problems(root, text) == [
        ("workers[1].routes[0]", 'route "/api" is already claimed by worker "app"')
    ]


def test_vars_need_identifier_names_and_plain_values(root: Path) -> None:
    text = WORKER + '[workers.vars]\n"bad name" = 1\nWHEN = 1979-05-27\nOK = "yes"\n'
    assert problems(root, text) == [
        ('workers[0].vars."bad name"', 'expected a var name matching [A-Za-z_][A-Za-z0-9_]*, '
         'got "bad name"'),
        ("workers[0].vars.WHEN", 'expected a string, number, boolean, array or table, '
         'got 1979-05-27'),
    ]  # fmt: skip


def test_producer_bindings_are_unique_identifiers(root: Path) -> None:
    text = """
    [[workers]]
    name = "app"
    main = "app/worker.py"
    vars = { GREETING = "hi" }
    [[workers.queues.producers]]
    binding = "QUEUE"
    queue = "jobs"
    [[workers.queues.producers]]
    binding = "QUEUE"
    queue = "other"
    [[workers.queues.producers]]
    binding = "GREETING"
    queue = "jobs"
    [[workers.queues.producers]]
    binding = "my-queue"
    queue = "jobs"
    [[workers.queues.producers]]
    binding = "Q2"
    queue = "no/slashes"
    """
    path = "workers[0].queues.producers"
    assert problems(root, text) == [
        (f"{path}[1].binding", 'binding "QUEUE" is already used by another producer'),
        (f"{path}[2].binding", 'binding "GREETING" is already used by a var'),
        (f"{path}[3].binding", 'expected a binding name matching [A-Za-z_][A-Za-z0-9_]*, '
         'got "my-queue"'),
        (f"{path}[4].queue", f'expected a queue name ({QN}), got "no/slashes"'),
    ]  # fmt: skip


# --- [store] ---------------------------------------------------------------------------------

DSN = "postgresql://ocd:s3cret@db.internal/ocd"
POSTGRES = "[store]\nbackend = 'postgres'\n"


def test_store_defaults_to_sqlite_mirroring_server(root: Path) -> None:
    config = load(root, "[server]\ndata_dir = 'state'\ndurability = 'normal'\n")
    assert config.store == StoreConfig(root / "state", durability="normal")
    assert (config.store.backend, config.store.dsn, config.store.pool_size) == ("sqlite", None, 10)
    assert config.store.node_heartbeat_s == 15.0


def test_sqlite_settings_may_be_given_under_store(root: Path) -> None:
    config = load(root, "[store]\ndata_dir = 'state'\ndurability = 'normal'\nnode_heartbeat = 5\n")
    assert config.store == StoreConfig(
        root / "state", "sqlite", node_heartbeat_s=5.0, durability="normal"
    )
    assert (config.server.data_dir, config.server.durability) == (root / "state", "normal")


def test_data_dir_in_server_and_store_must_agree(root: Path) -> None:
    same = "[server]\ndata_dir = 'state'\n[store]\ndata_dir = './state/'\n"
    assert load(root, same).store.data_dir == root / "state"
    text = """
    [server]
    data_dir = "state"
    durability = "full"
    [store]
    data_dir = "other"
    durability = "normal"
    """
    assert problems(root, text) == [
        ("store.data_dir", 'expected the same value as server.data_dir ("state"), got "other"'),
        ("store.durability", 'expected the same value as server.durability ("full"), got "normal"'),
    ]


def test_postgres_with_dsn(root: Path) -> None:
    text = POSTGRES + f'dsn = "{DSN}"\npool_size = 20\nnode_heartbeat = 30\ndurability = "normal"\n'
    config = load(root, text)
    assert config.store == StoreConfig(root / ".ocd", "postgres", DSN, None, 20, 30.0, "normal")
    assert config.server.durability == "normal"
    assert "s3cret" not in repr(config.store)


@pytest.mark.parametrize("dsn", ["postgres://db/ocd", "host=db dbname=ocd", "dbname = ocd"])
def test_postgres_dsn_forms(root: Path, dsn: str) -> None:
    assert load(root, POSTGRES + f'dsn = "{dsn}"\n').store.dsn == dsn


def test_postgres_dsn_from_the_environment(root: Path) -> None:
    config = load(root, POSTGRES + 'dsn_env = "OCD_DATABASE_URL"\n', OCD_DATABASE_URL=DSN)
    assert (config.store.dsn, config.store.dsn_env) == (DSN, "OCD_DATABASE_URL")


def test_dsn_env_is_read_from_the_process_environment_by_default(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OCD_DATABASE_URL", DSN)
    config = load_config(write(root / "ocd.toml", POSTGRES + 'dsn_env = "OCD_DATABASE_URL"\n'))
    assert config.store.dsn == DSN


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({}, 'environment variable "OCD_DATABASE_URL" is not set'),
        ({"OCD_DATABASE_URL": ""}, 'environment variable "OCD_DATABASE_URL" is empty'),
        ({"OCD_DATABASE_URL": "mysql://ocd:s3cret@db/ocd"},
         'expected environment variable "OCD_DATABASE_URL" to hold a PostgreSQL connection string'
         ' ("postgresql://..." or "host=... dbname=..."), got "mysql://ocd:***@db/ocd"'),
    ],
)  # fmt: skip
def test_dsn_env_must_name_a_set_variable_holding_a_dsn(
    root: Path, environ: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load(root, POSTGRES + 'dsn_env = "OCD_DATABASE_URL"\n', **environ)
    [problem] = info.value.problems
    assert (problem.file, problem.key_path, problem.message) == (
        root / "ocd.toml",
        "store.dsn_env",
        message,
    )


@pytest.mark.parametrize(
    ("text", "key_path", "message"),
    [
        (POSTGRES, "store", 'missing required key "dsn" (or "dsn_env") for backend = "postgres"'),
        (POSTGRES + f"dsn = '{DSN}'\ndsn_env = 'URL'", "store.dsn_env",
         'expected one of "dsn" or "dsn_env", got both'),
        (POSTGRES + "dsn = 'mysql://ocd:s3cret@db/ocd'", "store.dsn",
         'expected a PostgreSQL connection string ("postgresql://..." or "host=... dbname=..."),'
         ' got "mysql://ocd:***@db/ocd"'),
        (POSTGRES + "dsn = 'user=ocd password=s3cret'", "store.dsn",
         'expected a PostgreSQL connection string ("postgresql://..." or "host=... dbname=..."),'
         ' got "user=ocd password=***"'),
        (POSTGRES + "dsn_env = 'ocd-url'", "store.dsn_env",
         'expected an environment variable name matching [A-Za-z_][A-Za-z0-9_]*, got "ocd-url"'),
        (POSTGRES + f"dsn = '{DSN}'\npool_size = 101", "store.pool_size",
         "expected an integer 1..100, got 101"),
        (POSTGRES + f"dsn = '{DSN}'\ndata_dir = 'state'", "store.data_dir",
         'only for backend = "sqlite"'),
        ("[store]\nnode_heartbeat = 0", "store.node_heartbeat",
         "expected a number 1..3600, got 0"),
        ("[store]\ndurability = 'fast'", "store.durability",
         'expected "full" or "normal", got "fast"'),
        ("[store]\nbackend = 'mysql'", "store.backend",
         'expected "sqlite" or "postgres", got "mysql"'),
        ("[store]\nbackend = 'postgresql'", "store.backend",
         'expected "sqlite" or "postgres", got "postgresql"'),
        ("[store]\nhost = 'db'", "store.host", 'unknown key "host"'),
        ("store = 'sqlite'", "store", 'expected a table, got "sqlite"'),
    ],
)  # fmt: skip
def test_store_rules(root: Path, text: str, key_path: str, message: str) -> None:
    assert problems(root, text) == [(key_path, message)]


def test_postgres_settings_are_errors_for_sqlite(root: Path) -> None:
    text = f"[store]\ndsn = '{DSN}'\ndsn_env = 'URL'\npool_size = 5\n"
    assert problems(root, text) == [
        (f"store.{key}", 'only for backend = "postgres"') for key in ("dsn", "dsn_env", "pool_size")
    ]


@pytest.mark.parametrize(
    ("dsn", "redacted"),
    [
        ("postgresql://ocd:s3cret@db.internal/ocd", "postgresql://ocd:***@db.internal/ocd"),
        ("postgres://ocd:p@ss/word@db:5432/ocd?sslmode=require",
         "postgres://ocd:***@db:5432/ocd?sslmode=require"),
        ("postgresql://ocd@db/ocd?sslmode=require&password=s3cret",
         "postgresql://ocd@db/ocd?sslmode=require&password=***"),
        ("postgresql://db.internal:5432/ocd", "postgresql://db.internal:5432/ocd"),
        ("host=db user=ocd password=s3cret dbname=ocd", "host=db user=ocd password=*** dbname=ocd"),
        ("host=db password = 'it\\'s secret' dbname=ocd", "host=db password = *** dbname=ocd"),
        ("password=s3cret host=db", "password=*** host=db"),
        ("host=db dbname=ocd", "host=db dbname=ocd"),
    ],
)  # fmt: skip
def test_redact_dsn_hides_passwords(dsn: str, redacted: str) -> None:
    assert redact_dsn(dsn) == redacted
    assert StoreConfig(Path("."), "postgres", dsn).dsn_redacted == redacted


def test_dsn_redacted_is_none_without_a_dsn() -> None:
    assert StoreConfig(Path(".")).dsn_redacted is None


# --- wrangler files --------------------------------------------------------------------------

WRANGLER_TOML = """
name = "from-wrangler"
main = "src/entry.py"
compatibility_date = "2025-01-01"
compatibility_flags = ["python_workers"]

[vars]
GREETING = "hi"

[[queues.producers]]
binding = "jobs"
delivery_delay = 10

[[queues.producers]]
binding = "OUT"
queue = "out"
remote = false

[[queues.consumers]]
queue = "jobs"
type = "worker"
max_batch_size = 5
visibility_timeout_ms = 1000

[env.staging]
name = "ignored"
"""


def test_wrangler_toml_supplies_code_vars_and_queues(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(root / "app" / "wrangler.toml", WRANGLER_TOML)
    write(root / "app" / "src" / "entry.py", "")
    write(root / "ocd.toml", '[[workers]]\nwrangler = "app/wrangler.toml"\nroutes = ["/"]\n')
    monkeypatch.chdir(root)
    config = load_config("ocd.toml", {})
    [worker] = config.workers
    assert (worker.name, worker.source, worker.main, worker.module) == (
        "from-wrangler",
        Path("app/wrangler.toml"),
        root / "app" / "src" / "entry.py",
        None,
    )
    assert worker.routes == ("/",)
    assert dict(worker.vars) == {"GREETING": "hi"}
    assert worker.producers == (ProducerConfig("jobs", "jobs"), ProducerConfig("OUT", "out"))
    assert worker.consumers == (ConsumerConfig("jobs", max_batch_size=5),)
    assert config.warnings == (
        "app/wrangler.toml: queues.producers[0].delivery_delay: deprecated and has no effect;"
        " set delivery_delay in [[queues]] instead",
    )


def test_entry_overrides_wrangler_name_and_sets_runtime_options(root: Path) -> None:
    write(root / "app" / "wrangler.toml", 'name = "w"\nmain = "worker.py"\n')
    config = load(
        root,
        """
        [[workers]]
        name = "mine"
        wrangler = "app/wrangler.toml"
        handler_timeout = 30
        """,
    )
    [worker] = config.workers
    assert (worker.name, worker.main, worker.handler_timeout_s) == (
        "mine",
        root / "app" / "worker.py",
        30.0,
    )


def test_wrangler_problems_name_the_wrangler_file(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        root / "app" / "wrangler.toml",
        """
        name = "w"
        main = "worker.py"
        [[queues.consumers]]
        queue = "jobs"
        max_batch_size = 500
        [[queues.consumers]]
        queue = "pull"
        type = "http_pull"
        """,
    )
    write(root / "ocd.toml", '[[workers]]\nwrangler = "app/wrangler.toml"\n')
    monkeypatch.chdir(root)
    with pytest.raises(ConfigError) as info:
        load_config("ocd.toml", {})
    assert str(info.value).splitlines() == [
        "app/wrangler.toml: queues.consumers[0].max_batch_size:"
        " expected an integer 1..100, got 500",
        'app/wrangler.toml: queues.consumers[1].type: expected "worker" (only "worker" consumers'
        ' can be configured in your Wrangler configuration), got "http_pull"',
    ]


def test_wrangler_queues_allow_only_producers_and_consumers(root: Path) -> None:
    write(root / "app" / "wrangler.toml", 'name = "w"\nmain = "worker.py"\n[queues]\npull = []\n')
    with pytest.raises(ConfigError) as info:
        load(root, '[[workers]]\nwrangler = "app/wrangler.toml"\n')
    [problem] = info.value.problems
    assert (problem.file, problem.key_path, problem.message) == (
        root / "app" / "wrangler.toml",
        "queues.pull",
        'unknown key "pull"',
    )


def test_settings_cannot_come_from_both_entry_and_wrangler(root: Path) -> None:
    write(root / "app" / "wrangler.toml", 'name = "w"\nmain = "worker.py"\n[vars]\nA = 1\n')
    text = '[[workers]]\nwrangler = "app/wrangler.toml"\nmodule = "app.x"\nvars = { B = 2 }\n'
    wrangler = root / "app" / "wrangler.toml"
    assert problems(root, text) == [
        ("workers[0].module", f'"main" is already set in {wrangler}; set it once'),
        ("workers[0].vars", f'"vars" is already set in {wrangler}; set it once'),
    ]


def test_missing_wrangler_file_is_one_problem(root: Path) -> None:
    assert problems(root, '[[workers]]\nwrangler = "app/wrangler.toml"\n') == [
        ("workers[0].wrangler", f"file not found: {root / 'app' / 'wrangler.toml'}")
    ]


def test_wrangler_jsonc_with_comments_and_trailing_commas(root: Path) -> None:
    write(
        root / "app" / "wrangler.jsonc",
        """
        // top comment
        {
          "name": "json-app", /* inline */
          "main": "worker.py",
          "vars": {
            "URL": "https://example.com//path", // a "//" inside a string stays
            "NOTE": "/* not a comment */",
            "QUOTE": "say \\"hi\\" // still a string",
          },
          "queues": {
            "producers": [{ "binding": "JOBS", "queue": "jobs", },],
            "consumers": [
              { "queue": "jobs", "max_concurrency": null, "max_batch_timeout": 0.25, },
            ],
          },
        }
        """,
    )
    config = load(root, '[[workers]]\nwrangler = "app/wrangler.jsonc"\n')
    [worker] = config.workers
    assert worker.name == "json-app"
    assert dict(worker.vars) == {
        "URL": "https://example.com//path",
        "NOTE": "/* not a comment */",
        "QUOTE": 'say "hi" // still a string',
    }
    assert worker.producers == (ProducerConfig("JOBS", "jobs"),)
    assert worker.consumers == (ConsumerConfig("jobs", max_batch_timeout_s=0.25),)


def test_invalid_wrangler_json_keeps_line_numbers(root: Path) -> None:
    text = '{\n  /* a\n  comment */\n  "name": "x",\n  "main" "w"\n}'
    write(root / "app" / "wrangler.json", text)
    with pytest.raises(ConfigError) as info:
        load(root, '[[workers]]\nwrangler = "app/wrangler.json"\n')
    [problem] = info.value.problems
    assert (problem.file, problem.key_path) == (root / "app" / "wrangler.json", "")
    assert problem.message.startswith("invalid JSON: Expecting ':' delimiter: line 5")


def test_wrangler_json_types_are_checked(root: Path) -> None:
    write(root / "app" / "wrangler.json", '{"name": "x", "main": "worker.py", "vars": [1]}')
    with pytest.raises(ConfigError) as info:
        load(root, '[[workers]]\nwrangler = "app/wrangler.json"\n')
    assert [(p.key_path, p.message) for p in info.value.problems] == [
        ("vars", "expected an object, got [1]")
    ]


# --- crons, unsupported bindings, assets, queue names ---------------------------------------

WRANGLER_WORKER = '[[workers]]\nwrangler = "app/wrangler.toml"\nroutes = ["/"]\n'


def wrangler_problems(root: Path, wrangler: str, entry: str = "") -> list[tuple[str, str]]:
    write(root / "app" / "wrangler.toml", 'name = "w"\nmain = "worker.py"\n' + wrangler)
    with pytest.raises(ConfigError) as info:
        load(root, WRANGLER_WORKER + entry)
    return [(str(p.file.relative_to(root)), p.key_path, p.message) for p in info.value.problems]


def test_wrangler_triggers_and_a_worker_entrys_crons_are_read(root: Path) -> None:
    write(root / "app" / "wrangler.toml", 'name = "w"\nmain = "worker.py"\n'
          '[triggers]\ncrons = ["*/5 * * * *", "0 9 * * MON-FRI"]\n')  # fmt: skip
    [worker] = load(root, WRANGLER_WORKER).workers
    assert worker.crons == ("*/5 * * * *", "0 9 * * MON-FRI")
    [worker] = load(root, WORKER + 'crons = ["0 0 L * *"]\n').workers
    assert worker.crons == ("0 0 L * *",)


def test_a_wrong_cron_is_a_key_path_error_and_crons_are_set_once(root: Path) -> None:
    got = wrangler_problems(root, '[triggers]\ncrons = ["* * * * *", "60 * * * *", 5]\n')
    assert got == [
        ("app/wrangler.toml", "triggers.crons[1]",
         'expected a cron expression (minute: \'60\' is not in 0..59), got "60 * * * *"'),
        ("app/wrangler.toml", "triggers.crons[2]", "expected a cron expression string, got 5"),
    ]  # fmt: skip
    got = wrangler_problems(root, '[triggers]\ncrons = ["* * * * *"]\n', 'crons = ["0 * * * *"]')
    assert got == [
        ("ocd.toml", "workers[0].crons",
         f'"triggers.crons" is already set in {root}/app/wrangler.toml; set it once'),
    ]  # fmt: skip


def test_every_unsupported_binding_is_refused_with_its_key_path(root: Path) -> None:
    got = wrangler_problems(
        root,
        '[ai]\nbinding = "AI"\n[[durable_objects.bindings]]\nname = "LISTS"\nclass_name = "List"\n',
    )
    tail = "are not supported by ocd (only queues, KV namespaces, D1 databases, R2 buckets, "
    tail += "service bindings, vars and crons; Durable Objects in JavaScript workers); remove it "
    tail += "or run this worker under wrangler dev"
    assert got == [
        ("app/wrangler.toml", "durable_objects.bindings[0]",
         f"Durable Object bindings in Python workers {tail}"),
        ("app/wrangler.toml", "ai", f"Workers AI bindings {tail}"),
    ]  # fmt: skip


def test_kv_namespaces_are_bound_from_wrangler_files_and_ocd_toml(root: Path) -> None:
    write(root / "app" / "wrangler.toml", 'name = "w"\nmain = "worker.py"\n'
          '[[kv_namespaces]]\nbinding = "KV"\nid = "abc"\n'
          '[[kv_namespaces]]\nbinding = "LOCAL"\n')  # fmt: skip
    config = load(root, WRANGLER_WORKER)
    [worker] = config.workers
    assert [(k.binding, k.id) for k in worker.kv_namespaces] == [("KV", "abc"), ("LOCAL", "LOCAL")]


def test_kv_namespace_problems_name_file_and_key_path(root: Path) -> None:
    got = wrangler_problems(
        root,
        '[vars]\nKV = "x"\n[[kv_namespaces]]\nbinding = "KV"\nid = "a"\n'
        '[[kv_namespaces]]\nid = "b"\n[[kv_namespaces]]\nbinding = "B"\nid = "a b"\n',
    )
    assert got == [
        ("app/wrangler.toml", "kv_namespaces[0].binding", 'binding "KV" is already used by a var'),
        ("app/wrangler.toml", "kv_namespaces[1]", 'missing required key "binding"'),
        ("app/wrangler.toml", "kv_namespaces[2].id",
         'expected a namespace id (1..255 characters, no spaces), got "a b"'),
    ]  # fmt: skip


def test_d1_databases_are_bound_from_wrangler_files_and_ocd_toml(root: Path) -> None:
    write(root / "app" / "wrangler.toml", 'name = "w"\nmain = "worker.py"\n'
          '[[d1_databases]]\nbinding = "DB"\ndatabase_name = "prod"\n'
          'database_id = "0f6c-11"\nmigrations_dir = "db/migrations"\n'
          'preview_database_id = "p"\n'
          '[[d1_databases]]\nbinding = "LOCAL"\n')  # fmt: skip
    [worker] = load(root, WRANGLER_WORKER).workers
    got = [(d.binding, d.database_name, d.database_id, d.migrations_dir, d.migrations_table)
           for d in worker.d1_databases]  # fmt: skip
    assert got == [
        ("DB", "prod", "0f6c-11", root / "app" / "db" / "migrations", "d1_migrations"),
        ("LOCAL", "LOCAL", "LOCAL", root / "app" / "migrations", "d1_migrations"),
    ]
    [worker] = load(
        root, WORKER + 'd1_databases = [{ binding = "DB", database_id = "a" }]\n'
    ).workers
    assert worker.d1_databases[0].migrations_dir == root / "migrations"


def test_d1_database_problems_name_file_and_key_path(root: Path) -> None:
    got = wrangler_problems(
        root,
        '[vars]\nDB = "x"\n[[d1_databases]]\nbinding = "DB"\n'
        '[[d1_databases]]\nbinding = "B"\ndatabase_id = "../up"\n'
        '[[d1_databases]]\nbinding = "C"\nmigrations_pattern = "x/*.sql"\n',
    )
    assert got == [
        ("app/wrangler.toml", "d1_databases[0].binding", 'binding "DB" is already used'),
        ("app/wrangler.toml", "d1_databases[1].database_id",
         'expected a database id (1..128 of A-Z a-z 0-9 _ . -, not starting with . _ or -), '
         'got "../up"'),
        ("app/wrangler.toml", "d1_databases[2].migrations_pattern",
         'unknown key "migrations_pattern"'),
    ]  # fmt: skip


def test_d1_databases_are_refused_on_postgres(root: Path) -> None:
    text = POSTGRES + "dsn = 'postgresql://x@h/db'\n" + WORKER
    text += 'd1_databases = [{ binding = "DB", database_id = "a" }]\n'
    assert problems(root, text) == [
        ("workers[0].d1_databases",
         'D1 databases are a node\'s own: not available with [store] backend = "postgres"'),
    ]  # fmt: skip


JS_WRANGLER = 'name = "w"\nmain = "worker.js"\ncompatibility_date = "2026-11-01"\n'
R2_WORKER = (
    '[[workers]]\nname = "w"\nmain = "w.js"\ncompatibility_date = "2026-11-01"\n'
    'r2_buckets = [{ binding = "B", bucket_name = "photos" }]\n'
)


def test_r2_buckets_are_bound_from_wrangler_files_and_ocd_toml(root: Path) -> None:
    write(root / "app" / "worker.js", "export default {};\n")
    write(root / "w.js", "export default {};\n")
    write(root / "app" / "wrangler.toml", JS_WRANGLER +
          '[[r2_buckets]]\nbinding = "BUCKET"\nbucket_name = "my-bucket"\n'
          'preview_bucket_name = "p"\n')  # fmt: skip
    [worker] = load(root, WRANGLER_WORKER).workers
    assert [(b.binding, b.bucket_name) for b in worker.r2_buckets] == [("BUCKET", "my-bucket")]
    [worker] = load(root, R2_WORKER).workers
    assert [(b.binding, b.bucket_name) for b in worker.r2_buckets] == [("B", "photos")]


def test_r2_bucket_problems_name_file_and_key_path(root: Path) -> None:
    write(root / "app" / "worker.js", "export default {};\n")
    write(root / "app" / "wrangler.toml", JS_WRANGLER +
          '[vars]\nB = "x"\n[[r2_buckets]]\nbinding = "B"\nbucket_name = "ok-name"\n'
          '[[r2_buckets]]\nbinding = "C"\n'
          '[[r2_buckets]]\nbinding = "D"\nbucket_name = "Bad_Name"\n')  # fmt: skip
    with pytest.raises(ConfigError) as info:
        load(root, WRANGLER_WORKER)
    got = [(str(p.file.relative_to(root)), p.key_path, p.message) for p in info.value.problems]
    assert got == [
        ("app/wrangler.toml", "r2_buckets[0].binding", 'binding "B" is already used'),
        ("app/wrangler.toml", "r2_buckets[1]", 'missing required key "bucket_name"'),
        ("app/wrangler.toml", "r2_buckets[2].bucket_name",
         "expected an R2 bucket name (3..63 of a-z 0-9 -, starting and ending with a letter or "
         'digit), got "Bad_Name"'),
    ]  # fmt: skip


def test_r2_buckets_are_refused_on_postgres_and_for_python_workers(root: Path) -> None:
    write(root / "w.js", "export default {};\n")
    store = '[store]\nbackend = "postgres"\ndsn = "postgresql://x@localhost/db"\n'
    assert problems(root, store + R2_WORKER) == [
        ("workers[0].r2_buckets[0]",
         'R2 buckets are a node\'s own: not available with [store] backend = "postgres"'),
    ]  # fmt: skip
    got = wrangler_problems(root, '[[r2_buckets]]\nbinding = "B"\nbucket_name = "abc"\n')
    assert got == [
        ("app/wrangler.toml", "r2_buckets[0]",
         "R2 buckets are bound for JavaScript/TypeScript workers only, not Python"),
    ]  # fmt: skip


def test_ignore_unsupported_bindings_turns_refusals_into_warnings(root: Path) -> None:
    write(root / "app" / "wrangler.toml", 'name = "w"\nmain = "worker.py"\n'
          '[[hyperdrive]]\nbinding = "BUCKET"\nid = "b"\n')  # fmt: skip
    config = load(root, WRANGLER_WORKER + "ignore_unsupported_bindings = true\n")
    [worker] = config.workers
    assert [(b.name, b.feature) for b in worker.ignored_bindings] == [
        ("BUCKET", "Hyperdrive bindings")
    ]
    [warning] = config.warnings
    assert warning.startswith(f"{root}/app/wrangler.toml: hyperdrive[0]: Hyperdrive bindings are")
    assert warning.endswith("ignored (ignore_unsupported_bindings): env.BUCKET raises an error "
                            "when used")  # fmt: skip


def test_assets_are_read_and_a_missing_directory_is_an_error(root: Path) -> None:
    (root / "app" / "public").mkdir()
    write(root / "app" / "wrangler.toml", 'name = "w"\nmain = "worker.py"\n'
          '[assets]\ndirectory = "./public"\nbinding = "ASSETS"\n'
          'not_found_handling = "single-page-application"\n')  # fmt: skip
    [worker] = load(root, WRANGLER_WORKER).workers
    assert worker.assets is not None
    assert (worker.assets.directory, worker.assets.binding) == (root / "app" / "public", "ASSETS")
    assert worker.assets.not_found_handling == "single-page-application"
    got = wrangler_problems(root, '[assets]\ndirectory = "nowhere"\nhtml_handling = "x"\n')
    assert got[0] == (
        "app/wrangler.toml",
        "assets.directory",
        f"directory not found: {root / 'app' / 'nowhere'}",
    )
    assert got[1][1] == "assets.html_handling"


def test_the_assets_binding_cannot_reuse_another_bindings_name(root: Path) -> None:
    (root / "app" / "public").mkdir()
    assets = '[assets]\ndirectory = "./public"\nbinding = "ASSETS"\n'
    for other in ('[vars]\nASSETS = "x"\n', '[[d1_databases]]\nbinding = "ASSETS"\n'):
        got = wrangler_problems(root, other + assets)
        assert got == [
            ("app/wrangler.toml", "assets.binding",
             'binding "ASSETS" is already used by a var or another binding'),
        ], other  # fmt: skip


@pytest.mark.parametrize(
    ("name", "ok"),
    [("orders", True), ("orders-2", True), ("orders.fifo", True), ("a", True),
     ("My_Queue", False), ("ends-with-dash-", False), ("-starts", False), ("x" * 64, False),
     ("with_underscore", False), ("double.fifo.fifo", False)],
)  # fmt: skip
def test_queue_names_follow_cloudflares_rule_plus_fifo(root: Path, name: str, ok: bool) -> None:
    text = f'[[queues]]\nname = "{name}"\n'
    if ok:
        assert load(root, text).queues[0].name == name
    else:
        expected = f'expected a queue name ({QN}), got "{name}"'
        assert problems(root, text) == [("queues[0].name", expected)]


# --- the dashboard ---------------------------------------------------------------------------


def test_ui_defaults_to_on_and_takes_read_only_and_base_path(root: Path) -> None:
    from ocd.config import UiConfig

    assert load(root, "").ui == UiConfig()
    text = '[ui]\nenabled = false\nread_only = true\nbase_path = "/ops/ocd"\n'
    text += "search_scan_limit = 5000\n"
    assert load(root, text).ui == UiConfig(False, True, "/ops/ocd", 5000)


def test_ui_settings_are_checked(root: Path) -> None:
    assert problems(root, '[ui]\nbase_path = "ops/"\nlogin = 1\n') == [
        ("ui.login", 'unknown key "login"'),
        (
            "ui.base_path",
            'expected a URL path like "/__ocd/ui" or "/ops/ocd" (no trailing "/"), got "ops/"',
        ),
    ]


def test_a_token_entry_may_carry_a_read_role(root: Path) -> None:
    other = "cd" * 32
    text = f"""
    [[accounts]]
    id = "a"
    token_sha256 = ["{HASH}", {{ sha256 = "{other.upper()}", role = "read" }}]
    """
    assert load(root, text).accounts == (AccountConfig("a", (HASH, other), (other,)),)
    bad = f'[[accounts]]\nid = "a"\ntoken_sha256 = [{{ sha256 = "{HASH}", role = "root" }}]\n'
    assert problems(root, bad) == [
        ("accounts[0].token_sha256[0].role", 'expected "admin" or "read", got "root"')
    ]


def test_service_bindings_are_read_from_wrangler_files_and_ocd_toml(root: Path) -> None:
    write(root / "app" / "index.js", "export default {};\n")
    write(root / "app" / "wrangler.toml", 'name = "front"\nmain = "index.js"\n'
          'compatibility_date = "2025-01-01"\n'
          '[[services]]\nbinding = "API"\nservice = "api"\nentrypoint = "Admin"\n'
          '[[services]]\nbinding = "PY"\nservice = "py"\nenvironment = "production"\n')  # fmt: skip
    config = load(root, WRANGLER_WORKER + '[[workers]]\nname = "api"\nmain = "app/index.js"\n'
                  'compatibility_date = "2025-01-01"\n'
                  '[[workers.services]]\nbinding = "BACK"\nservice = "front"\n'
                  '[[workers]]\nname = "py"\nmain = "app/worker.py"\n')  # fmt: skip
    front, api, _ = config.workers
    assert [(s.binding, s.service, s.entrypoint) for s in front.services] == [
        ("API", "api", "Admin"), ("PY", "py", None)
    ]  # fmt: skip
    assert [(b.kind, b.name, b.target) for b in front.bindings()] == [
        ("service", "API", "api#Admin"), ("service", "PY", "py")
    ]  # fmt: skip
    assert [(s.binding, s.service) for s in api.services] == [("BACK", "front")]


def test_service_binding_problems_name_file_and_key_path(root: Path) -> None:
    write(root / "app" / "index.js", "export default {};\n")
    write(root / "app" / "wrangler.toml", 'name = "front"\nmain = "index.js"\n'
          'compatibility_date = "2025-01-01"\n[vars]\nX = "1"\n'
          '[[services]]\nbinding = "API"\nservice = "nowhere"\n'
          '[[services]]\nbinding = "X"\nservice = "py"\n'
          '[[services]]\nbinding = "PY"\nservice = "py"\nentrypoint = "Admin"\n')  # fmt: skip
    with pytest.raises(ConfigError) as info:
        load(root, WRANGLER_WORKER + '[[workers]]\nname = "py"\nmain = "app/worker.py"\n'
             '[[workers.services]]\nbinding = "FRONT"\nservice = "front"\n'
             '[[workers.services]]\nbinding = "ADMIN"\nservice = "front"\n'
             'entrypoint = "A"\n')  # fmt: skip
    got = [(str(p.file.relative_to(root)), p.key_path, p.message) for p in info.value.problems]
    assert got == [
        ("app/wrangler.toml", "services[1].binding",
         'binding "X" is already used by a var or another binding'),
        ("app/wrangler.toml", "services[0].service", 'no worker named "nowhere" in this config '
         '(its workers: "front", "py"); a service binding reaches another worker ocd runs'),
        ("app/wrangler.toml", "services[2].entrypoint", 'worker "py" is a Python worker: a '
         "service binding reaches its fetch handler only, not a named entrypoint"),
        ("ocd.toml", "workers[1].services[1].entrypoint", 'service binding "ADMIN" of Python '
         'worker "py": a Python worker\'s service binding reaches the other worker\'s fetch '
         "only; named entrypoints and RPC are for JavaScript workers"),
    ]  # fmt: skip


def test_a_service_binding_stays_within_its_account(root: Path) -> None:
    got = problems(root, f"""
        [server]
        listen = "127.0.0.1:8787"
        [[accounts]]
        id = "acme"
        token_sha256 = ["{HASH}"]
        [[workers]]
        name = "a"
        main = "app/worker.py"
        account = "acme"
        [[workers]]
        name = "b"
        main = "app/worker.py"
        routes = ["/b"]
        services = [{{ binding = "A", service = "a" }}]
        """)  # fmt: skip
    assert got == [
        ("workers[1].services[0].service", 'worker "a" is in account "acme", not in "local" as '
         'worker "b" is: a service binding stays within its account'),
    ]  # fmt: skip
