"""Places where the OpenAPI document and the handlers once disagreed (found by fuzzing):
each request is sent to a real daemon, its answer checked against the document's schema for
its status, and the document's request schema must say of the body what the handler did."""

from __future__ import annotations

from typing import Any

from tests.integration.test_openapi import Client
from tests.openapi_schemas import problems, request_validator

Q = "/accounts/{account_id}/queues"
ONE = Q + "/{queue_id}"
M = ONE + "/messages"


def documented_as_valid(method: str, template: str, body: Any) -> bool:
    validator = request_validator(method, template)
    assert validator is not None
    return problems(validator, body) == []


async def _queue_with_pull_consumer(api: Client, name: str = "work") -> str:
    queue_id: str = (await api.call("POST", Q, {"queue_name": name}))["queue_id"]
    api.ids["queue_id"] = queue_id
    await api.call("POST", ONE + "/consumers", {"type": "http_pull"})
    return queue_id


async def test_an_out_of_range_retry_delay_is_answered_with_a_documented_code(start_daemon):
    api = Client(await start_daemon())
    await _queue_with_pull_consumer(api)
    body = {"retries": [{"lease_id": "x", "delay_seconds": 86_401}]}
    assert not documented_as_valid("POST", M + "/ack", body)
    await api.call("POST", M + "/ack", body, expect=400)  # 10203, as a send's delay


async def test_an_undecodable_report_without_a_reason_is_documented_as_valid(start_daemon):
    api = Client(await start_daemon())
    await _queue_with_pull_consumer(api)
    await api.call("POST", M + "/batch", {"messages": [{"body": 1}]})
    [leased] = (await api.call("POST", M + "/pull", {"batch_size": 1}))["messages"]
    body = {"undecodable": [{"lease_id": leased["lease_id"], "reason": None}]}
    assert documented_as_valid("POST", M + "/ack", body)
    await api.call("POST", M + "/ack", body)
    metrics = await api.call("GET", ONE + "/metrics")
    assert metrics["backlog_count"] == 0  # dead-lettered (deleted: no dead-letter queue)


async def test_a_move_with_an_empty_or_needless_destination_is_refused(start_daemon):
    api = Client(await start_daemon())
    await _queue_with_pull_consumer(api, "work")
    await api.call("POST", Q, {"queue_name": "other"})
    await api.call("POST", M + "/batch", {"messages": [{"body": 1}, {"body": 2}]})
    refused = [
        {"action": "redrive", "destination": ""},
        {"action": "delete", "destination": ""},
        # a delete naming a queue: most likely a redrive meant, and deleting is for good
        {"action": "delete", "destination": "other"},
    ]
    for body in refused:
        assert not documented_as_valid("POST", M + "/move", body), body
        await api.call("POST", M + "/move", body, expect=400)
    assert (await api.call("GET", ONE + "/metrics"))["backlog_count"] == 2
    assert await api.call("GET", "/accounts/{account_id}/move_tasks") == []


async def test_a_move_naming_a_seq_the_queue_does_not_hold_is_refused(start_daemon):
    api = Client(await start_daemon())
    await _queue_with_pull_consumer(api, "work")
    await api.call("POST", Q, {"queue_name": "other"})
    await api.call("POST", M + "/batch", {"messages": [{"body": 1}, {"body": 2}]})
    page = await api.call("POST", M + "/browse", {})
    seqs = [m["seq"] for m in page["messages"]]
    other = await api.call("POST", Q, {"queue_name": "third"})
    await api.call("POST", M, {"body": 3}, queue_id=other["queue_id"])
    [elsewhere] = (await api.call("POST", M + "/browse", {}, queue_id=other["queue_id"]))[
        "messages"
    ]
    for body in (
        {"action": "delete", "seqs": [*seqs, max(seqs) + 1000]},
        {"action": "redrive", "destination": "other", "seqs": [elsewhere["seq"]]},
    ):
        await api.call("POST", M + "/move", body, expect=400)
    assert (await api.call("GET", ONE + "/metrics"))["backlog_count"] == 2
    assert await api.call("GET", "/accounts/{account_id}/move_tasks") == []
    task = await api.call("POST", M + "/move", {"action": "delete", "seqs": seqs[:1]})
    assert task["total"] == 1


async def test_the_document_states_what_a_search_needs(start_daemon):
    api = Client(await start_daemon())
    await _queue_with_pull_consumer(api)
    await api.call("POST", M, {"body": "needle", "content_type": "text"})
    for body in ({}, {"query": ""}, {"query": None, "message_id": ""}, {"limit": 5}):
        assert not documented_as_valid("POST", M + "/search", body), body
        await api.call("POST", M + "/search", body, expect=400)
    for body in ({"query": "needle"}, {"message_id": "0" * 32}, {"query": "", "message_id": "x"}):
        assert documented_as_valid("POST", M + "/search", body), body
        await api.call("POST", M + "/search", body)
