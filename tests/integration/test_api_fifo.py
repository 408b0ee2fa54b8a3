"""FIFO queues on the REST API and the binding, against a real daemon: ".fifo" names, the
FIFO settings, the type rules (no rename across ".fifo", a dead-letter queue of its queue's
type), send validation, and the FIFO fields of pull and peek replies."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from tests.integration.rest import Rest

FIFO_SETTINGS = {"content_based_deduplication": True, "deduplication_scope": "message_group"}
ORDERS = """
[[workers.queues.producers]]
binding = "ORDERS"
queue = "orders.fifo"
"""


async def names(api: Rest) -> list[str]:
    return sorted(q["queue_name"] for q in await api.ok("GET", "/queues"))


def error(out: dict[str, Any]) -> tuple[int, str, str | None]:
    assert out["success"] is False and out["result"] is None, out
    [e] = out["errors"]
    return e["code"], e["message"], e.get("source", {}).get("pointer")


# ---------------------------------------------------------------- declaring FIFO queues


async def test_a_fifo_queue_is_created_with_its_settings_and_shows_them(start_daemon):
    api = Rest(await start_daemon())
    made = await api.create_queue("orders.fifo", delivery_delay=2, **FIFO_SETTINGS)
    assert made["queue_name"] == "orders.fifo"
    assert made["settings"] == {
        "delivery_delay": 2,
        "delivery_paused": False,
        "message_retention_period": 345_600,
        "content_based_deduplication": True,
        "deduplication_scope": "message_group",
    }
    assert await api.ok("GET", "/queues/orders.fifo") == made
    assert await api.ok("GET", f"/queues/{made['queue_id']}") == made
    plain = await api.create_queue("plain.fifo")
    assert plain["settings"]["content_based_deduplication"] is False
    assert plain["settings"]["deduplication_scope"] == "queue"
    # a standard queue's settings stay exactly Cloudflare's
    tasks = await api.create_queue("tasks")
    assert set(tasks["settings"]) == {
        "delivery_delay",
        "delivery_paused",
        "message_retention_period",
    }
    listed = await api.ok("GET", "/queues", params=[("name", "orders.fifo")])
    assert listed == [made]


async def test_put_resets_and_patch_merges_the_fifo_settings(start_daemon):
    api = Rest(await start_daemon())
    await api.create_queue("orders.fifo", **FIFO_SETTINGS)
    patched = await api.ok(
        "PATCH", "/queues/orders.fifo", {"settings": {"content_based_deduplication": False}}
    )
    assert patched["settings"]["content_based_deduplication"] is False
    assert patched["settings"]["deduplication_scope"] == "message_group"
    put = await api.ok("PUT", "/queues/orders.fifo", {"settings": {"delivery_delay": 3}})
    assert put["settings"]["delivery_delay"] == 3
    assert put["settings"]["content_based_deduplication"] is False
    assert put["settings"]["deduplication_scope"] == "queue"
    patched = await api.ok(
        "PATCH", "/queues/orders.fifo", {"settings": {"deduplication_scope": None}}
    )  # null: keep the current value
    assert patched["settings"]["deduplication_scope"] == "queue"


async def test_fifo_settings_are_refused_on_a_standard_queue(start_daemon):
    api = Rest(await start_daemon())
    for setting, value in FIFO_SETTINGS.items():
        status, out = await api.call(
            "POST", "/queues", {"queue_name": "tasks", "settings": {setting: value}}
        )
        assert status == 400
        assert error(out) == (
            10207,
            f"{setting} is only valid on FIFO queues (names ending in .fifo); tasks is a "
            "standard queue",
            f"/settings/{setting}",
        )
    assert await names(api) == ["jobs"]  # only the config's
    # their defaults are accepted, and change nothing in the reply
    tasks = await api.create_queue("tasks", content_based_deduplication=False)
    assert "content_based_deduplication" not in tasks["settings"]
    for method in ("PUT", "PATCH"):
        status, out = await api.call(
            method, "/queues/tasks", {"settings": {"deduplication_scope": "message_group"}}
        )
        assert (status, error(out)[0], error(out)[2]) == (
            400,
            10207,
            "/settings/deduplication_scope",
        )
    assert await api.ok("GET", "/queues/tasks") == tasks
    same = await api.ok("PATCH", "/queues/tasks", {"settings": {"deduplication_scope": "queue"}})
    assert same["settings"] == tasks["settings"]


async def test_a_deduplication_scope_is_queue_or_message_group(start_daemon):
    api = Rest(await start_daemon())
    for scope in ("group", "QUEUE", ""):
        body = {"queue_name": "orders.fifo", "settings": {"deduplication_scope": scope}}
        status, out = await api.call("POST", "/queues", body)
        assert status == 400
        assert error(out) == (
            10207,
            f'deduplication_scope must be "queue" or "message_group", got "{scope}"',
            "/settings/deduplication_scope",
        )
    status, out = await api.call(
        "POST",
        "/queues",
        {"queue_name": "orders.fifo", "settings": {"content_based_deduplication": "yes"}},
    )
    assert (status, error(out)[2]) == (400, "/settings/content_based_deduplication")
    assert await names(api) == ["jobs"]  # only the config's


@pytest.mark.parametrize(
    "name", ["orders.fifo.fifo", ".fifo", "orders.", "orders.FIFO", "or.ders", "-orders.fifo"]
)
async def test_a_queue_name_takes_one_trailing_dot_fifo_and_no_other_dot(start_daemon, name):
    api = Rest(await start_daemon())
    status, out = await api.call("POST", "/queues", {"queue_name": name})
    assert status == 400
    code, message, pointer = error(out)
    assert (code, pointer) == (10207, "/queue_name") and "'.fifo'" in message


# ---------------------------------------------------------------- a queue keeps its type


@pytest.mark.parametrize(
    ("old", "new", "kinds"),
    [
        ("tasks", "tasks.fifo", "a standard queue cannot become a FIFO one"),
        ("orders.fifo", "orders", "a FIFO queue cannot become a standard one"),
    ],
)
async def test_a_rename_cannot_change_a_queues_type(start_daemon, old, new, kinds):
    api = Rest(await start_daemon())
    before = await api.create_queue(old)
    for method in ("PATCH", "PUT"):
        status, out = await api.call(method, f"/queues/{old}", {"queue_name": new})
        assert status == 400
        assert error(out) == (
            10207,
            f"queue {old} cannot be renamed to {new}: {kinds} (FIFO queues are the names "
            "ending in .fifo); create a new queue instead",
            "/queue_name",
        )
    assert await api.ok("GET", f"/queues/{before['queue_id']}") == before
    status, _ = await api.call("GET", f"/queues/{new}")
    assert status == 404
    same_kind = "renamed.fifo" if old.endswith(".fifo") else "renamed"
    renamed = await api.ok("PATCH", f"/queues/{old}", {"queue_name": same_kind})
    assert (renamed["queue_id"], renamed["queue_name"]) == (before["queue_id"], same_kind)


async def test_a_rename_to_fifo_cannot_bring_fifo_settings_to_a_standard_queue(start_daemon):
    api = Rest(await start_daemon())
    await api.create_queue("orders.fifo", **FIFO_SETTINGS)
    # the settings are judged for the name the queue will have
    status, out = await api.call(
        "PATCH", "/queues/orders.fifo", {"queue_name": "orders", "settings": {}}
    )
    assert (status, error(out)[2]) == (400, "/queue_name")
    renamed = await api.ok("PATCH", "/queues/orders.fifo", {"queue_name": "shop.fifo"})
    assert renamed["settings"]["deduplication_scope"] == "message_group"


@pytest.mark.parametrize(
    ("queue", "dlq", "message"),
    [
        (
            "orders.fifo",
            "orders-dlq",
            "the dead letter queue of the FIFO queue orders.fifo must be a FIFO queue (FIFO "
            "queues are the names ending in .fifo), got the standard queue orders-dlq",
        ),
        (
            "tasks",
            "tasks-dlq.fifo",
            "the dead letter queue of the standard queue tasks must be a standard queue (FIFO "
            "queues are the names ending in .fifo), got the FIFO queue tasks-dlq.fifo",
        ),
    ],
)
async def test_a_dead_letter_queue_must_be_of_its_queues_type(start_daemon, queue, dlq, message):
    api = Rest(await start_daemon())
    await api.create_queue(queue)
    body = {"type": "http_pull", "dead_letter_queue": dlq}
    status, out = await api.call("POST", f"/queues/{queue}/consumers", body)
    assert status == 400
    assert error(out) == (10207, message, "/dead_letter_queue")
    status, out = await api.call("PUT", f"/queues/{queue}/consumers/{'0' * 32}", body)
    assert status == 400 and error(out) == (10207, message, "/dead_letter_queue")
    assert await api.ok("GET", f"/queues/{queue}/consumers") == []
    assert await names(api) == sorted(["jobs", queue])  # no DLQ made


async def test_a_fifo_queues_fifo_dead_letter_queue_is_made_when_missing(start_daemon):
    api = Rest(await start_daemon())
    await api.create_queue("orders.fifo")
    consumer = await api.pull_consumer("orders.fifo", dlq="orders-dlq.fifo", max_retries=1)
    assert consumer["dead_letter_queue"] == "orders-dlq.fifo"
    dlq = await api.ok("GET", "/queues/orders-dlq.fifo")
    assert dlq["settings"]["deduplication_scope"] == "queue"


# ---------------------------------------------------------------- sending: the FIFO keys


async def test_rest_sends_with_the_wrong_fifo_keys_are_refused_naming_the_field(start_daemon):
    api = Rest(await start_daemon())
    await api.create_queue("orders.fifo")
    await api.create_queue("tasks")
    g = {"message_group_id": "customer-42", "message_deduplication_id": "order-9"}
    cases = [
        ("orders.fifo", {"body": 1}, "message_group_id is required on the FIFO queue orders.fifo"),
        (
            "orders.fifo",
            {"body": 1, "message_group_id": "customer-42"},
            "message_deduplication_id is required on the FIFO queue orders.fifo, which does not "
            "have content_based_deduplication turned on",
        ),
        (
            "orders.fifo",
            {"body": 1, **g, "delay_seconds": 5},
            "delay_seconds must be 0 on the FIFO queue orders.fifo",
        ),
        (
            "orders.fifo",
            {"body": 1, **g, "message_group_id": "has space"},
            "message_group_id 'has space' is invalid: must be 1 to 128 characters",
        ),
        (
            "orders.fifo",
            {"body": 1, **g, "message_group_id": "x" * 129},
            "message_group_id 'xxxx",
        ),
        (
            "orders.fifo",
            {"body": 1, **g, "message_group_id": ""},
            "message_group_id '' is invalid",
        ),
        (
            "orders.fifo",
            {"body": 1, **g, "message_deduplication_id": "zoë"},
            "message_deduplication_id 'zoë' is invalid",
        ),
        (
            "tasks",
            {"body": 1, "message_group_id": "customer-42"},
            "message_group_id is only valid on FIFO queues (names ending in .fifo); tasks is a "
            "standard queue",
        ),
        (
            "tasks",
            {"body": 1, "message_deduplication_id": "order-9"},
            "message_deduplication_id is only valid on FIFO queues",
        ),
    ]
    for queue, body, text in cases:
        status, out = await api.call("POST", f"/queues/{queue}/messages", body)
        assert status == 400, (body, out)
        code, message, _ = error(out)
        assert code == 10203 and text in message, (body, out)
        assert "messageGroupId" not in message and "delaySeconds" not in message
        batch = {"messages": [{"body": 0, **g}, body]} if queue == "orders.fifo" else None
        if batch is not None:  # one bad message refuses the whole batch
            status, out = await api.call("POST", f"/queues/{queue}/messages/batch", batch)
            assert status == 400 and text in error(out)[1], (batch, out)
    status, out = await api.call(
        "POST",
        "/queues/orders.fifo/messages/batch",
        {"messages": [{"body": 0, **g}], "delay_seconds": 3},
    )
    assert status == 400 and "delay_seconds must be 0" in error(out)[1]
    status, out = await api.call(
        "POST", "/queues/orders.fifo/messages", {"body": 1, "message_group_id": 7}
    )
    assert status == 400
    assert error(out) == (10207, '"message_group_id" must be a string', "/message_group_id")
    assert await api.backlog("orders.fifo") == 0 and await api.backlog("tasks") == 0


async def test_binding_sends_with_the_wrong_fifo_keys_raise_type_errors(start_daemon):
    d = await start_daemon(producers=ORDERS)
    cases = [
        ({"binding": "ORDERS", "body": 1}, "messageGroupId is required on the FIFO queue"),
        (
            {"binding": "ORDERS", "body": 1, "messageGroupId": "g"},
            "messageDeduplicationId is required on the FIFO queue orders.fifo",
        ),
        (
            {"binding": "ORDERS", "body": 1, "message_group_id": "g", "delaySeconds": 2},
            "delaySeconds must be 0 on the FIFO queue orders.fifo",
        ),
        (
            {
                "binding": "ORDERS",
                "body": 1,
                "messageGroupId": "a\tb",
                "messageDeduplicationId": "d",
            },
            "messageGroupId 'a\\tb' is invalid",
        ),
        (
            {"binding": "QUEUE", "body": 1, "messageGroupId": "g"},
            "messageGroupId is only valid on FIFO queues (names ending in .fifo); jobs is a "
            "standard queue",
        ),
        (
            {"binding": "QUEUE", "body": 1, "message_deduplication_id": "d"},
            "messageDeduplicationId is only valid on FIFO queues",
        ),
    ]
    for spec, text in cases:
        status, out = await d.post("/send", spec)
        assert status == 400 and out["type_error"] is True, (spec, out)
        assert out["error"] == "QueueSendArgumentError" and text in out["message"], (spec, out)
        assert out["message"].endswith("(10203)"), out
    status, out = await d.post(
        "/send-batch",
        {
            "binding": "ORDERS",
            "messages": [
                {"body": 1, "messageGroupId": "g", "messageDeduplicationId": "d"},
                {"body": 2},
            ],
        },
    )
    assert status == 400 and out["type_error"] is True
    assert "messageGroupId is required on the FIFO queue orders.fifo" in out["message"]
    assert (await d.metrics("ORDERS"))["backlogCount"] == 0
    assert (await d.metrics("QUEUE"))["backlogCount"] == 0


# ---------------------------------------------------------------- FIFO messages delivered
# These store and deliver FIFO messages: they need the store's FIFO path (enqueue_fifo).


def b64_json(value: Any) -> str:
    return base64.b64encode(json.dumps(value, separators=(",", ":")).encode()).decode()


async def test_pull_and_peek_show_group_sequence_and_deduplication_id(start_daemon):
    api = Rest(await start_daemon())
    await api.create_queue("orders.fifo", content_based_deduplication=True)
    await api.pull_consumer("orders.fifo")
    await api.push("orders.fifo", {"n": 1}, message_group_id="a", message_deduplication_id="d1")
    await api.ok(
        "POST",
        "/queues/orders.fifo/messages/batch",
        {
            "messages": [
                {"body": {"n": 2}, "message_group_id": "b"},  # content-based deduplication
                {"body": {"n": 3}, "message_group_id": "a", "message_deduplication_id": "d3"},
            ]
        },
    )
    [peeked] = (await api.ok("POST", "/queues/orders.fifo/messages/peek", {}))["messages"]
    assert (peeked["message_group_id"], peeked["message_deduplication_id"]) == ("a", "d1")
    pulled = (await api.pull("orders.fifo", batch_size=10))["messages"]
    by_body = {m["body"]: m for m in pulled}
    first, second, third = (by_body[b64_json({"n": n})] for n in (1, 2, 3))
    assert (
        first["sequence_number"]
        == peeked["sequence_number"]
        == min(m["sequence_number"] for m in pulled)
    )
    assert first["sequence_number"] < second["sequence_number"] < third["sequence_number"]
    assert (second["message_group_id"], second["message_deduplication_id"]) == (
        "b",
        hashlib.sha256(json.dumps({"n": 2}, separators=(",", ":")).encode()).hexdigest(),
    )
    assert (third["message_group_id"], third["message_deduplication_id"]) == ("a", "d3")


async def test_a_duplicate_rest_send_succeeds_and_stores_nothing(start_daemon):
    api = Rest(await start_daemon())
    await api.create_queue("orders.fifo")
    g = {"message_group_id": "a", "message_deduplication_id": "once"}
    first = await api.push("orders.fifo", "hello", content_type="text", **g)
    again = await api.push("orders.fifo", "hello again", content_type="text", **g)
    assert first["metadata"]["metrics"]["backlog_count"] == 1
    assert again["metadata"]["metrics"]["backlog_count"] == 1
    [peeked] = (await api.ok("POST", "/queues/orders.fifo/messages/peek", {"batch_size": 5}))[
        "messages"
    ]
    assert peeked["body"] == "hello"


async def test_a_binding_send_with_a_group_is_pulled_with_its_fields(start_daemon):
    d = await start_daemon(producers=ORDERS)
    api = Rest(d)
    await api.pull_consumer("orders.fifo")
    out = await d.send(
        {"order": 9}, binding="ORDERS", messageGroupId="customer-42", messageDeduplicationId="o-9"
    )
    assert out["metadata"]["metrics"]["backlogCount"] == 1
    [m] = (await api.pull("orders.fifo"))["messages"]
    assert (m["message_group_id"], m["message_deduplication_id"]) == ("customer-42", "o-9")
    assert isinstance(m["sequence_number"], int)


async def test_standard_pull_and_peek_replies_have_no_fifo_fields(start_daemon):
    api = Rest(await start_daemon())
    await api.create_queue("tasks")
    await api.pull_consumer("tasks")
    await api.push("tasks", "plain", content_type="text")
    [peeked] = (await api.ok("POST", "/queues/tasks/messages/peek", {}))["messages"]
    [pulled] = (await api.pull("tasks"))["messages"]
    for m in (peeked, pulled):
        assert not {"message_group_id", "sequence_number", "message_deduplication_id"} & set(m)


async def test_a_config_declared_fifo_queue_has_its_settings_and_keeps_its_name(start_daemon):
    d = await start_daemon(
        producers=ORDERS,
        queues="""
[[queues]]
name = "orders.fifo"
content_based_deduplication = true
deduplication_scope = "message_group"
""",
    )
    api = Rest(d)
    orders = await api.ok("GET", "/queues/orders.fifo")
    assert orders["settings"]["content_based_deduplication"] is True
    assert orders["settings"]["deduplication_scope"] == "message_group"
    assert orders["producers"] == [{"type": "worker", "script": "app"}]
    status, out = await api.call("PATCH", "/queues/orders.fifo", {"queue_name": "shop.fifo"})
    assert status == 409 and error(out)[0] == 11006  # the config names it
