"""ocd.config and FIFO queues: ".fifo" names, the FIFO settings, and dead-letter queues of
the queue's own type, every mistake with file, key path, expected and got."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ocd.config import Config, QueueConfig, load_config
from ocd.errors import ConfigError
from ocd.names import QUEUE_NAME_RULE

WORKER = """
[[workers]]
name = "app"
main = "app/worker.py"
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "worker.py").write_text("")
    return tmp_path


def load(root: Path, text: str) -> Config:
    path = root / "ocd.toml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return load_config(path, {})


def problems(root: Path, text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load(root, text)
    return [str(p) for p in info.value.problems]


def test_fifo_queues_are_declared_and_named_by_workers(root: Path) -> None:
    config = load(
        root,
        WORKER
        + """
        [[workers.queues.producers]]
        binding = "ORDERS"
        queue = "orders.fifo"

        [[workers.queues.consumers]]
        queue = "orders.fifo"
        dead_letter_queue = "orders-dlq.fifo"

        [[queues]]
        name = "orders.fifo"
        content_based_deduplication = true
        deduplication_scope = "message_group"

        [[queues]]
        name = "plain.fifo"
        """,
    )
    assert config.queue("orders.fifo") == QueueConfig(
        "orders.fifo",
        content_based_deduplication=True,
        deduplication_scope="message_group",
        declared=True,
    )
    plain = config.queue("plain.fifo")
    assert plain is not None and plain.fifo
    assert (plain.content_based_deduplication, plain.deduplication_scope) == (False, "queue")
    dlq = config.queue("orders-dlq.fifo")
    assert dlq is not None and dlq.fifo and not dlq.declared
    assert config.workers[0].producers[0].queue == "orders.fifo"
    assert config.workers[0].consumers[0].dead_letter_queue == "orders-dlq.fifo"


@pytest.mark.parametrize(
    "name", ["orders.fifo.fifo", ".fifo", "orders.FIFO", "orders.fif", "or.ders", "orders.fifo "]
)
def test_only_one_trailing_dot_fifo_is_allowed(root: Path, name: str) -> None:
    assert problems(root, f"[[queues]]\nname = '{name}'\n") == [
        f"{root / 'ocd.toml'}: queues[0].name: expected a queue name ({QUEUE_NAME_RULE}), "
        f'got "{name}"'
    ]


def test_fifo_settings_are_refused_on_a_standard_queue(root: Path) -> None:
    text = """
    [[queues]]
    name = "jobs"
    content_based_deduplication = true
    deduplication_scope = "message_group"
    """
    where = f"{root / 'ocd.toml'}: queues[0]"
    rule = 'only valid on FIFO queues (names ending in ".fifo"); "jobs" is a standard queue'
    assert problems(root, text) == [
        f"{where}.content_based_deduplication: {rule}",
        f"{where}.deduplication_scope: {rule}",
    ]


def test_fifo_settings_at_their_defaults_are_accepted_on_a_standard_queue(root: Path) -> None:
    text = """
    [[queues]]
    name = "jobs"
    content_based_deduplication = false
    deduplication_scope = "queue"
    """
    assert load(root, text).queue("jobs") == QueueConfig("jobs", declared=True)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("deduplication_scope = 'group'", 'expected "queue" or "message_group", got "group"'),
        ("deduplication_scope = 1", 'expected "queue" or "message_group", got 1'),
        ("content_based_deduplication = 'yes'", 'expected true or false, got "yes"'),
    ],
)
def test_fifo_setting_values_are_checked(root: Path, setting: str, message: str) -> None:
    key = setting.split(" = ")[0]
    text = f"[[queues]]\nname = 'orders.fifo'\n{setting}\n"
    assert problems(root, text) == [f"{root / 'ocd.toml'}: queues[0].{key}: {message}"]


def test_a_fifo_queue_needs_a_fifo_dead_letter_queue(root: Path) -> None:
    text = (
        WORKER
        + """
    [[workers.queues.consumers]]
    queue = "orders.fifo"
    dead_letter_queue = "orders-dlq"
    """
    )
    assert problems(root, text) == [
        f"{root / 'ocd.toml'}: workers[0].queues.consumers[0].dead_letter_queue: expected a "
        'FIFO queue (a name ending in ".fifo") as the dead letter queue of the FIFO queue '
        '"orders.fifo", got "orders-dlq"'
    ]


def test_a_standard_queue_needs_a_standard_dead_letter_queue(root: Path) -> None:
    text = (
        WORKER
        + """
    [[workers.queues.consumers]]
    queue = "jobs"
    dead_letter_queue = "jobs-dlq.fifo"
    """
    )
    assert problems(root, text) == [
        f"{root / 'ocd.toml'}: workers[0].queues.consumers[0].dead_letter_queue: expected a "
        'standard queue (not ending in ".fifo") as the dead letter queue of the standard queue '
        '"jobs", got "jobs-dlq.fifo"'
    ]


def test_a_wrangler_consumer_is_held_to_the_same_rule(root: Path) -> None:
    (root / "wrangler.toml").write_text(
        textwrap.dedent(
            """
            name = "app"
            main = "app/worker.py"

            [[queues.consumers]]
            queue = "orders.fifo"
            dead_letter_queue = "orders-dlq"
            """
        )
    )
    text = '[[workers]]\nwrangler = "wrangler.toml"\n'
    assert problems(root, text) == [
        f"{root / 'wrangler.toml'}: queues.consumers[0].dead_letter_queue: expected a FIFO "
        'queue (a name ending in ".fifo") as the dead letter queue of the FIFO queue '
        '"orders.fifo", got "orders-dlq"'
    ]
